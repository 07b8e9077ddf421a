"""The policies `evaluate` scores: the oracle, the keyframes of each episode's oracle demo, random actions, or an
agent loaded from a file or a module, each with its identity (what a resumed run folder must match), and the check
of what a policy returns.

An agent is a factory `NAME` in `FILE.py` or `package.module`, called with the vector env (its spaces and
`env_config`) when it takes a positional argument, else with none, and with --policy_args as keyword arguments.
It returns either a callable `act(obs, info) -> actions`: obs holds the rows of the envs to act (batched as the
vector env's observations, camera matrices included, copies that stay valid), info["env_id"] which envs they
are, info["task"], info["descriptions"] (all of the episode's), info["lang_goal"] (the first),
info["variation_index"], info["episode"], info["repeat"] and info["step"] one entry per row; actions is (rows,
action size), a numpy array or a torch tensor. An optional `reset(env_ids)` on what it returns is called as
those envs start new episodes. Or a YARR Agent (`act(step, observation, deterministic)` and `reset()`), driven
one env at a time as YARR drives it (cli/yarr.py). The factory's optional `identity` attribute (a JSON value,
or a callable returning one: a checkpoint's sha256) joins the identity.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import inspect
import sys
import zlib
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, PolicyError, PolicyOutputError
from .yarr import YarrAgent, is_yarr_agent

BUILT_IN = ("oracle", "keyframes", "random")


class Policy:
    """What the evaluation drives: act on some envs' observations, forget envs that start new episodes. A
    policy's exception becomes a PolicyError (its traceback chained)."""

    def __init__(self, act: Callable[[Any, dict[str, Any]], Any], reset: Callable[[np.ndarray], Any] | None = None):
        self._act, self._reset = act, reset

    def act(self, obs: Any, info: dict[str, Any]) -> Any:
        with raised_by_policy("act(obs, info)"):
            return self._act(obs, info)

    def reset(self, env_ids: np.ndarray) -> None:
        if self._reset is not None:
            with raised_by_policy("act.reset(env_ids)"):
                self._reset(env_ids)


@contextlib.contextmanager
def raised_by_policy(where: str) -> Iterator[None]:
    """Turns an exception the policy's code raises into a PolicyError in one line."""
    try:
        yield
    except PolicyOutputError:
        raise
    except Exception as error:
        raise PolicyError(f"the policy's {where} raised {type(error).__name__}: {error}; finished episodes are kept; "
                          "run the same command to resume (--debug shows the traceback)") from error


def oracle(env: Any) -> Policy:
    """The env acts its task's oracle (backend_options["oracle"]) or the keyframes of the episode's own oracle demo
    (backend_options["keyframes"]): the actions sent are checked, then ignored."""
    space = env.single_action_space
    middle = ((space.low + space.high) / 2).astype(np.float32)  # inside the bounds: the checks pass it
    return Policy(lambda obs, info: np.tile(middle, (len(info["env_id"]), 1)))


def random_actions(env: Any, seed: int) -> Policy:
    """Samples of the env's action space, each a valid action (its bounds; unit quaternions). Row r's sample comes
    from (seed, its task, episode, step, repeat) alone: the same actions whatever the envs and the order they act
    in."""
    space = env.single_action_space

    def act(obs: Any, info: dict[str, Any]) -> np.ndarray:
        rows = []
        for task, episode, step, repeat in zip(info["task"], info["episode"], info["step"], info["repeat"]):
            entropy = [seed, zlib.crc32(task.encode()), episode, step] + ([repeat] if repeat else [])
            space.seed(int(np.random.SeedSequence(entropy).generate_state(1)[0]))
            rows.append(space.sample())
        return np.stack(rows)

    return Policy(act)


class PolicySource:
    """The policy `spec` names, loaded once: its identity (recorded as a run folder's first record) and `make`."""

    def __init__(self, spec: str, arguments: Mapping[str, Any] | None = None):
        self.spec, self.arguments = spec, dict(arguments or {})
        if self.arguments and spec in BUILT_IN:
            raise ConfigError(f"--policy {spec} takes no --policy_args; they are the keyword arguments of a factory.")
        self.factory: Callable[..., Any] | None = None
        self.identity: dict[str, Any] = {}  # a built-in policy: the package version identifies it
        if spec not in BUILT_IN:
            self.factory, source = _load(spec)
            self.identity["sha256"] = hashlib.sha256(source.read_bytes()).hexdigest()
            self.identity["file"] = str(source)
            extra = getattr(self.factory, "identity", None)
            if extra is not None:
                with raised_by_policy("factory's identity"):
                    self.identity["factory"] = extra() if callable(extra) else extra

    def make(self, env: Any, seed: int, max_steps: int) -> Policy:
        """The policy for this vector env (max_steps: the episodes' length, for a YARR agent's time)."""
        if self.spec in ("oracle", "keyframes"):
            return oracle(env)
        if self.spec == "random":
            return random_actions(env, seed)
        assert self.factory is not None
        try:
            takes_env = any(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
                            and p.name not in self.arguments  # a positional parameter --policy_args leaves
                            for p in inspect.signature(self.factory).parameters.values())
        except (TypeError, ValueError):  # a builtin or C callable: give it the env
            takes_env = True
        with raised_by_policy("factory"):
            agent = self.factory(env, **self.arguments) if takes_env else self.factory(**self.arguments)
        if is_yarr_agent(agent):
            yarr_agent = YarrAgent(agent, env.env_config, max_steps)
            return Policy(yarr_agent.act, yarr_agent.reset)
        if not callable(agent):
            raise PolicyOutputError(f"--policy {self.spec!r}: the factory returned a {type(agent).__name__}, neither "
                                    "a callable act(obs, info) -> actions nor a YARR Agent (act(step, observation, "
                                    "deterministic) and reset()).")
        return Policy(agent, getattr(agent, "reset", None))


def _load(spec: str) -> tuple[Callable[..., Any], Path]:
    """The factory `spec` names (FILE.py:NAME or package.module:NAME) and the file that holds it."""
    where, _, name = spec.rpartition(":")
    if not where or not name:
        raise ConfigError(f"--policy {spec!r}: give oracle, keyframes, random, FILE.py:NAME or package.module:NAME.")
    try:
        if where.endswith(".py"):
            path = Path(where).resolve()
            if not path.is_file():
                raise FileNotFoundError(f"no file {where}")
            module_spec = importlib.util.spec_from_file_location(f"rlbench_vec_policy_{path.stem}", path)
            assert module_spec is not None and module_spec.loader is not None
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[module_spec.name] = module  # pickling and dataclasses look it up there
            module_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(where)
        factory = getattr(module, name)
        source = Path(inspect.getsourcefile(module) or "")
    except Exception as error:  # whatever the user's module raises while it loads
        raise ConfigError(f"--policy {spec!r} does not load: {type(error).__name__}: {error}") from None
    if not callable(factory):
        raise ConfigError(f"--policy {spec!r}: {name} is a {type(factory).__name__}, not a factory to call.")
    if not source.is_file():
        raise ConfigError(f"--policy {spec!r}: its module has no source file to identify it by; name a .py file.")
    return factory, source


def as_actions(values: Any, rows: int, low: np.ndarray, high: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """A policy's output as float32 (rows, size), and per row why it is no action ("" when it is one): a NaN or
    inf, or a number outside the action space's bounds [low, high], fails its own row (the model's output, scored
    as an invalid action, as RLBench scores a pose outside its workspace: never clipped into a score); anything
    that is not (rows, size) numbers raises PolicyOutputError (a programming error, never a score)."""
    size = len(low)
    if hasattr(values, "detach"):  # a torch tensor, on any device
        values = values.detach().cpu().numpy()
    expected = f"expected ({rows}, {size}): a row per env in obs, the env's action size each"
    try:
        array = np.asarray(values, dtype=np.float32)
    except (TypeError, ValueError) as error:
        raise PolicyOutputError(f"the policy returned {type(values).__name__} that is no array of numbers ({error}); "
                                f"{expected}.") from None
    if array.shape != (rows, size):
        raise PolicyOutputError(f"the policy returned actions of shape {array.shape}; {expected}.")
    finite = np.asarray(np.isfinite(array).all(axis=1))
    reasons = ["" if ok else "policy: NaN or inf in the action" for ok in finite.tolist()]
    for row, index in zip(*np.nonzero(np.isfinite(array) & ((array < low) | (array > high)))):
        if not reasons[row]:
            reasons[row] = (f"policy: action[{index}] = {array[row, index]:.6g} is outside the action space's bounds "
                            f"[{low[index]:.6g}, {high[index]:.6g}]")
    ok = np.array([not why for why in reasons], bool)
    return np.where(ok[:, None], array, 0.0).astype(np.float32), reasons
