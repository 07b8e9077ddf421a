"""The shared block: claims of the filling page and page flips (in-process), and the sweep of
segments whose owner died."""

from __future__ import annotations

import os
import resource
from pathlib import Path

import numpy as np
import pytest

from rlbench_vec.errors import ConfigError
from rlbench_vec.wire import shm


def block() -> shm.SharedBuffers:
    return shm.SharedBuffers.create({
        "page0/env": ((4,), np.dtype(np.int32)), "page1/env": ((4,), np.dtype(np.int32)),
        "control": ((4,), np.dtype(np.int64)),
    })


@pytest.fixture
def pages():
    """The main process's block and a worker's mapping of it."""
    buffers = block()
    worker = shm.SharedBuffers.attach(buffers.name, buffers.fields)
    yield buffers, worker
    worker.close()
    buffers.unlink()


def test_claims_fill_a_page_in_order_and_a_flip_opens_the_other_one_empty(pages):
    buffers, worker = pages
    assert worker.claim(np.array([7, 5])) == (0, 0)
    assert worker.claim(np.array([6])) == (0, 2)
    assert buffers.arrays["page0/env"][:3].tolist() == [7, 5, 6]
    assert buffers.try_flip() == (0, 3)
    assert buffers.filling == 1 and buffers.claimed(1) == 0
    assert worker.claim(np.array([5])) == (1, 0)
    assert buffers.try_flip() == (1, 1) and buffers.claimed(0) == 0


def test_claims_past_a_waiting_recvs_limit_go_to_the_next_batchs_page(pages):
    buffers, worker = pages
    assert worker.claim(np.array([3])) == (0, 0)
    assert buffers.try_flip() == (0, 1)
    assert worker.claim(np.array([0])) == (1, 0)
    assert buffers.try_limit(2) is True  # page 0 held the batch before: emptied for what comes past the limit
    assert buffers.claimed(0) == 0 and buffers.limited
    assert worker.claim(np.array([1, 2])) == (1, 1)  # one short of the limit: the whole claim stays
    assert worker.claim(np.array([3])) == (0, 0)  # the limit is reached: the next batch's page
    assert buffers.try_limit(2) is False  # again: page 0 keeps its claim
    assert buffers.try_lift_limit() is False  # the recv's claims are in: its page closes, no lifting
    assert buffers.try_flip() == (1, 3)
    assert buffers.filling == 0 and buffers.claimed(0) == 1 and not buffers.limited  # the claim kept
    assert worker.claim(np.array([1])) == (0, 1)


def test_a_recv_that_gives_up_before_its_limit_lifts_it(pages):
    buffers, worker = pages
    assert buffers.try_limit(2) is True
    assert worker.claim(np.array([5])) == (0, 0)
    assert buffers.try_lift_limit() is True and not buffers.limited
    assert worker.claim(np.array([6, 7])) == (0, 1)  # the filling page again, past the old limit
    assert buffers.try_flip() == (0, 3) and buffers.claimed(1) == 0  # no limit: the next page opens empty


def test_the_main_process_never_waits_for_a_claim_lock():
    import fcntl

    buffers = block()
    holder = os.open(os.path.join(shm.SHM_DIR, buffers.name), os.O_RDWR)
    try:
        fcntl.flock(holder, fcntl.LOCK_EX)  # a worker in the middle of a claim
        assert buffers.try_flip() is None
        assert buffers.try_limit(1) is None and buffers.try_lift_limit() is None
        fcntl.flock(holder, fcntl.LOCK_UN)
        assert buffers.try_flip() == (0, 0)
    finally:
        os.close(holder)
        buffers.unlink()


def test_segments_and_boot_logs_of_dead_owners_are_swept():
    dead = 2 ** 22 + 4321  # above the default pid_max: no such process
    names = [f"rlbv_{dead}_{shm.pid_namespace()}_abcdef", f"rlbv_{dead}_{shm.pid_namespace()}_abcdef-boot0-0"]
    for name in names:
        Path(shm.SHM_DIR, name).write_bytes(b"x")
    swept = shm.sweep_stale_segments()
    assert set(names) <= set(swept) and not any(Path(shm.SHM_DIR, n).exists() for n in names)


def test_a_block_larger_than_the_free_shared_memory_fails_at_creation_and_leaves_nothing():
    stat = os.statvfs(shm.SHM_DIR)
    too_big = stat.f_bavail * stat.f_frsize + (1 << 30)  # a sparse file could be this large; its pages cannot
    before = set(os.listdir(shm.SHM_DIR))
    with pytest.raises(ConfigError, match=r"no room for the .* shared-memory block .*--shm-size=\d+g, or --ipc=host"):
        shm.SharedBuffers.create({"obs": ((too_big,), np.dtype(np.uint8)), "control": ((3,), np.dtype(np.int64))})
    assert set(os.listdir(shm.SHM_DIR)) == before


def test_a_worker_maps_the_block_with_its_pages_present():
    layout = {"obs": ((8, 1 << 20), np.dtype(np.uint8)), "control": ((3,), np.dtype(np.int64))}
    buffers = shm.SharedBuffers.create(layout)
    worker = shm.SharedBuffers.attach(buffers.name, buffers.fields)
    try:
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        worker.arrays["obs"][:] = 1  # 8 MiB: 2,048 pages of 4 KiB, none of them faulted in by this write
        assert resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults < 64
    finally:
        worker.close()
        buffers.unlink()
