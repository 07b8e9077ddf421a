"""Seconds spent in each phase of the batched simulator's work (backend_options["profile"]).

On a GPU a phase is a pair of CUDA events recorded on the stream its work runs on, around its
graph launch; the elapsed times are read in batches (every READ_EVERY phases, and when the totals
are asked for), so profiling adds almost no synchronisation of its own to a step. On warp's CPU device
every launch runs to completion before it returns, so a phase is a host timer around it: the same
calls, testable without a GPU. Host work (drawing episodes) is always timed on the host.

Phase names (PHASES; "convert CAMERA MODALITY" per camera and modality) are what the bench shows.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

import warp as wp

READ_EVERY = 256  # phases queued before their events are read (nearly all done by then; a read waits for the rest)

PHYSICS = "physics"
CONTROLLERS = "controllers and fault checks"
FORWARD = "forward kinematics"
CONDITIONS = "conditions"
BVH = "render: bvh refit"
RENDER = "render: ray tracing (all cameras, one launch)"
CONVERT = "convert"  # + camera and modality
LOW_DIM = "low-dim state"
PAGE_WRITE = "write into the result pages"
RESET_DRAW = "reset: episode draw (host)"
RESET_DEVICE = "reset: upload and kernels"
PHASES = (PHYSICS, CONTROLLERS, FORWARD, CONDITIONS, BVH, RENDER, CONVERT, LOW_DIM, PAGE_WRITE, RESET_DRAW,
          RESET_DEVICE)


def conversion(camera: str, modality: str) -> str:
    return f"{CONVERT} {camera} {modality}"


class PhaseTimer:
    """Totals in seconds per phase name on one warp device, since creation or the last `take()`."""

    def __init__(self, device: wp.Device):
        self.device = device
        self._totals: defaultdict[str, float] = defaultdict(float)
        self._queued: list[tuple[str, wp.Event, wp.Event]] = []
        self._spare: list[wp.Event] = []

    def on_stream(self, name: str, stream: wp.Stream | None) -> AbstractContextManager[None]:
        """Time the work queued inside the block on `stream` (None: warp's CPU device, timed on the host)."""
        if stream is None:
            return self.on_host(name)
        return self._events(name, stream)

    @contextmanager
    def on_host(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self._totals[name] += time.perf_counter() - start

    @contextmanager
    def _events(self, name: str, stream: wp.Stream) -> Iterator[None]:
        start = stream.record_event(self._event())
        yield
        self._queued.append((name, start, stream.record_event(self._event())))
        if len(self._queued) >= READ_EVERY:
            self._read()

    def _event(self) -> wp.Event:
        return self._spare.pop() if self._spare else wp.Event(self.device, enable_timing=True)

    def _read(self) -> None:
        for name, start, end in self._queued:
            self._totals[name] += wp.get_event_elapsed_time(start, end, synchronize=True) / 1000
            self._spare += (start, end)
        self._queued.clear()

    def take(self) -> dict[str, float]:
        """The totals so far (waiting for queued phases to finish); counting starts again from zero."""
        self._read()
        totals = dict(self._totals)
        self._totals.clear()
        return totals


def phase(timer: PhaseTimer | None, name: str, stream: wp.Stream | None) -> AbstractContextManager[Any]:
    """timer.on_stream(name, stream), or nothing when not profiling."""
    return nullcontext() if timer is None else timer.on_stream(name, stream)
