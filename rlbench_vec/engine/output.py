"""What the user gets from a batch: the page's rows assembled (results.assemble) as numpy views or
copies, observations a device backend keeps on its GPU brought to the host, or everything as torch
tensors (rlbench_vec.engine.tensors); info["action_clipped"] marks the envs whose actions were clipped.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..wire.shm import SharedBuffers
from .results import Batch, assemble
from .tensors import TensorConverter, event_waiter


class Output:
    def __init__(self, buffers: SharedBuffers, num_envs: int, copy_obs: bool, as_torch: bool, device: str | None):
        self.num_envs, self.copy_obs = num_envs, copy_obs
        self.pages: list[dict[str, Any]] = [
            {"obs": buffers.group(f"page{p}/obs"), "chunk": buffers.group(f"page{p}/chunk"),
             "outcome": buffers.arrays[f"page{p}/outcome"]} for p in (0, 1)]
        self.to_tensors = TensorConverter([page["obs"] for page in self.pages], device) if as_torch else None
        self.on_device = self._on_device()
        self._row_views: dict[tuple[int, int], dict[str, Any]] = {}
        self._wait_writes: Any = None  # a device backend's: the current stream waits for its writes into the pages
        self.clipped = np.zeros(num_envs, bool)  # envs whose actions in flight were clipped to the action space

    def _on_device(self) -> bool:
        """Observations stay on a device backend's GPU, and numpy is asked for."""
        return self.to_tensors is None and not isinstance(next(iter(self.pages[0]["obs"].values()), None), np.ndarray)

    def use_device_pages(self, pages: list[dict[str, dict[str, Any]]], written: bytes | None = None) -> None:
        """A worker that keeps observations on its device shared its two pages (again after a restart), and
        maybe the handle of the event its writes into them end with (EnvGroup.pages_written)."""
        for ours, theirs in zip(self.pages, pages):
            ours["obs"], ours["chunk"] = theirs["obs"], theirs.get("chunk", {})
        self.on_device = self._on_device()
        self._row_views.clear()
        some = next(iter(pages[0]["obs"].values()), None)
        self._wait_writes = event_waiter(written, some.device) if written is not None and some is not None else None

    def _views(self, page: int, rows: int) -> dict[str, Any]:
        """Views of a page's observations, rows [0, rows): made once per page and row count."""
        views = self._row_views.get((page, rows))
        if views is None:
            views = self._row_views[page, rows] = {key: array[:rows] for key, array in self.pages[page]["obs"].items()}
        return views

    def wait_copies(self, page: int) -> None:
        """With device="cuda", copies out of a page may still run: workers must not write it yet."""
        if self.to_tensors is not None:
            self.to_tensors.wait_copies(page)

    def result(self, batch: Batch, chunked: bool, env_ids: np.ndarray | None = None):
        """The user's result of a batch (info["env_id"]: a copy of env_ids, where given). A worker error in it is
        raised, the first, carrying the whole result (WorkerError.result) and every error (.errors)."""
        page = self.pages[batch.page]
        on_device = self.on_device
        copy = self.copy_obs and not on_device  # leaving the device copies already
        if self._wait_writes is not None:  # the worker replied with its writes queued: what reads the pages waits
            self._wait_writes()
        result = assemble(batch, self._views(batch.page, batch.rows), page["outcome"], page["chunk"], chunked, copy)
        if on_device and page["obs"]:  # numpy asked for: copy the observations to the host
            result = ({key: value.cpu().numpy() for key, value in result[0].items()}, *result[1:])
            chunk = result[4].get("chunk_observations")
            if chunk is not None:
                result[4]["chunk_observations"] = {key: value.cpu().numpy() for key, value in chunk.items()}
        clipped = self.clipped[batch.envs]
        if clipped.any():  # gymnasium's vector info: the flag over the batch and its mask
            result[4]["action_clipped"], result[4]["_action_clipped"] = clipped, clipped.copy()
            self.clipped[batch.envs] = False
        if self.to_tensors is not None:
            whole = batch.rows == self.num_envs and not self.copy_obs
            result = self.to_tensors(result, batch.page, whole)
        if env_ids is not None:
            result[4]["env_id"] = env_ids.copy()
        if batch.errors:  # the first, with the whole result: every env's state is already settled
            first = batch.errors[0]
            first.result, first.errors = result, list(batch.errors)
            raise first
        return result

    def close(self) -> None:
        if self.to_tensors is not None:
            self.to_tensors.close()  # unpin the block before it is unlinked
        # A device backend's pages are CUDA IPC mappings of its worker's memory: let them go before the worker
        # exits (else the env, kept alive by its pool's callback until a garbage collection, holds them on).
        self.pages = []
        self._row_views.clear()
        self._wait_writes = None
