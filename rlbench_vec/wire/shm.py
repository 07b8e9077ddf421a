"""Shared buffers: every array the main process and the workers exchange, in one SharedMemory block.

The main process creates and unlinks the block (it is the only owner). Workers map it by name with
mmap, not SharedMemory, so Python's resource tracker never registers, warns about or unlinks a
segment from a worker. Segments left by a main process that was killed are swept at the next start.

Results go to two pages (each a slot per env for observations and outcomes) used in turn: while the
user reads the page a call returned, workers write the next results into the other one. A command
either names each env's slot (a full batch: slot = env id) or lets the worker claim the next free
slot of the filling page when its results are ready, so partial batches fill a page in completion
order and come back as one contiguous block. While a recv waits for M results, claims past the M-th
go to the other page, the next batch's: the recv waits only for the envs it asked for, and the rest
keep their results for the next call. Claims and page flips take an flock on the segment (released
by the kernel if its holder dies) and touch four integers of the `control` array.

Memory is committed up front: the block is allocated when it is created (so /dev/shm running out is
an error at start, not a SIGBUS in a worker later), and a worker maps it with its page tables filled
(up to POPULATE_LIMIT), so the first write into a slot costs no page faults. Partial batches write
each env's results to whichever slot it claims, and a worker's first write into each of the slots
otherwise faulted in every 4 KiB page of it (benchmarks/first_write.py measures what that costs).
"""

from __future__ import annotations

import fcntl
import math
import mmap
import os
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing import shared_memory
from typing import TypeVar

import numpy as np

from ..errors import ConfigError

PREFIX = "rlbv"
SHM_DIR = "/dev/shm"
ALIGN = 64  # cache-line aligned arrays: no false sharing between neighbouring envs' rows
POPULATE_LIMIT = 1 << 30  # larger blocks are mapped lazily: filled page tables would cost each worker MBs


@dataclass(frozen=True)
class Field:
    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    offset: int

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


def plan_fields(arrays: dict[str, tuple[tuple[int, ...], np.dtype]]) -> tuple[list[Field], int]:
    """Lay arrays out back to back, each aligned; return the fields and the total size."""
    fields, offset = [], 0
    for name, (shape, dtype) in arrays.items():
        field = Field(name, tuple(int(s) for s in shape), np.dtype(dtype), offset)
        fields.append(field)
        offset += -(-max(field.nbytes, 1) // ALIGN) * ALIGN
    return fields, max(offset, ALIGN)


def more_room(size: int) -> str:
    """How to give /dev/shm room for `size` bytes, with headroom: in a container (64 MB by default) the flag
    that sizes it, or the host's."""
    return f"give {SHM_DIR} more room (Docker: --shm-size={math.ceil(size * 1.2 / 2**30)}g, or --ipc=host)"


def _views(buffer, fields: list[Field]) -> dict[str, np.ndarray]:
    return {
        f.name: np.ndarray(f.shape, dtype=f.dtype, buffer=buffer, offset=f.offset) for f in fields
    }


def pid_namespace() -> int:
    """This process's PID namespace (an inode number): pids mean something only inside it."""
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


def segment_name(token: str) -> str:
    return f"{PREFIX}_{os.getpid()}_{pid_namespace()}_{token}"


def segment_owner(name: str) -> int | None:
    """The owner pid of a segment made by `SharedBuffers.create` in this PID namespace, else None.
    Containers sharing /dev/shm (docker --ipc=host) have other namespaces: their pids are not ours
    to test, so their segments are never taken for stale."""
    parts = name.split("_")  # boot logs add "-<suffix>" to the token, so they are swept alike
    if len(parts) == 4 and parts[0] == PREFIX and parts[1].isdigit() and parts[2] == str(pid_namespace()):
        return int(parts[1])
    return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale_segments() -> list[str]:
    """Unlink segments whose owning process is gone (it was killed before it could unlink them)."""
    swept: list[str] = []
    try:
        names = os.listdir(SHM_DIR)
    except FileNotFoundError:
        return swept
    for name in names:
        owner = segment_owner(name)
        if owner is not None and not _pid_alive(owner):
            try:
                os.unlink(os.path.join(SHM_DIR, name))
                swept.append(name)
            except FileNotFoundError:
                pass
    return swept


# control[FILLING]: the page that claims go to; control[1 + page]: that page's claimed slots;
# control[LIMIT]: while a recv waits, the claims it needs of the filling page (0: none): later claims go
# to the other page, the next batch's
FILLING, LIMIT = 0, 3
T = TypeVar("T")


class SharedBuffers:
    """Named numpy views over one shared block. `create` in the main process, `attach` in a worker."""

    def __init__(self, name: str, fields: list[Field], mapping, owner: shared_memory.SharedMemory | None):
        self.name = name
        self.fields = fields
        self.arrays = _views(mapping, fields)
        self._mapping = mapping
        self._owner = owner
        self._lock_fd = os.open(os.path.join(SHM_DIR, name), os.O_RDWR)  # own open file: own flock
        # the claims' control and env ids as memoryviews: their items read and write as Python ints,
        # several times faster than numpy scalars, so the lock is held briefly
        self._control = self.arrays.get("control", np.zeros(0, np.int64)).data
        self._page_env = [self.arrays[f"page{p}/env"].data for p in (0, 1) if f"page{p}/env" in self.arrays]

    @classmethod
    def create(cls, arrays: dict[str, tuple[tuple[int, ...], np.dtype]]) -> SharedBuffers:
        fields, size = plan_fields(arrays)
        name = segment_name(secrets.token_hex(6))
        block = shared_memory.SharedMemory(name=name, create=True, size=size)
        fd = os.open(os.path.join(SHM_DIR, name), os.O_RDWR)
        try:
            os.posix_fallocate(fd, 0, size)
        except OSError as error:
            block.close()
            block.unlink()
            problem = f"{SHM_DIR} has no room for the {size / 2**30:.2f} GiB shared-memory block ({error.strerror})"
            raise ConfigError(f"{problem}: use fewer envs or smaller observations, or {more_room(size)}.") from None
        finally:
            os.close(fd)
        return cls(name, fields, block.buf, block)

    @classmethod
    def attach(cls, name: str, fields: list[Field]) -> SharedBuffers:
        fd = os.open(os.path.join(SHM_DIR, name), os.O_RDWR)
        size = os.fstat(fd).st_size
        try:
            mapping = mmap.mmap(fd, 0, flags=mmap.MAP_SHARED | (mmap.MAP_POPULATE if size <= POPULATE_LIMIT else 0))
        finally:
            os.close(fd)
        return cls(name, fields, mapping, None)

    def group(self, prefix: str) -> dict[str, np.ndarray]:
        """Every array named `prefix/<key>` (all envs), keyed by <key>."""
        cut = len(prefix) + 1
        return {name[cut:]: array for name, array in self.arrays.items() if name.startswith(prefix + "/")}

    def claim(self, envs: Sequence[int]) -> tuple[int, int]:
        """Take the next len(envs) slots of the filling page for these envs, or of the next one once
        the filling page holds what a waiting recv asked for: (page, first slot)."""
        control, count = self._control, len(envs)
        fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
        try:
            page = control[FILLING]
            first = control[1 + page]
            limit = control[LIMIT]
            if limit and first >= limit:
                page = 1 - page
                first = control[1 + page]
            # the env ids first, then the count: a holder killed in between leaves no half claim
            ids = self._page_env[page]
            for offset, env in enumerate(envs):
                ids[first + offset] = env
            control[1 + page] = first + count
        finally:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
        return page, first

    def _try_locked(self, change: Callable[[memoryview], T]) -> T | None:
        """change(control) under the claims' lock; None if a worker holds it right now (the main
        process never blocks on it)."""
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None
        try:
            return change(self._control)
        finally:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)

    def try_flip(self) -> tuple[int, int] | None:
        """Close the filling page and open the other one: (closed page, its claimed slots). The page
        that opens is empty, unless claims went past a limit to it (`try_limit`). None: try again."""
        def flip(control: memoryview) -> tuple[int, int]:
            page = control[FILLING]
            if not control[LIMIT]:
                control[2 - page] = 0
            control[LIMIT], control[FILLING] = 0, 1 - page
            return page, control[1 + page]
        return self._try_locked(flip)

    def try_limit(self, slots: int) -> bool | None:
        """While a recv waits for `slots` claims of the filling page, later claims go to the other
        page, which holds the next batch (emptied here when no limit was set yet: its rows were the
        batch before). Returns whether it was emptied; None: try again."""
        def limit(control: memoryview) -> bool:
            fresh = not control[LIMIT]
            if fresh:
                control[2 - control[FILLING]] = 0
            control[LIMIT] = max(control[LIMIT], slots)
            return fresh
        return self._try_locked(limit)

    def try_lift_limit(self) -> bool | None:
        """A recv gives up waiting: lift its limit, unless claims reached it (the filling page then
        holds them, and later claims are already on the other page). Returns whether it was lifted;
        None: try again."""
        def lift(control: memoryview) -> bool:
            if control[LIMIT] and control[1 + control[FILLING]] >= control[LIMIT]:
                return False
            control[LIMIT] = 0
            return True
        return self._try_locked(lift)

    @property
    def limited(self) -> bool:
        """Claims past a recv's limit go to the page after the filling one."""
        return bool(self._control[LIMIT])

    def claimed(self, page: int) -> int:
        return self._control[1 + page]

    @property
    def filling(self) -> int:
        return self._control[FILLING]

    def close(self) -> None:
        """A worker's side: drop the views and the mapping."""
        self.arrays, self._control, self._page_env = {}, memoryview(b""), []
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1

    def unlink(self) -> None:
        """Drop the views and remove the segment (owner only). Safe to call twice."""
        self.close()
        if self._owner is not None:
            owner, self._owner = self._owner, None
            try:
                owner.close()
            except BufferError:
                pass  # a caller still holds a zero-copy view; the mapping goes when it is collected
            try:
                owner.unlink()
            except FileNotFoundError:
                pass
