"""The worker pool of one vector env: starts the workers, sends batches of commands and collects
their results as batches (`results.Batch`), and stops everything.

Built from parts, one job each: `handles` (worker processes and the poll set), `envtable` (every
env's state, the taking in of replies), `commands` (sending, waiting, deadlines), `restarts`
(replacing dead or hung workers), `recycling` (spare instances and recycled workers).

Results go to two pages of the shared block, used in turn: a batch is collected by closing the
filling page (a flip: one flock and two integers) and opening the other. A full batch's rows are
its envs in order; a partial batch's are the slots its envs claimed, in completion order.
"""

from __future__ import annotations

import glob
import math
import os
import secrets
import time
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from ..backends import backend_class
from ..config import EnvConfig, VectorConfig
from ..distributed import cores_of_rank, worker_cpus
from ..errors import WorkerError
from ..wire.protocol import AUTORESET, CALL, ERROR, HAS_PAYLOAD, RESET, RESTARTED, STEP
from ..wire.shm import SHM_DIR, SharedBuffers, segment_name
from . import interrupts
from .commands import Commands, PagesShared
from .envtable import EnvTable
from .handles import CLOSE_TIMEOUT_S, WorkerHandle, Workers
from .recycling import Recycler
from .restarts import Restarts, forget_display
from .results import Batch

FLIP_RETRY_S = 0.0002
QUICK_RETRIES = 50  # a worker holds the claims' lock only briefly: retry at once first
REPORTED = HAS_PAYLOAD | RESTARTED | AUTORESET  # flags of a row that has an info
T = TypeVar("T")


class Pool:
    """All workers of one vector env and the state of its envs."""

    def __init__(self, config: EnvConfig, vc: VectorConfig, buffers: SharedBuffers, envs_per_worker: int,
                 before_refill: Callable[[int], None], on_device_pages: PagesShared | None = None):
        n = self.num_envs = vc.num_envs
        self.config, self.vc, self.buffers = config, vc, buffers
        self.before_refill = before_refill  # called with a page before workers may write it again
        backend = backend_class(config.backend)
        # start-up logs: /dev/shm files named like our segments, so a killed owner's are swept too
        self.boot_prefix = os.path.join(SHM_DIR, segment_name(secrets.token_hex(6)) + "-boot")
        total = n + vc.spare_envs
        count = math.ceil(total / envs_per_worker)
        self.workers = Workers(config, vc, buffers, self.boot_prefix, backend.spawn_environ(config),
                               batch_scheduling=count >= cores_of_rank())  # the workers fill the cores
        cpus = worker_cpus(count) if vc.cpu_affinity else None
        for first in range(0, total, envs_per_worker):
            self.workers.add(range(first, min(total, first + envs_per_worker)), cpus)
        self.table = EnvTable(n, total)
        self.restarts = Restarts(self.workers, self.table, buffers, self.close)
        self.recycler = Recycler(self.workers, self.table, self.restarts)
        self.commands = Commands(self.workers, self.table, self.restarts, self.recycler, buffers,
                                 len(config.tasks) if backend.steps_in_parallel else 0, on_device_pages)
        self.page_env = [buffers.arrays[f"page{p}/env"] for p in (0, 1)]
        self.everyone = np.arange(n)
        self.closed = False

    def start(self, on_ready: Callable[[int, int], None] | None) -> None:
        """Start every worker; fail at once, with the worker's own words, if one cannot start."""
        for handle in self.workers.serving:
            handle.start(self.vc.start_timeout_s)
        ready, count = 0, len(self.workers.serving)
        while ready < count:
            for _ in self.commands.pump(None):
                ready += 1
                if on_ready is not None:
                    on_ready(ready, count)
        self.recycler.start_spares()

    # ------------------------------------------------------------------ commands
    def step(self, envs: np.ndarray, k: int, ordered: bool) -> None:
        """Start k actions (already in the actions buffer) for these envs: a full batch (ordered, each
        env's result in its own slot) or a partial one (the next free slots, in completion order)."""
        self.commands.step(envs, k, ordered)
        self.table.mark(envs, STEP, k)

    def reset(self, envs: np.ndarray, seeds: list, options: list, kinds: list, ordered: bool = True) -> None:
        """New episodes for these envs: a full batch (ordered) or, like a partial step, to the next free slots."""
        self.commands.reset(envs.tolist(), seeds, options, kinds, ordered)
        self.table.mark(envs, RESET, 1)

    def call(self, envs: np.ndarray, payload: bytes, timeout_s: float) -> None:
        self.commands.call(envs.tolist(), payload, timeout_s)
        self.table.mark(envs, CALL, 0)

    def wait_until(self, ready: Callable[[], bool], timeout_s: float | None = None) -> bool:
        return self.commands.wait_until(ready, timeout_s)

    # ------------------------------------------------------------------ batches
    def _locked(self, attempt: Callable[[], T | None]) -> T:
        """A change of the claims' control (shm's try_* calls), retried while a worker holds the lock:
        at once a few times, then between waits for replies (a holder may have been preempted)."""
        for _ in range(QUICK_RETRIES):
            if (done := attempt()) is not None:
                return done
        while (done := attempt()) is None:
            self.commands.pump(FLIP_RETRY_S)
        return done

    def _ready_next_page(self) -> None:
        """Before workers may write the page after the filling one: copies out of it are done, and it
        counts no replies. Once a recv's limit is set, claims may already be on it: it is ready."""
        if not self.buffers.limited:
            upcoming = 1 - self.buffers.filling
            self.before_refill(upcoming)
            self.table.replied[upcoming] = 0

    def _flip(self) -> tuple[int, int]:
        """Close the filling page (claimed slots) and let the workers fill the other one."""
        self._ready_next_page()
        return self._locked(self.buffers.try_flip)

    def _limit_claims(self, min_envs: int) -> None:
        """A recv waits for min_envs results of the filling page: claims past that many go to the
        next page (its last batch was handed out)."""
        self._ready_next_page()
        self._locked(lambda: self.buffers.try_limit(min_envs))

    def _close_page(self) -> tuple[int, int]:
        """Flip, then wait for the envs that claimed a slot of the closed page and are still writing."""
        closed, rows = self._flip()
        replied = self.table.replied
        self.table.draining = closed
        self.commands.wait_until(lambda: replied[closed] >= rows)
        self.table.draining = None
        return closed, rows

    def collect(self, ordered: bool, min_envs: int, timeout_s: float | None) -> Batch | None:
        """The next batch: all envs in flight (ordered) or at least min_envs of them in completion
        order. None if the timeout passed first."""
        page, replied = self.buffers.filling, self.table.replied
        limited = not ordered and replied[page] < min_envs
        if limited:
            self._limit_claims(min_envs)
        try:
            arrived = self.commands.wait_until(lambda: replied[page] >= min_envs, timeout_s)
        except BaseException:
            if limited:  # one try; if claims went past the limit, the vector env drains at its next call
                self.buffers.try_lift_limit()
            raise
        # given up: lift the limit, unless claims reached it (the page then closes with what it holds)
        if not arrived and (not limited or self._locked(self.buffers.try_lift_limit)):
            return None
        if ordered:  # a full batch: slot = env
            self._flip()
            return self._batch(page, self.num_envs, self.everyone)
        closed, rows = self._close_page()
        return self._batch(page, rows, self.page_env[closed][:rows].astype(np.int64))

    def _batch(self, page: int, rows: int, envs: np.ndarray) -> Batch:
        table = self.table
        flags = table.flags[envs]
        infos: list[dict | None] = [None] * rows
        errors: list[WorkerError] = []
        if not np.count_nonzero(flags):  # the usual case: nothing to report, no episode ended
            batch = Batch(page, rows, envs, table.width[envs], flags, infos, errors)
            table.release(envs)
            return batch
        for row in np.flatnonzero(flags & REPORTED).tolist():  # the rest have no info
            env = int(envs[row])
            extra = table.extra.pop(env, None) or {}
            info = extra.get("info")
            if flags[row] & RESTARTED:
                info = {**(info or {}), "restarted": True, "restart_reason": table.restart_reason.pop(env, "")}
            if env in table.recycled and flags[row] & AUTORESET:
                table.recycled.discard(env)
                info = {**(info or {}), "recycled": True}
            if "error" in extra:
                message, trace = extra["error"]
                errors.append(WorkerError(env, message, trace))
            infos[row] = info
        widths = np.where((flags & ERROR) != 0, 0, table.width[envs])
        batch = Batch(page, rows, envs, widths, flags, infos, errors)
        table.release(envs)
        if self.vc.autoreset_mode == "next_step":
            self.recycler.after_episodes(np.sort(envs[table.over[envs]]).tolist())
        return batch

    def take_calls(self, envs: np.ndarray) -> dict[int, Any]:
        """Results of finished calls: value, or a WorkerError for a call that raised."""
        out: dict[int, Any] = {}
        for env in envs.tolist():
            extra = self.table.extra.pop(env, {})
            if "error" in extra:
                out[env] = WorkerError(env, *extra["error"])
            else:
                out[env] = extra.get("result")
        self.table.release(envs)
        return out

    @property
    def settled(self) -> bool:
        """No batch is half collected: no claims past a recv's limit, no page closed and not handed out."""
        return not self.buffers.limited and self.table.draining is None

    def drain(self) -> None:
        """Finish everything in flight and discard the results (after an interrupted call)."""
        table = self.table
        self.commands.wait_until(lambda: not table.in_flight().size)
        table.draining = None  # a page closed by an interrupted recv: its last results are in
        while table.replied[self.buffers.filling]:  # twice where claims went past a recv's limit
            self._close_page()
        for env in table.done().tolist():
            table.extra.pop(env, None)
        table.release_all()

    # ------------------------------------------------------------------ shutdown
    def close(self) -> None:
        """Stop every worker (and its Xvfb): kill those with work in flight (their results would be
        discarded), ask the others to close. Bounded in time; idempotent."""
        if self.closed:
            return
        self.closed = True
        handles = self.workers.serving + self.workers.retired
        for handle in handles:
            if handle.pending and handle.process is not None:
                handle.kill()
            elif handle.process is not None and handle.process.is_alive():
                handle.close_when_idle(CLOSE_TIMEOUT_S)
        deadline = time.monotonic() + CLOSE_TIMEOUT_S
        for handle in handles:
            if handle.process is not None:
                handle.process.join(max(0.0, deadline - time.monotonic()))
            handle.kill()
            handle.process = None
            forget_display(handle)
        self.workers.close_pipe()
        for path in glob.glob(glob.escape(self.boot_prefix) + "*"):
            os.unlink(path)

    def totals(self) -> dict[str, np.ndarray]:
        return self.table.totals()

    @property
    def serving(self) -> list[WorkerHandle]:
        return self.workers.serving

    @property
    def worker_pids(self) -> list[int]:
        return self.workers.pids

    def worker_of(self, env: int) -> WorkerHandle:
        return self.workers.of_instance[int(self.table.env_inst[env])]


class Resources:
    """What a vector env must release even if it is never closed (its finalizer's target): the pool, the
    shared block, and its use of the SIGINT handler."""

    def __init__(self) -> None:
        self.pool: Pool | None = None
        self.buffers: SharedBuffers | None = None
        self.sigint = interrupts.install()  # whether this env counts as a user of its SIGINT handler

    def release(self) -> None:
        try:
            if self.pool is not None:
                self.pool.close()
        finally:  # even if a Ctrl-C cut the workers' close short (they die with this process)
            if self.buffers is not None:
                self.buffers.unlink()
                self.buffers = None
            interrupts.uninstall(self.sigint)
