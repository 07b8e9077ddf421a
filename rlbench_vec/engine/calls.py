"""Backend calls through the workers (gymnasium's call/get_attr/set_attr, render, demos): one
command per env, collected in any order, each result a value or the WorkerError it raised.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..config import integer
from ..distributed import rank_seed
from ..errors import ConfigError, WorkerError
from .checks import pickled
from .envtable import IDLE
from .pool import Pool

DEMO_SEED_STRIDE = 100_003  # a worker's demo seeds: base + stride * (call * num_envs + env)


def public(name: Any, what: str) -> str:
    if not isinstance(name, str) or name.startswith("_"):
        raise ConfigError(f"{what} reaches public backend attributes only, not {name!r}.")
    return name


def raise_first(results: dict[int, Any]) -> dict[int, Any]:
    """Every call has finished: raise the first that failed (lowest env), if any."""
    for env in sorted(results):
        if isinstance(results[env], WorkerError):
            raise results[env]
    return results


def in_env_order(finished: list[tuple[int, Any]]) -> tuple:
    results = raise_first(dict(finished))
    return tuple(results[env] for env in sorted(results))


class Calls:
    def __init__(self, pool: Pool, num_envs: int, seed: int | None):
        self.pool, self.num_envs = pool, num_envs
        self.seed = rank_seed(seed, num_envs)
        self.demo_calls = 0

    def start(self, ids: np.ndarray, name: str, args: tuple, kwargs: dict, ends_episode: bool,
              timeout: float | None) -> None:
        payload = pickled((name, args, kwargs, bool(ends_episode)), f"the arguments of {name}()")
        self.pool.call(ids, payload, math.inf if timeout is None else float(timeout))
        if ends_episode:
            self.pool.table.over[ids] = True

    def wait(self, min_envs: int | None, timeout: float | None) -> list[tuple[int, Any]]:
        table = self.pool.table
        pending = np.flatnonzero(table.phase != IDLE)
        count = len(pending) if min_envs is None else min_envs
        if not len(pending) or not 1 <= count <= len(pending):
            raise ConfigError(f"call_wait() needs 1 <= min_envs <= {len(pending)} calls in flight, got {min_envs!r}.")
        if not self.pool.wait_until(lambda: table.done().size >= count, timeout):
            raise TimeoutError(f"fewer than {count} calls finished within {timeout} s: call again to collect them.")
        return list(self.pool.take_calls(table.done()).items())

    def per_env(self, values: Any) -> list:
        """set_attr's values: one for all, or a list with one per env."""
        if not isinstance(values, (list, tuple)):
            values = [values] * self.num_envs
        if len(values) != self.num_envs:
            raise ConfigError(f"set_attr got {len(values)} values for {self.num_envs} envs; give one or one per env.")
        return list(values)

    def demo_shares(self, amount: int, seed: int | None) -> list[tuple[int, int, int | None]]:
        """(env, demos, seed) for each env with a share of `amount` demos; every call draws new seeds."""
        amount = integer("amount", amount, 1)
        n = self.num_envs
        base = self.seed if seed is None else rank_seed(integer("seed", seed, 0), n)
        first = self.demo_calls * n  # every call draws new demos, not the last call's again
        self.demo_calls += 1
        shares = [(i, amount // n + (i < amount % n)) for i in range(n)]
        return [(i, share, None if base is None else base + DEMO_SEED_STRIDE * (first + i)) for i, share in shares
                if share]
