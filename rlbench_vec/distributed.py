"""Per-rank facts under torchrun (or any launcher that sets RANK / LOCAL_RANK / LOCAL_WORLD_SIZE).

Each rank builds its own vector env. Seeds are offset by the global rank so no two envs of a job
share a seed; a host's cores and GPUs are split between its local ranks (share_of_rank). Nothing here assumes
one host beyond per-host resources: multi-node is torchrun's job.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class RankInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1

    @classmethod
    def from_env(cls) -> RankInfo:
        read = lambda name, default: int(os.environ.get(name) or default)
        world = read("WORLD_SIZE", 1)
        return cls(read("RANK", 0), world, read("LOCAL_RANK", 0), read("LOCAL_WORLD_SIZE", world))


def rank_seed(seed: int | None, num_envs: int, info: RankInfo | None = None) -> int | None:
    """The base seed of this rank's envs: env i of global rank r gets seed + r * num_envs + i."""
    if seed is None:
        return None
    info = info or RankInfo.from_env()
    return seed + info.rank * num_envs


def cores_of_rank(info: RankInfo | None = None) -> int:
    """How many of the usable cores are this local rank's share of the host (at least one)."""
    info = info or RankInfo.from_env()
    return max(1, len(os.sched_getaffinity(0)) // max(1, info.local_world_size))


def share_of_rank(count: int, info: RankInfo | None = None) -> list[int]:
    """This local rank's contiguous share of `count` per-host resources (cores, GPUs) as indices; where there
    are more local ranks than resources, ranks share them round robin."""
    info = info or RankInfo.from_env()
    share = count // max(1, info.local_world_size)
    if share == 0:
        return [info.local_rank % count] if count else []
    return list(range(info.local_rank * share, (info.local_rank + 1) * share))


def worker_cpus(num_envs: int, info: RankInfo | None = None) -> list[tuple[int, ...]]:
    """One core per worker, round robin over this local rank's contiguous share of the usable cores."""
    cores = sorted(os.sched_getaffinity(0))
    mine = [cores[i] for i in share_of_rank(len(cores), info)]
    return [(mine[i % len(mine)],) for i in range(num_envs)]
