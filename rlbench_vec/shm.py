"""Shared buffers: every array the main process and the workers exchange, in one SharedMemory block.

The main process creates and unlinks the block (it is the only owner). Workers map it by name with
mmap, not SharedMemory, so Python's resource tracker never registers, warns about or unlinks a
segment from a worker. Segments left by a main process that was killed are swept at the next start.
"""

from __future__ import annotations

import mmap
import os
import secrets
from dataclasses import dataclass
from multiprocessing import shared_memory

import numpy as np

PREFIX = "rlbv"
SHM_DIR = "/dev/shm"
ALIGN = 64  # cache-line aligned arrays: no false sharing between neighbouring envs' rows


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
    parts = name.split("_")
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
    swept = []
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


class SharedBuffers:
    """Named numpy views over one shared block. `create` in the main process, `attach` in a worker."""

    def __init__(self, name: str, fields: list[Field], mapping, owner: shared_memory.SharedMemory | None):
        self.name = name
        self.fields = fields
        self.arrays = _views(mapping, fields)
        self._mapping = mapping
        self._owner = owner

    @classmethod
    def create(cls, arrays: dict[str, tuple[tuple[int, ...], np.dtype]]) -> "SharedBuffers":
        fields, size = plan_fields(arrays)
        name = segment_name(secrets.token_hex(6))
        block = shared_memory.SharedMemory(name=name, create=True, size=size)
        return cls(name, fields, block.buf, block)

    @classmethod
    def attach(cls, name: str, fields: list[Field]) -> "SharedBuffers":
        fd = os.open(os.path.join(SHM_DIR, name), os.O_RDWR)
        try:
            mapping = mmap.mmap(fd, 0)
        finally:
            os.close(fd)
        return cls(name, fields, mapping, None)

    def row(self, prefix: str, index: int) -> dict[str, np.ndarray]:
        """Env `index`'s slice of every array named `prefix/<key>`, keyed by <key>."""
        return {key: array[index, ...] for key, array in self.group(prefix).items()}

    def group(self, prefix: str) -> dict[str, np.ndarray]:
        """Every array named `prefix/<key>` (all envs), keyed by <key>."""
        cut = len(prefix) + 1
        return {name[cut:]: array for name, array in self.arrays.items() if name.startswith(prefix + "/")}

    def unlink(self) -> None:
        """Drop the views and remove the segment (owner only). Safe to call twice."""
        self.arrays = {}
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
