"""What a worker's first write into a result slot costs, against its later writes: on a second mapping of
the shared block (as each worker has its own), mapped lazily (every 4 KiB page faults in on its first
write) and as rlbench_vec.wire.shm maps it for a worker (MAP_POPULATE: page tables filled at attach).

A slot is RLBench's default observation (5 cameras, rgb + depth + mask at 128x128, plus low-dim state).
Partial batches write each env's results into whichever slot it claims, so a worker meets every slot of
both pages for the first time sooner or later.

    PYTHONPATH=. python benchmarks/first_write.py --slots 32
"""

from __future__ import annotations

import mmap
import os
import time

import numpy as np

from rlbench_vec.cli import ArgumentParser, run_main
from rlbench_vec.config import EnvConfig
from rlbench_vec.spec import observation_bytes
from rlbench_vec.wire import shm


def slot_bytes() -> int:
    return observation_bytes(EnvConfig(backend="synthetic").validated())


def write_us(slots: np.ndarray, source: np.ndarray) -> tuple[float, float]:
    """Mean microseconds of a first write into each slot, then of a second one."""
    times = []
    for _ in range(2):
        start = time.perf_counter()
        for slot in slots:
            slot[:] = source
        times.append((time.perf_counter() - start) / len(slots) * 1e6)
    return times[0], times[1]


def main() -> None:
    parser = ArgumentParser(prog="python benchmarks/first_write.py", description=__doc__)
    parser.add_argument("--slots", type=int, default=32, help="slots written (each the size of one observation)")
    args = parser.parse_args()
    size = slot_bytes()
    owner = shm.SharedBuffers.create({"obs": ((args.slots, size), np.dtype(np.uint8)),
                                      "control": ((3,), np.dtype(np.int64))})
    source = np.random.default_rng(0).integers(0, 256, size, dtype=np.uint8)
    try:
        fd = os.open(os.path.join(shm.SHM_DIR, owner.name), os.O_RDWR)
        lazy = mmap.mmap(fd, 0)
        os.close(fd)
        offset = next(field.offset for field in owner.fields if field.name == "obs")
        lazy_slots = np.frombuffer(lazy, np.uint8, args.slots * size, offset).reshape(args.slots, size)
        lazy_first, lazy_again = write_us(lazy_slots, source)
        worker = shm.SharedBuffers.attach(owner.name, owner.fields)
        populated_first, populated_again = write_us(worker.arrays["obs"], source)
        print(f"one slot: {size:,} bytes; {args.slots} slots, {os.cpu_count()} cpus")
        print(f"lazy mapping:      first write {lazy_first:7.0f} us, again {lazy_again:6.0f} us")
        print(f"populated mapping: first write {populated_first:7.0f} us, again {populated_again:6.0f} us")
        del lazy_slots
        lazy.close()
        worker.close()
    finally:
        owner.unlink()


if __name__ == "__main__":
    run_main(main, "python benchmarks/first_write.py")
