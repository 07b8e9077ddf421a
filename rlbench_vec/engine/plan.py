"""What a vector env will run, decided before anything starts: the layer that knows backends asks
them (validation, envs per worker, display, observations on a device, video) and checks the limits
of this machine. `config` only validates values; this module completes them.
"""

from __future__ import annotations

import math
import os
import resource
from dataclasses import dataclass, replace

import numpy as np

from ..backends import backend_class
from ..backends.base import Backend
from ..config import EnvConfig, VectorConfig
from ..display import check_display
from ..errors import ConfigError
from ..spec import ArraySpec, action_size, low_dim_fields, observation_spec
from ..task_names import env_tasks
from ..wire import shm

FDS_PER_WORKER = 4  # its two pipes, process sentinel, and one while it is spawned
FDS_SPARE = 64
BlockPlan = dict[str, tuple[tuple[int, ...], np.dtype]]


@dataclass(frozen=True)
class Plan:
    config: EnvConfig  # validated, with its backend's low-dim fields named
    vc: VectorConfig
    backend: type[Backend]
    layout: dict[str, ArraySpec]
    envs_per_worker: int
    workers: int
    on_device: bool  # the backend keeps observations on its device: the block holds none
    block: BlockPlan


def make_plan(env_config: EnvConfig, vector_config: VectorConfig) -> Plan:
    """Validate everything and ask the backend; raise ConfigError before anything starts."""
    vc = vector_config.validated()
    config = replace(env_config, task=env_tasks(env_config.task, vc.num_envs)).validated()
    backend = backend_class(config.backend)
    check_tasks(backend, config, vc)
    config = replace(config, low_dim=low_dim_fields(config))
    if vc.video is not None and not backend.renders_video(config):
        raise ConfigError(f"the {config.backend} backend renders no video frames: record with another backend.")
    n = vc.num_envs
    per_worker = backend.envs_per_worker(config, n, vc.envs_per_worker)
    workers = math.ceil((n + vc.spare_envs) / per_worker)
    if isinstance(vc.display, (list, tuple)) and len(vc.display) != workers:
        raise ConfigError(f"display lists {len(vc.display)} displays for {workers} workers ({per_worker} envs "
                          "each); give one per worker or a single string for all.")
    check_display(vc.display, backend.needs_display(config))
    layout = observation_spec(config)
    on_device = backend.observations_on_device(config)
    block = buffer_plan({} if on_device else layout, n, vc.max_chunk, vc.chunk_obs == "all", action_size(config))
    check_resources(block, workers)
    return Plan(config, vc, backend, layout, per_worker, workers, on_device, block)


def check_tasks(backend: type[Backend], config: EnvConfig, vc: VectorConfig) -> None:
    """Every env's task is one the backend runs with these options, and the backend runs them together. Spare
    and recycled instances serve any env, so they need one task for all."""
    if len(config.tasks) > 1:
        known = set(backend.task_names())
        missing = [task for task in config.tasks if task not in known]
        if len(missing) > 1:
            elsewhere = "run them with backend='rlbench' (CoppeliaSim), or " if backend.name != "rlbench" else ""
            raise ConfigError(f"the {backend.name} backend does not have {len(missing)} of these "
                              f"{len(config.tasks)} tasks: {', '.join(missing)}; {elsewhere}choose among "
                              f"rlbench_vec.list_tasks({backend.name!r}).")
    for task in config.tasks:
        backend.validate(config.for_task(task))
    if len(config.tasks) == 1:
        return
    if backend.one_task_reason:
        raise ConfigError(f"these envs run {len(config.tasks)} tasks ({', '.join(config.tasks)}): "
                          f"{backend.one_task_reason}")
    for name in ("spare_envs", "recycle_after_episodes", "max_worker_rss_mb"):
        if getattr(vc, name):
            raise ConfigError(f"{name} hands envs to fresh instances, which start with one task for all: it needs "
                              f"one task for every env, and these envs run {len(config.tasks)} "
                              f"({', '.join(config.tasks)}). Leave {name} unset, or run a vector env per task.")


def buffer_plan(layout: dict[str, ArraySpec], n: int, max_chunk: int, every_obs: bool, action_dim: int) -> BlockPlan:
    """The shared block: two pages of result slots (one per env each), the actions, the claim counters.
    An empty layout leaves the observations out (a backend that keeps them on its device)."""
    plan: BlockPlan = {}
    for page in (0, 1):
        plan.update({f"page{page}/obs/{key}": ((n, *s.shape), s.dtype) for key, s in layout.items()})
        if every_obs:
            plan.update({f"page{page}/chunk/{key}": ((n, max_chunk, *s.shape), s.dtype) for key, s in layout.items()})
        plan[f"page{page}/outcome"] = ((n, 4, max_chunk), np.dtype(np.float64))
        plan[f"page{page}/env"] = ((n,), np.dtype(np.int32))
    plan["actions"] = ((n, max_chunk, action_dim), np.dtype(np.float32))
    plan["control"] = ((4,), np.dtype(np.int64))
    return plan


def check_resources(plan: BlockPlan, workers: int) -> None:
    """Refuse, before anything starts, a request this machine cannot hold: file descriptors for the
    workers, and /dev/shm for the shared block (running out of it later kills workers with SIGBUS)."""
    needed = FDS_PER_WORKER * workers + FDS_SPARE
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if needed > soft:
        if hard == resource.RLIM_INFINITY or needed <= hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
        else:
            raise ConfigError(f"{workers} worker processes need about {needed} file descriptors, and this process may "
                              f"open {hard} (ulimit -n). Raise the limit (ulimit -n {needed}) or run more envs per "
                              "worker (envs_per_worker=...).")
    _, size = shm.plan_fields(plan)
    stat = os.statvfs(shm.SHM_DIR)
    free = stat.f_bavail * stat.f_frsize
    if size > free:
        raise ConfigError(f"the shared-memory block needs {size / 2**30:.2f} GiB and {shm.SHM_DIR} has "
                          f"{free / 2**30:.2f} GiB free. Use fewer envs, fewer cameras or smaller images, or "
                          f"{shm.more_room(size)}.")
