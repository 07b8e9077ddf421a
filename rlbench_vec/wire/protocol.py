"""The wire between the main process and a worker: framed messages on two pipes (commands, replies).

A command frame is a fixed header, an array of entries (which instances, serving which envs, write
where) and an optional pickled payload. A reply frame is a fixed header and, only when the command
did more than step its envs, an array of records (one per env: where its result lies, whether its
episode ended, its timings) and a pickled payload (infos, errors, call results). Actions,
observations, rewards and flags travel through shared memory, so a step's frames are a few dozen
bytes each way and nothing is pickled on the fast path.

A *plain* reply answers a step whose envs all ran their k actions with nothing to report: each
result lies at its entry's destination, or, for claimed slots, at `first` + its position in the
command, on the reply's page. The main process settles it from the command it sent. Plain replies
do not take the worker's own pipe: every worker writes them to one pipe shared by the pool, each in a
single write under PIPE_BUF (so writers never interleave), and the main process takes in all the
replies that arrived with one read.
"""

from __future__ import annotations

import os
import pickle
import struct
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from ..config import EnvConfig, VideoConfig

START, STEP, RESET, CALL, CLOSE = range(5)
COMMAND_NAMES = ("start", "step", "reset", "call", "close")
# PARTIAL answers some of a step's entries (a batched group whose worlds finish at their own pace):
# more replies to the same command follow, the last one OK.
OK, FAILED, PARTIAL = 0, 1, 2

COMMAND_HEADER = struct.Struct("<BBHIIQ")  # command, page, k, seq, entries, payload bytes
# seq, status, page, first claimed slot (-1: fixed destinations), exec and write seconds, records, payload bytes
REPLY_HEADER = struct.Struct("<IBBxxiddIQ")

# An entry names a local instance of the worker, the env it serves, and where its result goes.
ENTRY = np.dtype([("instance", "<i4"), ("env", "<i4"), ("dest", "<i4")])
CLAIM = -1  # dest: the next free slot of the filling page, taken when the result is ready
HOLD = -2  # dest: nothing is written (a reset whose result is reported with the env's next command)

# A record answers one entry: the page slot holding the env's result (-1: none), what happened, how
# many actions ran, and the worker's seconds for that env. One float64 row each.
RECORD_FIELDS = ("env", "slot", "page", "flags", "executed", "exec_s", "write_s", "reset_s")
ENV, SLOT, PAGE, FLAGS, EXECUTED_ACTIONS, EXEC_S, WRITE_S, RESET_S = range(len(RECORD_FIELDS))
RECORD = np.dtype((np.float64, (len(RECORD_FIELDS),)))
NO_RECORDS = np.zeros((0, len(RECORD_FIELDS)))
MANY_RECORDS = 48  # records of a reply this long are built and taken in by numpy; shorter ones by a loop (cheaper)

# Record flags. EPISODE_OVER is the worker's word on whether the env's episode ended: nobody
# re-derives it from rewards or flags.
EPISODE_OVER, AUTORESET, RESTARTED, ERROR, HAS_PAYLOAD = 1, 2, 4, 8, 16

# Reset kinds (per entry of a RESET command's payload)
RESULT, OBSERVE, NOTICE, SPARE = range(4)
# RESULT  reset, write the new episode's first observation to dest
# OBSERVE no reset: write the current observation to dest (reset_mask leaves this env alone)
# NOTICE  reset after a worker restart and report it now as the answer to the step in flight
# SPARE   reset and wait, unassigned, to take over an env whose episode ended
# (HOLD as dest: reset after a restart; the notice goes out with the env's next command)

READ_SIZE = 1 << 16
MAX_READ_SIZE = 1 << 24  # one read of a large frame's rest: a demo's images are megabytes


# A plain reply on the shared pipe: the worker's number and how many times it was restarted (a
# replaced process's late replies are dropped), seq, page, first claimed slot, exec and write seconds.
PLAIN_REPLY = struct.Struct("<IIIBxxxidd")
PLAIN_READ_SIZE = PLAIN_REPLY.size * 4096  # whole replies only: each write is one, and a read takes whole writes


class Reply(NamedTuple):
    seq: int
    status: int
    page: int
    first: int
    exec_s: float
    write_s: float
    records: np.ndarray  # none in a plain reply
    payload: Any


def dumps(payload: Any) -> bytes:
    return b"" if payload is None else pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)


def _write_all(fd: int, data: bytes) -> None:
    written = os.write(fd, data)
    if written < len(data):  # large payloads (demos) only
        view = memoryview(data)
        while written < len(data):
            written += os.write(fd, view[written:])


def command_frame(command: int, seq: int, entries: bytes, count: int, page: int = 0, k: int = 0,
                  payload: bytes = b"") -> bytes:
    """A command as it travels. entries: `count` ENTRY rows as bytes; payload: the pickled argument
    (`dumps`), made before the caller commits to sending."""
    return COMMAND_HEADER.pack(command, page, k, seq, count, len(payload)) + entries + payload


def send_reply(fd: int, seq: int, status: int, records: np.ndarray = NO_RECORDS, payload: Any = None, *,
               page: int = 0, first: int = CLAIM, exec_s: float = 0.0, write_s: float = 0.0,
               pickled: bytes | None = None) -> None:
    """No records to a step: a plain reply. pickled: the payload already pickled (e.g. by a pickler
    that shares CUDA tensors)."""
    body = dumps(payload) if pickled is None else pickled
    header = REPLY_HEADER.pack(seq, status, page, first, exec_s, write_s, len(records), len(body))
    _write_all(fd, header + records.tobytes() + body)


def send_plain(fd: int, worker: int, generation: int, seq: int, page: int, first: int, exec_s: float,
               write_s: float) -> None:
    os.write(fd, PLAIN_REPLY.pack(worker, generation, seq, page, first, exec_s, write_s))


def read_plain(fd: int) -> list[tuple[int, int, int, int, int, float, float]]:
    """Every plain reply waiting on the shared pipe (fd non-blocking): (worker, generation, seq,
    page, first, exec_s, write_s)."""
    try:
        data = os.read(fd, PLAIN_READ_SIZE)
    except BlockingIOError:
        return []
    return list(PLAIN_REPLY.iter_unpack(data))


class FrameReader:
    """Whole frames from a pipe (or any byte stream). Bytes of a frame not yet complete wait in the buffer:
    several commands may be queued to one worker, and their replies can arrive in one read."""

    def __init__(self, fd: int, header: struct.Struct, item: np.dtype):
        self.fd = fd
        self.header = header
        self.item = item
        self.no_items = np.frombuffer(b"", item)  # what a frame without items carries (read-only, like the others)
        self.data = b""
        self.offset = 0
        self.parts: list[bytes] = []  # reads not yet joined to data: a large frame is joined once, when whole
        self.waiting = 0  # their bytes
        self.needed = 0  # bytes past offset the next frame needs (0: not known)

    def _receive(self) -> None:
        """One read (blocking if nothing is there); EOFError when the peer is gone."""
        have = len(self.data) - self.offset + self.waiting
        chunk = os.read(self.fd, max(READ_SIZE, min(self.needed - have, MAX_READ_SIZE)))
        if not chunk:
            raise EOFError("peer closed the connection")
        self.parts.append(chunk)
        self.waiting += len(chunk)
        if have + len(chunk) >= self.needed:
            rest = self.data[self.offset:]
            self.data = b"".join([rest, *self.parts]) if rest or len(self.parts) > 1 else chunk
            self.offset, self.parts, self.waiting = 0, [], 0

    def _frame(self) -> tuple[tuple, np.ndarray, Any] | None:
        """The next whole frame in the buffer, or None: (header fields without the sizes, items,
        unpickled payload or None). Items are read-only views of the received bytes."""
        start, data = self.offset, self.data
        if len(data) - start < self.header.size:
            self.needed = self.header.size
            return None
        *fields, count, body = self.header.unpack_from(data, start)
        items_at = start + self.header.size
        payload_at = items_at + count * self.item.itemsize
        end = payload_at + body
        if len(data) < end:
            self.needed = end - start
            return None
        self.offset = end
        items = np.frombuffer(data, self.item, count, items_at) if count else self.no_items
        return tuple(fields), items, pickle.loads(memoryview(data)[payload_at:end]) if body else None

    def pending(self) -> bool:
        """A whole frame is already buffered."""
        start = self.offset
        if len(self.data) - start < self.header.size:
            return False
        *_, count, body = self.header.unpack_from(self.data, start)
        return len(self.data) - start >= self.header.size + count * self.item.itemsize + body

    def read(self) -> tuple[tuple, np.ndarray, Any]:
        """One frame, blocking until it is complete."""
        while (frame := self._frame()) is None:
            self._receive()
        return frame

    def read_available(self) -> list[tuple[tuple, np.ndarray, Any]]:
        """One read, then every whole frame it completed (maybe none)."""
        self._receive()
        frames = []
        while (frame := self._frame()) is not None:
            frames.append(frame)
        return frames


def command_reader(fd: int) -> FrameReader:
    return FrameReader(fd, COMMAND_HEADER, ENTRY)


def reply_reader(fd: int) -> FrameReader:
    return FrameReader(fd, REPLY_HEADER, RECORD)


def reply(frame: tuple[tuple, np.ndarray, Any]) -> Reply:
    (seq, status, page, first, exec_s, write_s), records, payload = frame
    return Reply(seq, status, page, first, exec_s, write_s, records, payload)


# A worker's entry point, named by its path: the engine spawns workers without importing rlbench_vec.worker.main
WORKER_ENTRY = "rlbench_vec.worker.main:worker_main"


@dataclass(frozen=True)
class WorkerSpec:
    """Everything a worker needs, pickled once at spawn."""

    worker_index: int
    instances: tuple[int, ...]  # global instance numbers: they name and seed the simulators
    config: EnvConfig
    shm_name: str
    fields: list
    max_chunk: int
    chunk_obs: str
    rows: int  # slots per result page (num_envs)
    autoreset_mode: str
    eager_reset: bool
    display: Any
    cpu_affinity: tuple[int, ...] | None = None
    video: VideoConfig | None = None
    parent_pid: int = 0
    generation: int = 0  # restarts of this worker before this process: tags its plain replies
    parent_is_main_thread: bool = True
    # SCHED_BATCH: only where the workers fill this rank's cores, so that a woken worker does not preempt the
    # main process mid-batch; with cores to spare it only delays each wake-up (a rendering worker waits on the GPU)
    batch_scheduling: bool = False
