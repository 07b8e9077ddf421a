"""Torch delivery of the engine's results (as_torch=True).

CPU (device None or "cpu"): observations are torch tensors over the shared memory itself. The
shared views never move, so their tensors are made once (torch.from_numpy) and handed out at every
full-batch step: zero copies, and the same overwrite-in-place contract as the numpy views.
Partial batches (recv) and copy_obs=True convert their fresh copies, again without copying.

CUDA (device "cuda" or "cuda:N"): the observation slots, which lie back to back in the shared block,
are registered once as pinned host memory (cudaHostRegister). A full batch then travels as one
asynchronous DMA of that whole span, on a side stream, straight from the memory the workers wrote,
into a fresh device buffer that the observation tensors view. Everything else (rewards, flags,
partial batches) goes through torch's pinned staging on the same stream. The caller's current stream
waits for the copy on the GPU, never on the host: the tensors are safe to use at once, the host goes
back to the user's loop while the DMA runs, and info["cuda_event"] marks the copy's end for work on
other streams (or event.synchronize() on the host). Before any worker may overwrite the shared slots
(the next send/reset, a worker restart), the engine calls `wait_copies()`. If registering fails
(e.g. a locked-memory limit), the span is staged through torch's pinned memory instead: one more
host copy, still asynchronous and correct.

Device backends (mjwarp on a GPU): the observations are the worker's own CUDA pages, shared once
through CUDA IPC. They reach the user as aliases of that memory (same address, no copy) that do not
hold the IPC mapping: torch counts every tensor a consumer keeps of a producer's memory, and a worker
exiting while the user still holds a step's observations printed "Producer process has been
terminated before all shared CUDA tensors released" at every close. With aliases the env alone holds
the pages, drops them in close() before its workers exit, and the worker frees its pages clean.
Like every view the engine returns, an alias is valid until the next reset/step/recv call, and not
after close().

Rewards, terminated, truncated, info["executed"] and info["chunk_observations"] become tensors too
(on the device); the rest of info (masks, descriptions, env_id...) stays numpy.

torch is an optional dependency: it is imported here only, when a converter is built.
"""

from __future__ import annotations

import ctypes
import logging
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import ConfigError

log = logging.getLogger("rlbench_vec")


def import_torch():
    try:
        import torch
    except ImportError as error:
        raise ConfigError("as_torch=True needs PyTorch: pip install torch (any CPU or CUDA build >= 2.1).") from error
    return torch


def event_waiter(handle: bytes, device: Any) -> Callable[[], None]:
    """For another process's interprocess CUDA event on `device`: a function that makes that device's
    current stream wait (on the GPU, not the host) for the event's latest record."""
    torch = import_torch()
    event = torch.cuda.Event.from_ipc_handle(device, handle)
    return lambda: event.wait(torch.cuda.current_stream(device))


def address_span(arrays: Mapping[str, np.ndarray]) -> tuple[int, int]:
    """(start address, size in bytes) of the smallest range holding every array."""
    starts = [a.__array_interface__["data"][0] for a in arrays.values()]
    ends = [start + a.nbytes for start, a in zip(starts, arrays.values())]
    return min(starts), max(ends) - min(starts)


def register_pinned(start: int, size: int) -> bool:
    """Page-lock host memory [start, start + size) for CUDA DMA; False (and a log line) if refused."""
    import torch

    cudart = torch.cuda.cudart()
    code = cudart.cudaHostRegister(start, size, 0)  # 0: cudaHostRegisterDefault
    if code != cudart.cudaError.success:
        log.warning("cudaHostRegister of the shared observations failed (%s): staging them through torch's "
                    "pinned memory instead (one more host copy). Raising the locked-memory limit (ulimit -l) "
                    "fixes it.", code)
        return False
    return True


def unregister_pinned(start: int) -> None:
    import torch

    torch.cuda.cudart().cudaHostUnregister(start)


class CudaMemory:
    """A bare `__cuda_array_interface__` over device memory: torch.as_tensor of it makes a tensor that
    references nothing but this object (no CUDA IPC mapping, no allocator block)."""

    def __init__(self, tensor: Any):
        self.__cuda_array_interface__ = {
            "shape": tuple(tensor.shape), "strides": tuple(s * tensor.element_size() for s in tensor.stride()),
            "typestr": np.dtype(str(tensor.dtype).removeprefix("torch.")).str, "data": (tensor.data_ptr(), False),
            "version": 2}


ALIAS_CACHE = 256  # aliases kept: two pages of full batches reuse theirs; partial batches' slices vary


class TensorConverter:
    """Called by RLBenchVectorEnv on every (obs, reward, terminated, truncated, info) it returns.
    pages: each page's observation views (rlbench_vec.wire.shm: results alternate between two pages)."""

    def __init__(self, pages: Sequence[Mapping[str, np.ndarray]], device: str | None = None):
        torch = import_torch()
        self._torch = torch
        self.device = torch.device(device or "cpu")
        if self.device.type not in ("cpu", "cuda"):
            raise ConfigError(f"device must be 'cpu' or 'cuda[:N]', got {device!r}.")
        self._pages = [dict(views) for views in pages]
        self._shared = [{key: torch.from_numpy(view) for key, view in views.items()} for views in self._pages]
        self._pending: dict[int, Any] = {}  # page -> the torch.cuda.Event ending the last DMA reading it
        self._aliases: dict[tuple, Any] = {}  # (address, shape, strides, dtype) -> alias of a device page's view
        self._device_pages = False  # results are a device backend's page tensors, read by the user's kernels
        self._unregister: weakref.finalize | None = None
        self.pinned = False
        if self.device.type == "cuda":
            self._setup_cuda(device)

    def _setup_cuda(self, device: str | None) -> None:
        torch = self._torch
        if not torch.cuda.is_available():
            raise ConfigError(f"device={device!r} but torch.cuda is not available (CPU-only torch or no GPU).")
        if self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        self._stream = torch.cuda.Stream(self.device)
        self._spans = []
        if not any(self._pages):  # the backend keeps observations on its device: nothing to pin
            return
        for views, shared in zip(self._pages, self._shared):
            # a page's whole observation span as one byte tensor (the views keep the memory mapped), and
            # where each key lies in it
            start, size = address_span(views)
            span = np.ctypeslib.as_array(ctypes.cast(start, ctypes.POINTER(ctypes.c_uint8)), shape=(size,))
            layout = {key: (view.__array_interface__["data"][0] - start, view.nbytes, shared[key].dtype, view.shape)
                      for key, view in views.items()}
            self._spans.append((torch.from_numpy(span), layout))
        start, size = address_span({f"{p}/{k}": v for p, views in enumerate(self._pages) for k, v in views.items()})
        self.pinned = register_pinned(start, size)
        if self.pinned:  # unpin when the converter goes, even if close() is never called
            self._unregister = weakref.finalize(self, unregister_pinned, start)

    def __call__(self, result: tuple, page: int, whole_page: bool) -> tuple:
        """whole_page: obs are the page's shared views themselves (a full batch without copy_obs)."""
        obs, reward, terminated, truncated, info = result
        info = dict(info)
        small = {"reward": reward, "terminated": terminated, "truncated": truncated}
        if "executed" in info:
            small["executed"] = info["executed"]
        chunk_obs = info.get("chunk_observations")
        if obs and not isinstance(next(iter(obs.values())), np.ndarray):  # tensors of a device backend already
            obs = {key: self._alias(value) for key, value in obs.items()}
            if chunk_obs is not None:
                info["chunk_observations"] = {key: self._alias(value) for key, value in chunk_obs.items()}
            self._device_pages = self.device.type == "cuda"
            moved = {key: self._torch.from_numpy(value).to(self.device) for key, value in small.items()}
            info.update({"executed": moved.pop("executed")} if "executed" in moved else {})
            return obs, moved["reward"], moved["terminated"], moved["truncated"], info
        if self.device.type == "cpu":
            out = dict(self._shared[page]) if whole_page else {k: self._torch.from_numpy(v) for k, v in obs.items()}
            moved = {k: self._torch.from_numpy(v) for k, v in small.items()}
            if chunk_obs is not None:
                info["chunk_observations"] = {k: self._torch.from_numpy(v) for k, v in chunk_obs.items()}
        else:
            out, moved = self._copy_to_cuda(page, None if whole_page else obs, small, chunk_obs, info)
        if "executed" in moved:
            info["executed"] = moved["executed"]
        return out, moved["reward"], moved["terminated"], moved["truncated"], info

    def _alias(self, view: Any) -> Any:
        """A view of a device page on our device as an alias that holds no CUDA IPC mapping (see the
        module's docstring); moved to another device, a copy."""
        if view.device != self.device or view.device.type != "cuda":
            return view.to(self.device)
        key = (view.data_ptr(), tuple(view.shape), view.stride(), view.dtype)
        alias = self._aliases.get(key)
        if alias is None:
            if len(self._aliases) >= ALIAS_CACHE:
                self._aliases.clear()
            alias = self._aliases[key] = self._torch.as_tensor(CudaMemory(view), device=self.device)
        return alias

    def _copy_to_cuda(self, page: int, copies: Mapping[str, np.ndarray] | None, small: Mapping[str, np.ndarray],
                      chunk_obs: Mapping[str, np.ndarray] | None, info: dict) -> tuple[dict, dict]:
        """All host-to-device copies of one result, asynchronous, on the side stream. copies: the
        observations when they are not a whole page (a partial batch, or copy_obs), else None."""
        torch = self._torch
        current = torch.cuda.current_stream(self.device)
        staged = lambda a: torch.from_numpy(np.ascontiguousarray(a)).pin_memory()  # pinned, so truly async
        # a partial batch's rows are views of the (registered, so pinned) page: DMA them directly
        direct = lambda a: torch.from_numpy(a) if self.pinned and a.flags.c_contiguous and self._in_page(a, page) \
            else staged(a)  # noqa: E731
        with torch.cuda.stream(self._stream):
            # Allocated on the side stream, so the allocator orders reuse of their memory after this copy.
            if copies is None:
                host_span, layout = self._spans[page]
                span = torch.empty(host_span.shape, dtype=torch.uint8, device=self.device)
                span.copy_(host_span if self.pinned else host_span.pin_memory(), non_blocking=True)
                out = {key: span[offset:offset + size].view(dtype).view(shape)
                       for key, (offset, size, dtype, shape) in layout.items()}
                tensors = [span]
            else:
                out = {key: direct(value).to(self.device, non_blocking=True) for key, value in copies.items()}
                tensors = list(out.values())
            moved = {key: staged(value).to(self.device, non_blocking=True) for key, value in small.items()}
            tensors += moved.values()
            if chunk_obs is not None:
                info["chunk_observations"] = {k: staged(v).to(self.device, non_blocking=True)
                                              for k, v in chunk_obs.items()}
                tensors += info["chunk_observations"].values()
            event = torch.cuda.Event()
            event.record(self._stream)
        for tensor in tensors:
            tensor.record_stream(current)  # freed later: the allocator waits for the user's work too
        current.wait_event(event)  # GPU-side ordering: the host does not block
        if self.pinned:
            self._pending[page] = event  # this DMA may read the page itself
        info["cuda_event"] = event
        return out, moved

    def _in_page(self, array: np.ndarray, page: int) -> bool:
        host_span, _ = self._spans[page]
        start = host_span.data_ptr()
        address = array.__array_interface__["data"][0]
        return start <= address < start + host_span.numel()

    def wait_copies(self, page: int) -> None:
        """Block until no copy still reads this page. The engine calls this before workers may write
        it again. Pages a device backend shares are read by the user's own kernels, queued by now (the
        next step was asked for): wait for the current stream, so the worker cannot overwrite a page
        that work queued on it still reads."""
        event = self._pending.pop(page, None)
        if event is not None:
            event.synchronize()
        if self._device_pages:
            self._torch.cuda.current_stream(self.device).synchronize()

    def close(self) -> None:
        """Finish the copies in flight and unpin the shared block (before it is unmapped)."""
        for page in list(self._pending):
            self.wait_copies(page)
        self._aliases.clear()
        if self._unregister is not None:
            self._unregister()
