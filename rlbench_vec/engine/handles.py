"""Worker processes as the main process holds them: one handle per process (its two pipes, its queue
of commands in flight), the registry of handles and instances, and one poll set over all of them.

Instances are simulator instances, numbered globally; worker w runs a contiguous range of them.
`Workers` spawns a worker for a range and remembers, per instance, its worker and local index. It
also holds the pipe that every worker writes its plain replies to (see protocol).
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import math
import os
import select
import struct
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..config import EnvConfig, VectorConfig
from ..wire.process import SPAWN, child_environment, run_entry
from ..wire.protocol import CLOSE, START, WORKER_ENTRY, WorkerSpec, command_frame, reply_reader
from ..wire.shm import SharedBuffers
from . import interrupts

CLOSE_TIMEOUT_S = 10.0
F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)
PLAIN_PIPE_BYTES = 1 << 20  # Linux's limit for an unprivileged process
Entry = tuple[int, int, int]  # (local instance, env, dest): one row of protocol.ENTRY


def encode(entries: list[Entry]) -> bytes:
    """Entries as they travel (protocol.ENTRY rows)."""
    return struct.pack(f"<{3 * len(entries)}i", *(value for entry in entries for value in entry))


@dataclass(slots=True)
class Pending:
    """A command in flight: what the reply must be matched against and settled with."""

    command: int
    seq: int
    sent_at: float
    deadline: float
    entries: list[Entry]
    envs: list[int]  # the env of each entry
    page: int = 0
    k: int = 0
    seeds: list | None = None  # RESET: the seed per entry
    restart: bool = False  # the reset that follows a worker's restart: its results report the restart
    answered: set[int] = field(default_factory=set)  # envs already answered by PARTIAL replies


class Poller:
    """One persistent poll set over every worker's reply pipe and process sentinel, and the shared pipe
    of plain replies (owner None): a wait is one system call, however many workers there are. A
    command pipe joins it while a command waits for room there (see WorkerHandle.write)."""

    def __init__(self, plain_fd: int) -> None:
        self._poll = select.poll()
        self._poll.register(plain_fd, select.POLLIN)
        self._owners: dict[int, WorkerHandle | None] = {plain_fd: None}
        self._backlogged: dict[int, WorkerHandle] = {}  # command pipe -> its handle, while it has a backlog

    def add(self, handle: WorkerHandle) -> None:
        for fd in (handle.reply_fd, handle.process.sentinel):
            self._poll.register(fd, select.POLLIN)
            self._owners[fd] = handle

    def remove(self, handle: WorkerHandle) -> None:
        for fd in [fd for fd, owner in self._owners.items() if owner is handle]:
            self._poll.unregister(fd)
            del self._owners[fd]
        if handle.command_fd in self._backlogged:
            self.written(handle)

    def write_later(self, handle: WorkerHandle) -> None:
        self._poll.register(handle.command_fd, select.POLLOUT)
        self._backlogged[handle.command_fd] = handle

    def written(self, handle: WorkerHandle) -> None:
        self._poll.unregister(handle.command_fd)
        del self._backlogged[handle.command_fd]

    def wait(self, timeout_s: float) -> list[WorkerHandle | None]:
        """The workers with something to read (or dead), None for the plain replies' pipe; [] on timeout.
        Command pipes that have room take more of their backlog meanwhile."""
        events = interrupts.wait(self._poll.poll, math.ceil(min(timeout_s, 3600.0) * 1000))
        if self._backlogged:
            events = [(fd, event) for fd, event in events if not self._write_more(fd)]
        if len(events) == 1:
            return [self._owners[events[0][0]]]
        return list({self._owners[fd]: None for fd, _ in events})

    def _write_more(self, fd: int) -> bool:
        """If fd is a command pipe with a backlog: write what it takes now."""
        handle = self._backlogged.get(fd)
        if handle is not None:
            handle.flush()
        return handle is not None


class WorkerHandle:
    """One worker process: its pipes (commands to it, replies from it), its queue of commands in
    flight, its instances. Pipes, not a socket pair: a write that wakes the reader costs less.

    Writing a command never blocks: what its pipe cannot take now waits in `backlog` and is written
    as the pipe drains, while the main process goes on taking in replies. A worker writing a large
    reply reads no command until that reply is read, so a blocking write of a large command to it
    would wait for ever."""

    def __init__(self, spec: WorkerSpec, boot_prefix: str, poller: Poller, environ: dict[str, str], plain_conn: Any):
        self.poller = poller
        self.plain_conn = plain_conn  # the write end of the plain replies' pipe, passed to each process
        self.environ = environ  # the backend's variables for the spawned process
        self.spec = spec
        self.instances = np.asarray(spec.instances, np.int64)
        self.boot_prefix = boot_prefix
        self.process: Any = None
        self.conns: tuple = ()  # the main process's ends: the commands' write end, the replies' read end
        self.command_fd = self.reply_fd = -1
        self.reader: Any = None
        self.backlog: collections.deque[memoryview] = collections.deque()  # command bytes its pipe has no room for yet
        self.pending: collections.deque[Pending] = collections.deque()
        self.seq = 0
        self.restarts = 0
        self.ran = False  # reached its command loop at least once
        self.ready = False  # the current process has started
        self.facts: dict[str, Any] = {}
        self.boot_log = ""
        self.plan: dict[int, tuple[int, int, int, int | None]] = {}  # local -> (env, dest, kind, seed) after a restart
        self.plan_page: int | None = None  # the page of the planned deliveries with a fixed slot
        self.episodes = 0
        self.rss_checked = 0.0
        self.retiring = False
        self.replacement: WorkerHandle | None = None
        self.takes_over: WorkerHandle | None = None  # set on a replacement until its spares are ready
        self.reserve: collections.deque[int] = collections.deque()  # a replacement's instances for takeovers

    def start(self, timeout_s: float) -> None:
        command_in, command_out = SPAWN.Pipe(duplex=False)
        reply_in, reply_out = SPAWN.Pipe(duplex=False)
        self.boot_log = f"{self.boot_prefix}{self.spec.worker_index}-{self.restarts}"
        spec = replace(self.spec, parent_pid=os.getpid(), generation=self.restarts,
                       parent_is_main_thread=threading.current_thread() is threading.main_thread())
        process = SPAWN.Process(target=run_entry, args=(WORKER_ENTRY, spec, command_in, reply_out, self.plain_conn),
                                name=f"rlbench_vec-worker-{spec.worker_index}", daemon=True)
        with child_environment(self.boot_log, self.environ):
            process.start()
        command_in.close()  # only the child holds these ends: its death is EOF on its replies
        reply_out.close()
        self.process, self.conns = process, (command_out, reply_in)
        self.command_fd, self.reply_fd = command_out.fileno(), reply_in.fileno()
        os.set_blocking(self.command_fd, False)
        self.reader = reply_reader(self.reply_fd)
        self.poller.add(self)
        self.seq, self.ready = 0, False
        now = time.monotonic()
        self.pending = collections.deque([Pending(START, 0, now, now + timeout_s, [], [])])

    def send(self, command: int, entries: list[Entry], budget_s: float, page: int = 0, k: int = 0,
             payload: bytes = b"", seeds: list | None = None, restart: bool = False) -> Pending:
        """Send a command and queue it."""
        seq = self.write(command, len(entries), encode(entries), page, k, payload)
        return self.track(command, seq, entries, [entry[1] for entry in entries], budget_s, page, k, seeds, restart)

    def write(self, command: int, count: int, entries: bytes, page: int = 0, k: int = 0, payload: bytes = b"") -> int:
        """Write a command's frame (count entries as bytes), or queue what its pipe has no room for;
        returns its seq, for `track`."""
        self.seq += 1
        frame = command_frame(command, self.seq, entries, count, page, k, payload)
        if self.backlog:
            self.backlog.append(memoryview(frame))
            return self.seq
        try:
            written = os.write(self.command_fd, frame)
        except BlockingIOError:
            written = 0
        except OSError:
            return self.seq  # the worker is dead: its sentinel reports it
        if written < len(frame):
            self.backlog.append(memoryview(frame)[written:])
            self.poller.write_later(self)
        return self.seq

    def flush(self) -> None:
        """Write as much of the backlog as the command pipe takes now."""
        backlog = self.backlog
        while backlog:
            try:
                written = os.write(self.command_fd, backlog[0])
            except BlockingIOError:
                return
            except OSError:  # the worker is dead: its sentinel reports it
                backlog.clear()
                break
            if written < len(backlog[0]):
                backlog[0] = backlog[0][written:]
                return
            backlog.popleft()
        self.poller.written(self)

    def track(self, command: int, seq: int, entries: list[Entry], envs: list[int], budget_s: float, page: int = 0,
              k: int = 0, seeds: list | None = None, restart: bool = False) -> Pending:
        """Queue a written command; its deadline counts from when the ones before it are due."""
        now = time.monotonic()
        start = max(now, self.pending[-1].deadline) if self.pending else now
        pending = Pending(command, seq, now, start + budget_s, entries, envs, page, k, seeds, restart)
        self.pending.append(pending)
        return pending

    def close_when_idle(self, timeout_s: float) -> None:
        """Ask the worker to close its simulators and exit."""
        self.send(CLOSE, [], timeout_s)

    def kill(self) -> None:
        """Stop the process for good (SIGKILL: a hung simulator ignores anything gentler)."""
        self.poller.remove(self)
        if self.process is not None:
            if self.process.is_alive():
                self.process.kill()
            self.process.join(timeout=5.0)
        for conn in self.conns:
            conn.close()
        self.conns, self.command_fd, self.reply_fd, self.ready = (), -1, -1, False
        self.pending.clear()
        self.backlog.clear()

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid


class Workers:
    """Every worker handle of one vector env (serving, and retired ones not yet reaped), and which
    worker and local index runs each instance."""

    def __init__(self, config: EnvConfig, vc: VectorConfig, buffers: SharedBuffers, boot_prefix: str,
                 environ: dict[str, str], batch_scheduling: bool):
        self.config, self.vc, self.buffers = config, vc, buffers
        self.boot_prefix, self.environ = boot_prefix, environ
        self.batch_scheduling = batch_scheduling  # every worker's, replacements too: see WorkerSpec
        self.plain_reader, self.plain_writer = SPAWN.Pipe(duplex=False)
        self.plain_fd = self.plain_reader.fileno()
        os.set_blocking(self.plain_fd, False)
        with contextlib.suppress(OSError):  # room for every env's reply, so no worker waits on a slow reader
            fcntl.fcntl(self.plain_fd, F_SETPIPE_SZ, PLAIN_PIPE_BYTES)
        self.poller = Poller(self.plain_fd)
        self.by_number: dict[int, WorkerHandle] = {}
        self.serving: list[WorkerHandle] = []
        self.retired: list[WorkerHandle] = []
        self.next_index = 0  # never reused: a recycled worker's number must not collide with a live one
        self.of_instance: list[WorkerHandle] = []
        self.local = np.zeros(0, np.int64)  # per instance: its index within its worker
        self.number = np.zeros(0, np.int64)  # per instance: its worker's number, for grouping entries

    @property
    def instances(self) -> int:
        return len(self.of_instance)

    def add(self, instances: Iterable[int], cpus: list | None) -> WorkerHandle:
        """A handle (not started yet) for a new worker running these instances."""
        vc, index = self.vc, self.next_index
        self.next_index += 1
        instances = tuple(instances)
        display = vc.display[index % len(vc.display)] if isinstance(vc.display, (list, tuple)) else vc.display
        # a worker renders the video cameras only if one of its envs records (spares: if any may)
        video = vc.video
        records = video is not None and any(
            video.records(i) if i < vc.num_envs else video.env_ids is None for i in instances)
        config = replace(self.config, video_cameras=video.cameras) if video is not None and records else self.config
        spec = WorkerSpec(
            worker_index=index, instances=instances, config=config, shm_name=self.buffers.name,
            fields=self.buffers.fields, max_chunk=vc.max_chunk, chunk_obs=vc.chunk_obs, rows=vc.num_envs,
            autoreset_mode=vc.autoreset_mode, eager_reset=vc.eager_reset, display=display,
            cpu_affinity=None if cpus is None else cpus[index % len(cpus)], video=vc.video,
            batch_scheduling=self.batch_scheduling,
        )
        handle = WorkerHandle(spec, self.boot_prefix, self.poller, self.environ, self.plain_writer)
        self.by_number[index] = handle
        self.serving.append(handle)
        self.of_instance.extend([handle] * len(instances))
        self.local = np.concatenate([self.local, np.arange(len(instances))])
        self.number = np.concatenate([self.number, np.full(len(instances), index)])
        return handle

    def retire(self, handle: WorkerHandle) -> None:
        """Out of service: told to close; its exit is expected (nothing restarts it) and reaped later."""
        self.serving.remove(handle)
        del self.by_number[handle.spec.worker_index]  # idle: no plain reply of it is on the way
        self.retired.append(handle)
        if handle.process is not None and handle.process.is_alive():
            handle.close_when_idle(CLOSE_TIMEOUT_S)
        self.poller.remove(handle)

    def close_pipe(self) -> None:
        self.plain_reader.close()
        self.plain_writer.close()

    @property
    def pids(self) -> list[int]:
        return [h.pid for h in self.serving if h.pid is not None]
