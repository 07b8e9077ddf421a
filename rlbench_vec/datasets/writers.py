"""A pool of writer processes for collected demos: the collection loop hands a demo over and goes on
collecting while a writer encodes and stores it.

Hand-over: the demo's arrays are copied into one of `queue_size` shared-memory slots and a small message
names the slot (pickling ~20 MB of arrays through a pipe costs the main process several times more, and it
already receives every demo from the workers). The slots are the queue: when all are taken, `submit` waits
for a writer to free one, the back-pressure that bounds memory. Writers are processes, not threads: zlib
releases the GIL, but the rest of writing an episode (pickling, conversions, per-file work) holds it, so
threads scale worse (benchmarks/collect_bench.py writes whole episodes both ways) and would compete with
the collection loop for the main process's GIL.

Formats: "rlbench" (rlbench_writer.write_episode: any number of writers, an episode per folder) and
"lerobot" (lerobot_format.LeRobotWriter: one writer process, since a LeRobot dataset takes one writer).
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..backends.base import Demo, WrittenDemo
from ..config import EnvConfig
from ..errors import DatasetError
from ..wire.process import SPAWN, death_reason, die_with_parent
from ..wire.shm import SHM_DIR, Field, SharedBuffers, more_room, plan_fields
from .lerobot_format import LeRobotOptions
from .rlbench_format import stored_episodes
from .rlbench_writer import write_episode

FORMATS = ("rlbench", "lerobot")
SLOT_HEADROOM = 1.25  # a slot holds a demo this much longer than the one that sized it
POLL_S = 0.5  # how often a waiting main process checks that the writers are alive
CLOSE_TIMEOUT_S = 60.0  # for the writers to finish what is queued (LeRobot finalises its files)


@dataclass(frozen=True, order=True)
class Episode:
    """Where a demo goes: episode `episode` of variation `variation` of `task` (RLBench's numbering), in the
    variation's folder or (all_variations, the dataset generator's flag) in the task's all_variations folder."""

    task: str
    variation: int
    episode: int
    all_variations: bool = False


@dataclass(frozen=True)
class WriterOptions:
    """format: "rlbench" or "lerobot". processes: writer processes (lerobot: 1; rlbench: 0 when the workers write
    their demos themselves, see written_in_worker). queue_size: demos handed
    over and not yet written, at most. lerobot: options of LeRobot datasets."""

    format: str = "rlbench"
    processes: int = 1
    queue_size: int = 2
    lerobot: LeRobotOptions = LeRobotOptions()


@dataclass
class WriterStats:
    """What the pool measured. depth: demos queued or being written, sampled at each submit. blocked_s: time
    `submit` waited for a free slot (the collection loop stalled on writing). handoff_s: time copying demos
    into slots. write_s / write_cpu_s: the writers' own time and CPU time per demo."""

    processes: int
    queue_size: int
    started: float = field(default_factory=time.perf_counter)
    depth: list[int] = field(default_factory=list)
    blocked_s: float = 0.0
    handoff_s: float = 0.0
    write_s: list[float] = field(default_factory=list)
    write_cpu_s: float = 0.0
    steps: int = 0

    def summary(self) -> dict[str, Any]:
        wall = time.perf_counter() - self.started
        written = len(self.write_s)
        return {
            "processes": self.processes, "queue_size": self.queue_size, "demos_written": written,
            "steps_written": self.steps,
            "queue_depth_mean": round(float(np.mean(self.depth)), 2) if self.depth else 0.0,
            "queue_depth_max": max(self.depth, default=0),
            "queue_full_fraction": round(float(np.mean(np.array(self.depth) >= self.queue_size)), 3)
            if self.depth else 0.0,
            "blocked_s": round(self.blocked_s, 3),
            "handoff_ms_per_demo": round(1e3 * self.handoff_s / max(written, 1), 2),
            "write_s_per_demo": round(float(np.mean(self.write_s)), 4) if written else 0.0,
            "write_ms_per_step": round(1e3 * sum(self.write_s) / max(self.steps, 1), 3),
            "write_cpu_ms_per_step": round(1e3 * self.write_cpu_s / max(self.steps, 1), 3),
            "busy_fraction": round(sum(self.write_s) / (self.processes * wall), 3) if wall > 0 and self.processes
            else 0.0,
            "capacity_demos_per_s": round(self.processes * written / sum(self.write_s), 2)
            if written and self.processes else 0.0,
        }


def _view(flat: np.ndarray, spec: Field) -> np.ndarray:
    return flat[spec.offset:spec.offset + spec.nbytes].view(spec.dtype).reshape(spec.shape)


class WriterPool:
    """Writer processes storing demos under `out` in `options.format`. configs: the validated EnvConfig each
    task's demos were collected with (LeRobot's features come from it).

    submit(episode, demo) hands a successful demo over; take_finished() returns (episode, error or None) for
    each write done since the last call; completed(task) lists the (variation, episode) pairs on disk.
    close() lets the writers finish what is queued, and releases everything.
    """

    def __init__(self, out: str | os.PathLike, options: WriterOptions, configs: Mapping[str, EnvConfig]):
        if options.format not in FORMATS:
            raise DatasetError(f"unknown format {options.format!r}; choose from {', '.join(FORMATS)}.")
        processes = 1 if options.format == "lerobot" else options.processes
        self.out, self.options = Path(out), options
        self.stats = WriterStats(processes, options.queue_size)
        self._tasks: Any = SPAWN.Queue()
        self._results: Any = SPAWN.Queue()
        self._slots: list[SharedBuffers | None] = [None] * options.queue_size
        self._free = list(range(options.queue_size))
        self._busy: dict[int, Episode] = {}
        self._finished: list[tuple[Episode, str | None]] = []
        self._completed: dict[str, set[tuple[int, int]]] | None = None
        self._closed = False
        main_thread = threading.current_thread() is threading.main_thread()
        self._processes = [
            SPAWN.Process(target=_serve, name=f"rlbench_vec-writer-{i}", daemon=True,
                          args=(i, str(out), options, dict(configs), self._tasks, self._results, os.getpid(),
                                main_thread))
            for i in range(processes)]
        try:
            for process in self._processes:
                process.start()
        except BaseException:
            self.close()
            raise

    def completed(self, task: str) -> set[tuple[int, int]]:
        """(variation, episode) pairs of `task` already stored (LeRobot: as its writer found them at start)."""
        if self.options.format == "rlbench":
            return stored_episodes(self.out, task)
        while self._completed is None:
            self._wait()
        return set(self._completed.get(task, set()))

    def submit(self, episode: Episode, demo: Demo) -> None:
        """Copy `demo` into a free slot (waiting for one if none is) and queue it for a writer."""
        self.stats.depth.append(len(self._busy))
        if not self._free:
            start = time.perf_counter()
            while not self._free:
                self._wait()
            self.stats.blocked_s += time.perf_counter() - start
        start = time.perf_counter()
        layout, size = plan_fields({key: (array.shape, array.dtype) for key, array in demo.observations.items()})
        slot = self._free.pop()
        buffers = self._slot(slot, size)
        flat = buffers.arrays["bytes"]
        for spec in layout:
            _view(flat, spec)[...] = demo.observations[spec.name]
        self._tasks.put((slot, buffers.name, buffers.fields, layout, episode, replace(demo, observations={})))
        self._busy[slot] = episode
        self.stats.handoff_s += time.perf_counter() - start

    def written_in_worker(self, episode: Episode, written: WrittenDemo) -> None:
        """A demo its worker wrote (a pool of no processes): counted as if a writer had."""
        self.stats.write_s.append(written.write_s)
        self.stats.write_cpu_s += written.write_cpu_s
        self.stats.steps += written.steps
        self._finished.append((episode, None))

    def take_finished(self) -> list[tuple[Episode, str | None]]:
        """Writes finished since the last call: (episode, None) when stored, (episode, error message) if not."""
        if not self._closed:
            self._read()
        finished, self._finished = self._finished, []
        return finished

    def _read(self) -> None:
        while True:
            try:
                message = self._results.get_nowait()
            except queue.Empty:
                return
            self._handle(message)

    @property
    def pending(self) -> int:
        """Demos handed over and not yet written."""
        return len(self._busy)

    def drain(self) -> None:
        """Wait until every demo handed over is written."""
        while self._busy:
            self._wait()

    def close(self) -> None:
        """Let the writers finish what is queued and stop; stop them at once if they do not in time."""
        started = [process for process in self._processes if process.pid is not None]
        for _ in started:
            self._tasks.put(None)
        deadline = time.monotonic() + CLOSE_TIMEOUT_S
        while any(process.is_alive() for process in started) and time.monotonic() < deadline:
            with contextlib.suppress(DatasetError):  # read their results meanwhile: a full pipe would stall them
                self._read()
            time.sleep(0.02)
        for process in started:
            if process.is_alive():
                process.kill()
            process.join()
        with contextlib.suppress(DatasetError):
            self._read()
        self._closed = True
        for slot in self._slots:
            if slot is not None:
                slot.unlink()
        self._slots = [None] * len(self._slots)
        self._tasks.close()
        self._results.close()

    def _slot(self, index: int, size: int) -> SharedBuffers:
        """Slot `index`, (re)made large enough for `size` bytes."""
        slot = self._slots[index]
        if slot is not None and slot.arrays["bytes"].nbytes >= size:
            return slot
        if slot is not None:
            slot.unlink()
            self._slots[index] = None
        capacity = int(size * SLOT_HEADROOM)
        stat = os.statvfs(SHM_DIR)
        free = stat.f_bavail * stat.f_frsize
        if capacity > free:
            raise DatasetError(f"handing a demo to the writers needs {capacity / 2**20:.0f} MiB of {SHM_DIR}, which "
                               f"has {free / 2**20:.0f} MiB free: use a smaller queue_size, smaller images or fewer "
                               f"cameras, or {more_room(capacity)}.")
        slot = self._slots[index] = SharedBuffers.create({"bytes": ((capacity,), np.dtype(np.uint8))})
        return slot

    def _wait(self) -> None:
        """Handle one message from the writers, checking every POLL_S that they are alive."""
        while True:
            try:
                self._handle(self._results.get(timeout=POLL_S))
                return
            except queue.Empty:
                for i, process in enumerate(self._processes):
                    if not process.is_alive():
                        raise DatasetError(f"writer process {i} died ({death_reason(process.exitcode)}); what it was "
                                           "writing is lost. Run the same command again to resume.") from None

    def _handle(self, message: tuple) -> None:
        kind, *rest = message
        if kind == "ready":
            self._completed = {**(self._completed or {}), **rest[0]}
        elif kind == "failed":
            raise DatasetError(f"a writer process could not start: {rest[0]}")
        else:
            slot, seconds, cpu_s, steps, error = rest
            episode = self._busy.pop(slot)
            self._free.append(slot)
            if error is None:
                self.stats.write_s.append(seconds)
                self.stats.write_cpu_s += cpu_s
                self.stats.steps += steps
            self._finished.append((episode, error))


# ---- in the writer processes ----

def _check_variation(episode: Episode, demo: Demo) -> None:
    if demo.variation_index != episode.variation:
        raise DatasetError(f"the demo for variation {episode.variation} is of variation {demo.variation_index}.")


def store_rlbench(out: str, episode: Episode, demo: Demo) -> None:
    """Write `demo` as `episode` in RLBench's layout under `out`: in a writer process, or in the worker that
    recorded it (Backend.write_demo, given this function with out and episode bound)."""
    _check_variation(episode, demo)
    write_episode(out, episode.task, episode.episode, demo, all_variations=episode.all_variations)


class _Store:
    """Where a writer process puts demos, by format."""

    def __init__(self, out: str, options: WriterOptions, configs: Mapping[str, EnvConfig]):
        self.out, self.options = out, options
        self.lerobot: dict[str, Any] = {}
        if options.format == "lerobot":
            from .lerobot_format import LeRobotWriter

            for task, config in configs.items():
                self.lerobot[task] = LeRobotWriter(out, config, options.lerobot)

    def completed(self) -> dict[str, set[tuple[int, int]]]:
        return {task: set(writer.completed) for task, writer in self.lerobot.items()}

    def write(self, episode: Episode, demo: Demo) -> None:
        if self.options.format == "lerobot":
            _check_variation(episode, demo)
            self.lerobot[episode.task].add_episode(demo, episode.episode)
        else:
            store_rlbench(self.out, episode, demo)

    def close(self) -> None:
        for writer in self.lerobot.values():
            writer.close()


def _serve(index: int, out: str, options: WriterOptions, configs: dict[str, EnvConfig], tasks: Any, results: Any,
           parent_pid: int, parent_is_main_thread: bool) -> None:
    die_with_parent(parent_pid, parent_is_main_thread)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the collector, which lets writers finish
    try:
        store = _Store(out, options, configs)
    except Exception as failure:
        results.put(("failed", f"{type(failure).__name__}: {failure}"))
        return
    results.put(("ready", store.completed()))
    slots: dict[int, SharedBuffers] = {}
    try:
        for slot, name, fields, layout, episode, demo in iter(tasks.get, None):
            if slot not in slots or slots[slot].name != name:
                if slot in slots:
                    slots[slot].close()
                slots[slot] = SharedBuffers.attach(name, fields)
            flat = slots[slot].arrays["bytes"]
            demo.observations = {spec.name: _view(flat, spec) for spec in layout}
            start, cpu = time.perf_counter(), time.process_time()
            error: str | None = None
            try:
                store.write(episode, demo)
            except Exception as failure:
                error = f"{type(failure).__name__}: {failure}"
            steps = len(demo.actions) + 1
            del demo, flat
            results.put(("written", slot, time.perf_counter() - start, time.process_time() - cpu, steps, error))
    finally:
        store.close()
