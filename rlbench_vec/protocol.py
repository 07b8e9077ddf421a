"""The wire between the main process and a worker: framed messages on a socket pair.

A command frame is a fixed header, an array of entries (which instances, serving which envs, write
where) and an optional pickled payload. A reply frame is a fixed header, an array of records (one per
env the command answered: where its result lies, whether its episode ended, its timings) and an
optional pickled payload (infos, errors, call results). Actions, observations, rewards and flags
travel through shared memory, so a step's frames are a few dozen bytes each way and nothing is
pickled on the fast path.
"""

from __future__ import annotations

import os
import pickle
import struct
from typing import Any

import numpy as np

START, STEP, RESET, CALL, CLOSE = range(5)
COMMAND_NAMES = ("start", "step", "reset", "call", "close")
OK, FAILED = 0, 1

COMMAND_HEADER = struct.Struct("<BBHIIQ")  # command, page, k, seq, entries, payload bytes
REPLY_HEADER = struct.Struct("<IBxxxIQ")  # seq, status, records, payload bytes

# An entry names a local instance of the worker, the env it serves, and where its result goes.
ENTRY = np.dtype([("instance", "<i4"), ("env", "<i4"), ("dest", "<i4")])
CLAIM = -1  # dest: the next free slot of the filling page, taken when the result is ready
HOLD = -2  # dest: nothing is written (a reset whose result is reported with the env's next command)

# A record answers one entry: the page slot holding the env's result (-1: none), what happened, how
# many actions ran, and the worker's seconds for that env. One float64 row each: a reply's records are
# one array, built and read with a handful of numpy calls whatever the group's size.
RECORD_FIELDS = ("env", "slot", "page", "flags", "executed", "exec_s", "write_s", "reset_s")
ENV, SLOT, PAGE, FLAGS, EXECUTED_ACTIONS, EXEC_S, WRITE_S, RESET_S = range(len(RECORD_FIELDS))
RECORD = np.dtype((np.float64, (len(RECORD_FIELDS),)))

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


def dumps(payload: Any) -> bytes:
    return b"" if payload is None else pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)


def _write_all(fd: int, parts: list[bytes | memoryview]) -> None:
    views = [memoryview(p).cast("B") for p in parts if len(p)]
    while views:
        written = os.writev(fd, views)
        while views and written >= len(views[0]):
            written -= len(views.pop(0))
        if written:
            views[0] = views[0][written:]


def send_command(fd: int, command: int, seq: int, entries: np.ndarray, page: int = 0, k: int = 0,
                 payload: bytes = b"") -> None:
    """payload: the pickled argument (`dumps`), made before the caller commits to sending."""
    header = COMMAND_HEADER.pack(command, page, k, seq, len(entries), len(payload))
    _write_all(fd, [header, entries.tobytes(), payload])


def send_reply(fd: int, seq: int, status: int, records: np.ndarray, payload: Any = None,
               pickled: bytes | None = None) -> None:
    """pickled: the payload already pickled (e.g. by a pickler that shares CUDA tensors)."""
    body = dumps(payload) if pickled is None else pickled
    _write_all(fd, [REPLY_HEADER.pack(seq, status, len(records), len(body)), records.tobytes(), body])


class FrameReader:
    """Reads whole frames from a stream socket, keeping bytes of the next frame for later: several
    commands may be queued to one worker, and their replies can arrive in one read."""

    def __init__(self, fd: int, header: struct.Struct, item: np.dtype):
        self.fd = fd
        self.header = header
        self.item = item
        self.buffer = bytearray()

    def _fill(self, size: int) -> None:
        while len(self.buffer) < size:
            data = os.read(self.fd, max(READ_SIZE, size - len(self.buffer)))
            if not data:
                raise EOFError("peer closed the connection")
            self.buffer += data

    def pending(self) -> bool:
        """A whole frame is already buffered."""
        size = self.header.size
        if len(self.buffer) < size:
            return False
        *_, count, body = self.header.unpack_from(self.buffer)
        return len(self.buffer) >= size + count * self.item.itemsize + body

    def read(self) -> tuple[tuple, np.ndarray, Any]:
        """One frame: (header fields without the sizes, items, unpickled payload or None). Blocks
        until it is complete; EOFError when the peer is gone."""
        self._fill(self.header.size)
        *fields, count, body = self.header.unpack_from(self.buffer)
        items_end = self.header.size + count * self.item.itemsize
        self._fill(items_end + body)
        items = np.frombuffer(bytes(self.buffer[self.header.size:items_end]), dtype=self.item)
        payload = pickle.loads(self.buffer[items_end:items_end + body]) if body else None
        del self.buffer[:items_end + body]
        return tuple(fields), items, payload


def command_reader(fd: int) -> FrameReader:
    return FrameReader(fd, COMMAND_HEADER, ENTRY)


def reply_reader(fd: int) -> FrameReader:
    return FrameReader(fd, REPLY_HEADER, RECORD)
