"""Worker processes as the main process sees them: start, command, deadline, kill, restart.

Each `WorkerHandle` has at most one command in flight. Replies carry the command's sequence number,
so a late reply from a command that was given up on can never be taken for the answer to a later one.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import select
import signal
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, Iterator

from .worker import CLOSE, FAILED, START, THREAD_VARS, WorkerSpec, read_reply, send_command, worker_main

_CONTEXT = mp.get_context("spawn")
MAX_POLL_MS = 2**31 - 1  # poll() takes a C int; longer waits (or inf) just wake up and wait again


@contextmanager
def single_threaded_children() -> Iterator[None]:
    """Spawned children inherit os.environ: make their BLAS/OpenMP single-threaded unless the user
    chose a value, and set it before the child imports numpy."""
    added = [name for name in THREAD_VARS if name not in os.environ]
    for name in added:
        os.environ[name] = "1"
    try:
        yield
    finally:
        for name in added:
            os.environ.pop(name, None)


@dataclass(slots=True)
class Pending:
    command: str
    seq: int
    sent_at: float
    deadline: float  # monotonic time after which the worker counts as hung


@dataclass(slots=True)
class Reply:
    command: str
    ok: bool
    data: Any
    round_trip_s: float
    times: tuple[float, float, float]  # the worker's exec_s, write_s, reset_s in this command


@dataclass
class Failure:
    """A worker died while running `command`."""

    command: str
    reason: str


class Poller:
    """One persistent poll set over every worker's pipe and process sentinel, so waiting costs one
    system call and no per-wait setup, however many workers there are."""

    def __init__(self) -> None:
        self._poll = select.poll()
        self._owners: dict[int, "WorkerHandle"] = {}
        # no pending deadline is earlier than this; it may be earlier than the earliest one (a
        # command finished), which only costs one early wake-up to recompute it
        self.earliest_deadline = math.inf

    def note_deadline(self, deadline: float) -> None:
        self.earliest_deadline = min(self.earliest_deadline, deadline)

    def recompute_deadline(self, handles: list["WorkerHandle"]) -> None:
        self.earliest_deadline = min((h.pending.deadline for h in handles if h.pending is not None), default=math.inf)

    def add(self, handle: "WorkerHandle") -> None:
        for fd in (handle.fd, handle.process.sentinel):
            self._poll.register(fd, select.POLLIN)
            self._owners[fd] = handle

    def remove(self, handle: "WorkerHandle") -> None:
        for fd in [fd for fd, owner in self._owners.items() if owner is handle]:
            self._poll.unregister(fd)
            del self._owners[fd]

    def wait(self, timeout_s: float | None) -> list["WorkerHandle"]:
        """Block (no spinning) until a worker has something to read or died; [] on timeout."""
        timeout_ms = None if timeout_s is None else math.ceil(min(timeout_s * 1000, MAX_POLL_MS))
        ready = {}
        for fd, _ in self._poll.poll(timeout_ms):
            handle = self._owners[fd]
            ready[id(handle)] = handle
        return list(ready.values())


class WorkerHandle:
    def __init__(self, spec: WorkerSpec, poller: Poller):
        self.spec = spec
        self.poller = poller
        self.process: Any = None
        self.conn: Any = None
        self.fd = -1
        self.pending: Pending | None = None
        self.seq = 0
        self.restarts = 0

    def start(self, timeout_s: float) -> None:
        """Spawn the process; its START reply arrives when the backend is ready."""
        parent_conn, child_conn = _CONTEXT.Pipe(duplex=True)
        spec = replace(self.spec, parent_pid=os.getpid(),
                       parent_is_main_thread=threading.current_thread() is threading.main_thread())
        process = _CONTEXT.Process(
            target=worker_main, args=(spec, child_conn), name=f"rlbench_vec-worker-{spec.env_index}", daemon=True
        )
        with single_threaded_children():
            process.start()
        self.process = process
        child_conn.close()  # only the child holds its end: its death is EOF here
        self.conn = parent_conn
        self.fd = parent_conn.fileno()
        self.poller.add(self)
        self.seq = 0
        now = time.monotonic()
        self.pending = Pending(START, 0, now, now + timeout_s)
        self.poller.note_deadline(self.pending.deadline)

    def send(self, command: str, timeout_s: float, k: int = 0, body: bytes = b"") -> None:
        """body: the command's pickled argument (worker.dumps), made before anything is committed."""
        assert self.pending is None, f"env {self.spec.env_index} already runs {self.pending}"
        self.seq += 1
        now = time.monotonic()
        self.pending = Pending(command, self.seq, now, now + timeout_s)
        self.poller.note_deadline(self.pending.deadline)
        try:
            send_command(self.fd, command, self.seq, k, body)
        except OSError:
            pass  # the worker is dead (broken pipe, reset): receive() reports it

    def receive(self) -> Reply | Failure | None:
        """Read one message if there is one: the pending command's reply, a Failure, or None
        (nothing yet, or a stale reply that was discarded)."""
        pending = self.pending
        try:
            seq, status, times, data = read_reply(self.fd)
        except (EOFError, OSError):
            return Failure(pending.command if pending else "idle", self._death_reason())
        if pending is None or seq != pending.seq:
            return None
        self.pending = None
        return Reply(pending.command, status != FAILED, data, time.monotonic() - pending.sent_at, times)

    def _death_reason(self) -> str:
        self.process.join(timeout=1.0)
        code = self.process.exitcode
        if code is None:
            return "the worker closed its pipe"
        if code < 0:
            return f"the worker was killed by {signal.Signals(-code).name}"
        return f"the worker exited with code {code}"

    def overdue(self, now: float) -> bool:
        return self.pending is not None and now > self.pending.deadline

    def kill(self) -> None:
        """Stop the process for good (SIGKILL: a hung simulator ignores anything gentler)."""
        self.poller.remove(self)
        if self.process is not None and self.process.is_alive():
            self.process.kill()
        if self.process is not None:
            self.process.join(timeout=5.0)
        if self.conn is not None:
            self.conn.close()
        self.conn, self.fd, self.pending = None, -1, None

    def stop(self, timeout_s: float) -> None:
        """Ask the worker to close its backend; kill it if it does not finish within timeout_s."""
        if self.process is None:
            return
        if self.process.is_alive() and self.pending is None:
            self.send(CLOSE, timeout_s)
        self.process.join(timeout=timeout_s)
        self.kill()
        self.process = None
