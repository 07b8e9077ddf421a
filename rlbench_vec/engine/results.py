"""Batch assembly: a page of results (rows of observations and outcomes in shared memory) plus what
the workers reported per env becomes gymnasium's (obs, reward, terminated, truncated, info).

Pure functions over arrays: no processes, no sockets. The rows [0, rows) of a page are one batch:
env ids in order for a full batch, completion order for a partial one (info["env_id"] says which).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import WorkerError
from ..wire.protocol import EPISODE_OVER

REWARD, TERMINATED, TRUNCATED, EXECUTED = range(4)  # rows of a slot's outcome block (see worker)


@dataclass
class Batch:
    """Which rows of which page hold a batch, and the per-row reports of the workers."""

    page: int
    rows: int
    envs: np.ndarray  # (rows,) env id of each row
    widths: np.ndarray  # (rows,) outcome columns each row's command wrote (its K; 0 for a failed one)
    flags: np.ndarray  # (rows,) record flags
    infos: list[dict[str, Any] | None]  # per row, None where there is none
    errors: list[WorkerError] = field(default_factory=list)

    @property
    def k(self) -> int:
        return int(self.widths.max(initial=1))


def add_info(infos: dict[str, Any], info: Mapping[str, Any], row: int, n: int) -> dict[str, Any]:  # noqa: C901
    """gymnasium's vector info: info[key] an array over the batch and info['_key'] its mask; dicts
    nest, arrays stack, final_obs and other objects go into object arrays (VectorEnv._add_info)."""
    for key, value in info.items():
        array: Any
        if isinstance(value, dict) and key != "final_obs":
            array = add_info(infos.get(key, {}), value, row, n)
        else:
            array = infos.get(key)
            if array is None:
                if key != "final_obs" and (type(value) in (int, float, bool) or isinstance(value, np.number)):
                    array = np.zeros(n, dtype=type(value))
                elif key != "final_obs" and isinstance(value, np.ndarray):
                    array = np.zeros((n, *value.shape), dtype=value.dtype)
                else:
                    array = np.full(n, None, dtype=object)
            array[row] = value
        infos[key] = array
        mask = infos.get("_" + key)
        if mask is None:
            mask = np.zeros(n, dtype=bool)
        mask[row] = True
        infos["_" + key] = mask
    return infos


def merge_infos(infos: Sequence[Mapping[str, Any] | None]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for row, info in enumerate(infos):
        if info:
            add_info(merged, info, row, len(infos))
    return merged


def outcomes(outcome: np.ndarray, batch: Batch, chunked: bool) -> tuple[np.ndarray, ...]:
    """reward, terminated, truncated, executed: (rows, K) from the page's outcome block (rows, 4, K),
    or (rows,) for a batch that is not chunked (K = 1). Columns past a row's own command width are
    stale and read as zero. Few numpy calls: each costs more than its work on a batch this small."""
    widths = batch.widths.tolist()
    k = max(widths, default=1)
    block = outcome[:batch.rows, :, :k] if chunked else outcome[:batch.rows, :, 0]
    if widths.count(k) != len(widths):
        mask = np.arange(k) < batch.widths[:, None, None] if chunked else batch.widths[:, None] > 0
        block = np.where(mask, block, 0.0)
    reward = block[:, REWARD].copy()
    flags = block[:, TERMINATED:] > 0  # one comparison for the three flag rows
    return reward, flags[:, 0], flags[:, 1], flags[:, 2]


def _copy(array: Any) -> Any:
    """A copy of a numpy array, or of a torch tensor (device observations), where it lives."""
    return array.copy() if isinstance(array, np.ndarray) else array.clone()


def assemble(batch: Batch, obs: Mapping[str, np.ndarray], outcome: np.ndarray,
             chunk: Mapping[str, np.ndarray] | None, chunked: bool, copy: bool):
    """The user's result for a batch. obs / chunk: the page's arrays (views of shared memory), obs
    maybe already cut to the batch's rows. Observations are views of rows [0, rows) unless `copy`.
    The batch's worker errors are the caller's to raise (Output.result)."""
    rows = batch.rows
    reward, terminated, truncated, executed = outcomes(outcome, batch, chunked)
    if copy:
        observations = {key: _copy(view[:rows]) for key, view in obs.items()}
    elif len(next(iter(obs.values()), ())) == rows:  # views already cut to the rows (all of a page's are alike)
        observations = dict(obs)
    else:
        observations = {key: view[:rows] for key, view in obs.items()}
    info = merge_infos(batch.infos) if any(batch.infos) else {}
    if not chunked:
        return observations, reward, terminated, truncated, info
    info["executed"] = executed
    if chunk:
        k = batch.k
        info["chunk_observations"] = {key: _copy(view[:rows, :k]) if copy else view[:rows, :k]
                                      for key, view in chunk.items()}
    return observations, reward, terminated, truncated, info


def episode_over(batch: Batch) -> np.ndarray:
    """The envs of the batch whose episode the worker reported over."""
    return batch.envs[(batch.flags & EPISODE_OVER) != 0]
