"""A job (evaluate, collect) split between torchrun's ranks: each rank on its local share of the host's cores
and GPUs, its own share of the job's episodes, and barriers and a gather through torch.distributed (gloo). With
one process (no WORLD_SIZE, or 1) nothing here touches torch: torch is an extra, imported only for several ranks.

May import the base modules (distributed, errors) and display's GPU listing; the job's own modules call it.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import os
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from ..display.glcheck import nvidia_gpus
from ..distributed import RankInfo, share_of_rank
from ..errors import ConfigError, RLBenchVecError

T = TypeVar("T")
# A rank that ends its share waits at a barrier for the slowest: as long as a job may run, not gloo's 30 minutes.
WAIT = datetime.timedelta(days=30)


class Ranks:
    """This process's place in the job: rank, world size, and the collectives (no-ops with one process)."""

    def __init__(self, info: RankInfo, dist: Any = None):
        self.info, self.dist = info, dist

    @property
    def rank(self) -> int:
        return self.info.rank

    @property
    def world(self) -> int:
        return self.info.world_size

    @property
    def first(self) -> bool:
        """Rank 0, which writes the job's reports and shows its progress."""
        return self.info.rank == 0

    def mine(self, items: Sequence[T]) -> list[T]:
        """This rank's share of `items`, dealt round robin (item i to rank i mod world)."""
        return list(items[self.rank::self.world])

    def barrier(self, tick: Callable[[], None] | None = None) -> None:
        """Wait for every rank; tick() every half second meanwhile (rank 0's progress bar while the others end)."""
        if self.dist is None:
            return
        with _peer_lost():
            work = self.dist.barrier(async_op=True)
            while tick is not None and not work.is_completed():
                tick()
                time.sleep(0.5)
            work.wait()

    def gather(self, value: Any) -> list[Any]:
        """Every rank's `value`, in rank order (on every rank)."""
        if self.dist is None:
            return [value]
        values: list[Any] = [None] * self.world
        with _peer_lost():
            self.dist.all_gather_object(values, value)
        return values


@contextlib.contextmanager
def _peer_lost() -> Iterator[None]:
    """A rank that failed or was killed closes its connections: the ranks waiting for it say so in one line."""
    try:
        yield
    except RuntimeError:  # gloo's "Connection closed by peer", a timeout: the failed rank's own line says more
        raise RLBenchVecError("another rank stopped while this one waited for it (its own line, or torchrun's summary, "
                              "names it); what every rank finished is kept: run the same command to resume") from None


@contextlib.contextmanager
def job_ranks() -> Iterator[Ranks]:
    """This process's Ranks for one job. With several ranks: the process pinned to its local share of the
    host's cores (its workers inherit it), its share of the GPUs made the visible ones (CUDA, EGL; Xvfb's GLX
    picks by the same share: rlbench_vec.display), torch.distributed started unless the caller's script did,
    and an error of the package names the rank in its one line."""
    info = RankInfo.from_env()
    if info.world_size == 1:
        yield Ranks(info)
        return
    import torch.distributed as dist

    _pin_to_share(info)
    started = not dist.is_initialized()
    if started:
        dist.init_process_group(backend="gloo", timeout=WAIT)
    try:
        yield Ranks(info, dist)
    except RLBenchVecError as error:
        kind = ConfigError if isinstance(error, ConfigError) else RLBenchVecError  # its exit status kept
        raise kind(f"rank {info.rank} of {info.world_size}: {error}") from error
    finally:
        if started:
            dist.destroy_process_group()


@functools.cache  # once per process: a second job of the same script keeps its share, not a share of it
def _pin_to_share(info: RankInfo) -> None:
    cores = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, [cores[i] for i in share_of_rank(len(cores), info)])
    gpus = nvidia_gpus()
    if gpus and "CUDA_VISIBLE_DEVICES" not in os.environ:  # a launcher's own choice is kept
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(gpus[i].uuid or str(gpus[i].index)
                                                      for i in share_of_rank(len(gpus), info))
