"""What `python -m rlbench_vec.collect` collects and how: CollectConfig (its flags' names, defaults and
checks) and the choices made from it before anything starts (writers, variations)."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ..backends import backend_class, list_tasks
from ..backends.base import Backend
from ..config import CAMERAS, EnvConfig, integer
from ..datasets.writers import FORMATS
from ..errors import ConfigError
from .runs import command_line

DEFAULT_MODALITIES = {"rlbench": ("rgb", "depth", "mask"), "lerobot": ("rgb",)}
# Arguments that shape the stored demos: a rerun into the same folder must repeat them.
DATASET_ARGUMENTS = ("backend", "format", "all_variations", "seed", "image_size", "cameras", "modalities", "arm_mode",
                     "absolute_mode", "ignore_collisions_flag", "gripper_mode", "max_episode_steps", "backend_options")


@dataclass(frozen=True)
class CollectConfig:
    """What to collect and how. Flags of `python -m rlbench_vec.collect` have the same names.

    tasks (names, or ("all",): every task of the backend), episodes_per_task (per variation, as RLBench counts),
    variations (a count: variations 0..n-1, or "all"), out, format ("rlbench" or "lerobot"), all_variations (rlbench
    format: episodes_per_task episodes in the task's all_variations folder, episode e of variation e mod the count,
    as RLBench's dataset generator with --all_variations), seed. Environment:
    backend, image_size (width, height), cameras, modalities (None: rgb, depth, mask for rlbench; rgb for lerobot),
    arm_mode, absolute_mode, ignore_collisions_flag, gripper_mode, max_episode_steps, backend_options, renderer.
    Engine: num_envs (worker
    processes, one demo each at a time), demo_timeout_s (a worker silent that long on one demo is restarted; None:
    no limit), max_attempts per job. Writing: writers (processes; 0: each worker writes its own demos; None:
    default_writers, lerobot: 1), queue_size (demos handed to writers and not yet written; None: 2 per writer),
    lerobot_vcodec, lerobot_checkpoint_every. progress:
    show a progress bar."""

    tasks: tuple[str, ...] = ("reach_target",)
    out: str = "demos"
    episodes_per_task: int = 10
    variations: int | str = 1
    format: str = "rlbench"
    all_variations: bool = False
    seed: int = 0
    backend: str = "auto"
    num_envs: int = 1
    image_size: tuple[int, int] = (128, 128)
    cameras: tuple[str, ...] = CAMERAS
    modalities: tuple[str, ...] | None = None
    arm_mode: str = "ik"
    absolute_mode: bool = True
    ignore_collisions_flag: bool = False
    gripper_mode: str = "discrete"
    max_episode_steps: int = 200
    backend_options: Mapping[str, Any] = field(default_factory=dict)
    renderer: str | None = None
    demo_timeout_s: float | None = 600.0
    max_attempts: int = 3
    writers: int | None = None
    queue_size: int | None = None
    lerobot_vcodec: str = "libsvtav1"
    lerobot_checkpoint_every: int = 50
    progress: bool = True

    def validated(self) -> CollectConfig:
        """A copy with defaults resolved, or ConfigError naming what is wrong and the fix."""
        tasks = (self.tasks,) if isinstance(self.tasks, str) else tuple(self.tasks)
        if tasks == ("all",):
            tasks = tuple(list_tasks(self.backend))
        if not tasks or len(set(tasks)) != len(tasks):
            raise ConfigError(f"tasks must name at least one task, each once; got {self.tasks!r}.")
        if self.format not in FORMATS:
            raise ConfigError(f"unknown format {self.format!r}; choose from {', '.join(FORMATS)}.")
        if self.all_variations and self.format != "rlbench":
            raise ConfigError("all_variations is a layout of the rlbench format; leave it off for lerobot.")
        if self.variations != "all":
            integer("variations", self.variations, 1)
        if "variation" in self.backend_options:
            raise ConfigError("backend_options['variation'] is set per job by the collector; use --variations.")
        if self.demo_timeout_s is not None and not self.demo_timeout_s > 0:
            raise ConfigError(f"demo_timeout_s must be > 0 seconds or None, got {self.demo_timeout_s!r}.")
        num_envs = integer("num_envs", self.num_envs, 1)
        writers = 1 if self.format == "lerobot" else integer(
            "writers", self.writers if self.writers is not None else default_writers(num_envs), 0)
        config = replace(
            self, tasks=tasks, episodes_per_task=integer("episodes_per_task", self.episodes_per_task, 1),
            num_envs=num_envs, seed=integer("seed", self.seed, 0),
            max_attempts=integer("max_attempts", self.max_attempts, 1),
            writers=writers, queue_size=integer("queue_size", self.queue_size or max(2 * writers, 1), 1),
            lerobot_checkpoint_every=integer("lerobot_checkpoint_every", self.lerobot_checkpoint_every, 1),
            modalities=tuple(self.modalities or DEFAULT_MODALITIES[self.format]),
            image_size=(int(self.image_size[0]), int(self.image_size[1])), cameras=tuple(self.cameras),
            backend_options=dict(self.backend_options),
        )
        env = config.env_config(tasks[0])
        if config.format == "rlbench" and (set(env.cameras) != set(CAMERAS) or "point_cloud" in env.modalities
                                           or not {"rgb", "depth"} <= set(env.modalities)):
            raise ConfigError("the rlbench format stores rgb and depth (and masks) of all five cameras, which "
                              "RLBench's loader opens, and rebuilds point clouds from depth: use "
                              f"cameras={CAMERAS} and modalities rgb, depth and optionally mask.")
        return replace(config, backend=env.backend)

    def env_config(self, task: str) -> EnvConfig:
        """The validated environment of one task whose demos are collected."""
        config = EnvConfig(task=task, backend=self.backend, cameras=self.cameras, image_size=self.image_size,
                           modalities=self.modalities or DEFAULT_MODALITIES[self.format],
                           misc=self.format == "rlbench", arm_mode=self.arm_mode, absolute_mode=self.absolute_mode,
                           ignore_collisions_flag=self.ignore_collisions_flag, gripper_mode=self.gripper_mode,
                           max_episode_steps=self.max_episode_steps,
                           renderer=self.renderer, backend_options=dict(self.backend_options)).validated()
        backend: type[Backend] = backend_class(config.backend)
        if backend.get_demos is Backend.get_demos:
            raise ConfigError(f"the {config.backend} backend collects no demos; collect with backend='mujoco' (the "
                              "embedded scene) or 'rlbench'.")
        backend.validate(config)
        return config

    def command(self) -> str:
        """The command line that collects this (and resumes it)."""
        return command_line("rlbench_vec.collect", self)


def default_writers(num_envs: int) -> int:
    """Writer processes for the rlbench format: half as many as envs, but only on the cores the envs leave
    free; none when they leave none, and each worker writes its own demos (writers would compete with the
    workers for cores, and a demo's images would cross two more processes on the way)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(0, min(math.ceil(num_envs / 2), cores - num_envs))


def known_variation_count(config: EnvConfig) -> int | None:
    """How many variations the task has where the main process knows it without a simulator (the backend's
    task_variation_count: mujoco); None where only a started env can tell (get_attr("variation_count"))."""
    return backend_class(config.backend).task_variation_count(config)


def checked_variations(config: CollectConfig, task: str, count: int) -> int:
    """The number of variations to collect of a task that has `count`, or ConfigError when asked for more."""
    if config.variations == "all":
        return count
    if int(config.variations) > count:
        raise ConfigError(f"{task} has {count} variations; --variations {config.variations} asks for more.")
    return int(config.variations)
