"""The policies `evaluate` scores: the oracle, random actions, or an agent loaded from a file or a module.

An agent is a factory `NAME` in `FILE.py` or `package.module`, called with the vector env (its spaces and
`env_config`) when it takes an argument, else with none. It returns a callable `act(obs, info) -> actions`:
obs holds the rows of the envs to act (batched as the vector env's observations), info["env_id"] which envs
they are, info["task"], info["descriptions"], info["variation"] and info["step"] one entry per row; actions
is (rows, action size), a numpy array or a torch tensor. An optional `reset(env_ids)` on what it returns is
called as those envs start new episodes (a stateful agent forgets them there).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError


class Policy:
    """What the evaluation drives: act on some envs' observations, forget envs that start new episodes."""

    def __init__(self, act: Callable[[Any, dict[str, Any]], Any], reset: Callable[[np.ndarray], Any] | None = None):
        self.act, self._reset = act, reset

    def reset(self, env_ids: np.ndarray) -> None:
        if self._reset is not None:
            self._reset(env_ids)


def oracle(env: Any) -> Policy:
    """The env acts its task's oracle (backend_options["oracle"]): the actions sent are checked, then ignored."""
    size = env.single_action_space.shape[0]
    return Policy(lambda obs, info: np.zeros((len(info["env_id"]), size), np.float32))


def random_actions(env: Any) -> Policy:
    """Samples of the env's action space, each a valid action (its bounds; unit quaternions)."""
    space = env.single_action_space
    return Policy(lambda obs, info: np.stack([space.sample() for _ in info["env_id"]]))


def _load(spec: str) -> Callable[..., Any]:
    """The factory `spec` names: FILE.py:NAME or package.module:NAME."""
    where, _, name = spec.rpartition(":")
    if not where or not name:
        raise ConfigError(f"--policy {spec!r}: give oracle, random, FILE.py:NAME or package.module:NAME.")
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
    except Exception as error:  # whatever the user's module raises while it loads
        raise ConfigError(f"--policy {spec!r} does not load: {type(error).__name__}: {error}") from None
    if not callable(factory):
        raise ConfigError(f"--policy {spec!r}: {name} is a {type(factory).__name__}, not a factory to call.")
    return factory


def check_loads(spec: str) -> None:
    """Load an agent's factory now, so that one that does not load fails before anything starts."""
    if spec not in ("oracle", "random"):
        _load(spec)


def make_policy(spec: str, env: Any) -> Policy:
    """The policy `spec` names, for this vector env."""
    if spec == "oracle":
        return oracle(env)
    if spec == "random":
        return random_actions(env)
    factory = _load(spec)
    try:
        takes_env = bool(inspect.signature(factory).parameters)
    except (TypeError, ValueError):  # a builtin or C callable: give it the env
        takes_env = True
    agent = factory(env) if takes_env else factory()
    if not callable(agent):
        raise ConfigError(f"--policy {spec!r}: the factory returned a {type(agent).__name__}, not a callable "
                          "act(obs, info) -> actions.")
    return Policy(agent, getattr(agent, "reset", None))


def as_actions(values: Any, rows: int, size: int) -> tuple[np.ndarray, list[str]]:
    """A policy's output as float32 (rows, size), and per row why it is no action ("" when it is one): the
    wrong shape fails every row, a NaN or inf its own row."""
    if hasattr(values, "detach"):  # a torch tensor, on any device
        values = values.detach().cpu().numpy()
    try:
        array = np.asarray(values, dtype=np.float32)
    except (TypeError, ValueError) as error:
        return np.zeros((rows, size), np.float32), [f"the policy returned no numbers: {error}"] * rows
    if array.shape != (rows, size):
        why = f"the policy returned actions of shape {array.shape}, not ({rows}, {size})"
        return np.zeros((rows, size), np.float32), [why] * rows
    finite = np.asarray(np.isfinite(array).all(axis=1))
    reasons = ["" if ok else "the policy returned NaN or inf" for ok in finite.tolist()]
    return np.where(finite[:, None], array, 0.0).astype(np.float32), reasons
