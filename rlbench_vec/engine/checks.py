"""Checks of what a caller passes to the vector env's methods: actions, env ids, seeds and reset
options. Pure functions: each returns the normalised value or raises a typed error saying what was
wrong and how to fix it, before anything is sent to a worker.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..backends import backend_class
from ..config import EnvConfig, VectorConfig, integer
from ..distributed import rank_seed
from ..errors import ActionError, ConfigError
from ..spec import gripper_index, task_state_size
from ..task_names import snake_case
from ..wire.protocol import dumps


def pickled(payload: Any, what: str) -> bytes:
    """The payload as it travels to a worker; a clear error before anything is sent if it cannot."""
    try:
        return dumps(payload)
    except Exception as error:
        raise ConfigError(f"{what} must be picklable to reach the workers: {type(error).__name__}: {error}") from None


def actions(values: Any, count: int, chunked: bool, max_chunk: int, config: EnvConfig, low: np.ndarray,
            high: np.ndarray) -> np.ndarray:
    """(count, A) or (count, K, A) floats -> float32 (count, K, A); gripper clipped to its bounds."""
    array = np.asarray(values)
    if array.dtype.kind not in "fiu":
        raise ActionError(f"actions must be a real-valued array, got dtype {array.dtype}.")
    a = len(low)
    if array.ndim != (3 if chunked else 2) or array.shape[0] != count or array.shape[-1] != a or (
        chunked and not 1 <= array.shape[1] <= max_chunk
    ):
        expected = f"({count}, K, {a}) with 1 <= K <= max_chunk={max_chunk}" if chunked else f"({count}, {a})"
        raise ActionError(f"actions have shape {array.shape}; expected {expected} for arm_mode="
                          f"{config.arm_mode!r} + gripper_mode={config.gripper_mode!r}.")
    array = array.astype(np.float32, copy=False).reshape(count, -1, a)
    # ufuncs' reduce, not the methods' wrappers: a step's few actions cost less than the calls
    if not math.isfinite(np.add.reduce(array, axis=None)) and not np.isfinite(array).all():  # overflows rarely
        rows = sorted({int(r) for r in np.argwhere(~np.isfinite(array))[:, 0]})
        raise ActionError(f"actions contain NaN or inf (rows {rows}); send finite values.")
    g = gripper_index(config)
    gripper = array[..., g]
    if np.minimum.reduce(gripper, axis=None) < low[g] or np.maximum.reduce(gripper, axis=None) > high[g]:
        array = array.copy()
        np.clip(array[..., g], low[g], high[g], out=array[..., g])
    return array


def env_ids(values: Any, num_envs: int) -> np.ndarray:
    if values is None:
        return np.arange(num_envs)
    ids = np.asarray(values).reshape(-1)
    if ids.dtype.kind not in "iu":
        if ids.dtype.kind == "f" and ids.size and np.array_equal(ids, np.round(ids)):
            ids = ids.astype(np.int64)
        elif ids.size:
            raise ConfigError(f"env_ids must be integers, got {values!r}.")
    ids = ids.astype(np.int64)  # our own copy: the caller may reuse its array
    listed = ids.tolist()  # Python's min, max and set beat numpy's calls on the few ids of a partial batch
    if not listed or min(listed) < 0 or max(listed) >= num_envs or len(set(listed)) != len(listed):
        raise ConfigError(f"env_ids must be distinct integers in [0, {num_envs}), got {values!r}.")
    return ids


def reset_seeds(seed: int | Sequence[int | None] | None, num_envs: int) -> list[int | None]:
    """One seed per env: an int gives env i seed + i (+ the rank's offset), a list one each."""
    if seed is None or not isinstance(seed, (list, tuple, np.ndarray)):
        base = rank_seed(None if seed is None else integer("seed", seed, 0), num_envs)
        return [None if base is None else base + i for i in range(num_envs)]
    if len(seed) != num_envs:
        raise ConfigError(f"reset got {len(seed)} seeds for {num_envs} envs; give one per env.")
    return [None if s is None else integer("seed", s, 0) for s in seed]


def reset_options(options: dict[str, Any] | None, num_envs: int,
                  autoreset_mode: str) -> tuple[list[dict | None], np.ndarray]:
    """Per env: the shared options merged with its entry of options["env_options"]; and the reset mask."""
    shared = dict(options or {})
    mask = np.ones(num_envs, bool)
    if "reset_mask" in shared:
        if autoreset_mode != "disabled":
            raise ConfigError("reset(options={'reset_mask': ...}) resets chosen envs with autoreset_mode='disabled' "
                              f"(gymnasium's rule); this env uses autoreset_mode={autoreset_mode!r}.")
        mask = np.asarray(shared.pop("reset_mask"))
        if mask.dtype != bool or mask.shape != (num_envs,) or not mask.any():
            raise ConfigError(f"reset_mask must be a bool array of shape ({num_envs},) with at least one True.")
    own = shared.pop("env_options", None)
    if own is not None and (not isinstance(own, (list, tuple)) or len(own) != num_envs
                            or not all(o is None or isinstance(o, dict) for o in own)):
        raise ConfigError(f"options['env_options'] must be a list of {num_envs} dicts (or None), one per env.")
    merged = [({**shared, **(own[i] or {})} if own is not None else shared) or None for i in range(num_envs)]
    pickled(merged, "reset options")
    return merged, mask


def partial_reset(ids: np.ndarray, seeds: Any, options: dict[str, Any] | None, num_envs: int,
                  autoreset_mode: str) -> tuple[list[int | None], list[dict | None], np.ndarray]:
    """send_reset's arguments for the envs `ids` as every env's: seeds and options (None for the others), and
    the mask of the envs reset."""
    if isinstance(seeds, (int, np.integer)):
        raise ConfigError(f"send_reset takes one seed per env of env_ids (a list), got {seeds!r}.")
    if options is not None and "reset_mask" in options:
        raise ConfigError("send_reset resets the envs of env_ids: leave reset_mask out of its options.")
    picked = reset_seeds(list(seeds) if seeds is not None else [None] * len(ids), len(ids))
    own, _ = reset_options(options, len(ids), autoreset_mode)
    all_seeds: list[int | None] = [None] * num_envs
    all_options: list[dict | None] = [None] * num_envs
    for j, env in enumerate(ids.tolist()):
        all_seeds[env], all_options[env] = picked[j], own[j]
    mask = np.zeros(num_envs, bool)
    mask[ids] = True
    return all_seeds, all_options, mask


def reset_tasks(options: list[dict | None], mask: np.ndarray, tasks: list[str], config: EnvConfig,
                vc: VectorConfig, state_size: int) -> tuple[list[dict | None], list[str]]:
    """Each env's options with its task named: for an env reset (`mask`), the one it asks for (checked: the
    backend has it with these options, it may change tasks, its task_low_dim_state fits the layout's
    `state_size`), else the one it runs when that is not the task it was made with, so that a restarted
    worker's reset (with the env's last options) restores it; and
    each env's task after the reset (`tasks`: before it)."""
    backend = backend_class(config.backend)
    checked: set[str] = set()
    out, tasks = list(options), list(tasks)
    for env in range(len(tasks)):
        own = options[env] or {}
        if "task" not in own or not mask[env]:  # kept: the options a restart resets the env with name it
            if tasks[env] != config.task_of(env):
                out[env] = {**own, "task": tasks[env]}
            continue
        if not isinstance(own["task"], str):
            raise ConfigError(f"reset option 'task' names one task, got {own['task']!r} for env {env}.")
        task = snake_case(own["task"])
        if task not in checked and task != tasks[env]:
            reason = backend.one_task_reason or backend.task_change_reason
            if reason:
                raise ConfigError(f"reset option 'task' changes env {env}'s task to {task!r}, which this backend "
                                  f"cannot: {reason}")
            if vc.spare_envs or vc.recycle_after_episodes or vc.max_worker_rss_mb:
                raise ConfigError("reset option 'task' changes an env's task, which spare or recycled instances "
                                  "(made with the constructor's tasks) would not follow: leave spare_envs, "
                                  "recycle_after_episodes and max_worker_rss_mb unset to change tasks.")
            backend.validate(config.for_task(task))
            size = task_state_size(config.for_task(task)) if "task_low_dim_state" in (config.low_dim or ()) else 0
            if size > state_size:
                raise ConfigError(f"task {task!r} has a task_low_dim_state of {size} values, longer than this "
                                  f"vector env's {state_size} (the longest of the tasks it was made with): name "
                                  f"{task!r} among the constructor's tasks, or pass task_low_dim_size={size}.")
            checked.add(task)
        tasks[env] = task
        out[env] = {**own, "task": task}
    return out, tasks
