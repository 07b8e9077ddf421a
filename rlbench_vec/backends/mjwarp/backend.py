"""backend="mjwarp": what the main process knows of the batched MuJoCo Warp backend.

The class below answers the engine's questions (validation, layout, one worker for all envs, where
observations live) without importing warp, mujoco_warp or mujoco; the worker builds every env as one
world of its task's BatchedSimulation in `MjwarpGroup` (group.py). There is no per-env instance: the class
stays abstract, and `make_group` is the only way in.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...config import EnvConfig, flag, integer
from ...errors import ConfigError
from ..base import Backend, EnvGroup
from ..mujoco.backend import (
    check_dense_rewards,
    check_oracle_option,
    check_shaped_rewards,
    check_variation_option,
    task_class,
)
from ..mujoco.tasks import TASKS
from . import check_config, device_of, require

# backend_options this backend reads
OPTIONS = ("device", "nconmax", "njmax", "variation", "deterministic", "shaped_rewards", "dense_rewards", "profile",
           "oracle", "draw_ahead")


class MjwarpBackend(Backend):
    """All envs of a vector env as the worlds of one MuJoCo Warp simulator per task, in one worker process.

    backend_options: device (see device_of), nconmax (contact slots per world, pooled: 64), njmax
    (constraint rows per world: 256), variation (every episode's task variation, or "random": one drawn
    per reset; unset: 0, as the mujoco backend),
    deterministic (MuJoCo Warp's deterministic execution: on a GPU too, each world's trajectory is
    bit-for-bit a function of its own seed and actions; False), shaped_rewards (the task's reward() as
    RLBench's shaped rewards, computed on the device; only for tasks that define one; False), dense_rewards (this
    package's staged dense reward, computed on the device: see docs/tasks.md; False), profile (time
    each phase of the work: physics, each camera's conversions, the page writes, resets...; read with
    call("phase_profile"); False: nothing timed), oracle (each step acts the episode's waypoint oracle, the
    mujoco backend's, planned on the host: see oracles.py; False), draw_ahead (host processes drawing each world's
    next episode while it runs, so an autoreset costs the upload only: an int, or "auto" for this machine's cores
    but one; 0: draws in place, between steps; see draw_ahead.py).
    """

    steps_in_parallel = True  # every world of a task steps in one launch: a step's deadline is one env's per task
    task_change_reason = (
        "the mjwarp backend runs the envs of each task as the worlds of that task's MuJoCo Warp simulator (its "
        "model is the task's scene), made when the vector env starts with as many worlds as envs of the task, so "
        "an env cannot move to another task's simulator. Make the vector env with each env's task (task=[...] or "
        "a suite), one vector env per task, or use backend='mujoco', whose envs change tasks at a reset.")

    name = "mjwarp"

    @classmethod
    def validate(cls, config: EnvConfig) -> None:
        require()
        check_config(config)
        unknown = sorted(set(config.backend_options) - set(OPTIONS))
        if unknown:
            raise ConfigError(f"unknown mjwarp backend_options {unknown}; allowed: {list(OPTIONS)}.")
        for name in ("deterministic", "profile", "oracle"):
            if name in config.backend_options:
                flag(f"mjwarp backend_options[{name!r}]", config.backend_options[name])
        check_oracle_option(config)
        for name in ("nconmax", "njmax"):
            if name in config.backend_options:
                integer(f"mjwarp backend_options[{name!r}]", config.backend_options[name], 1)
        check_draw_ahead(config)
        if "variation" in config.backend_options:
            check_variation_option(task_class(config), config.backend_options["variation"], cls.name)
        check_shaped_rewards(task_class(config), config.backend_options, cls.name)
        check_dense_rewards(task_class(config), config.backend_options, cls.name)
        device = device_of(config)
        if device.startswith("cuda"):
            import torch

            if not torch.cuda.is_available() or int(device.split(":")[1]) >= torch.cuda.device_count():
                raise ConfigError(f"mjwarp device {device!r}: torch sees {torch.cuda.device_count()} CUDA devices. "
                                  "Use backend_options={'device': 'cpu'} (warp's CPU device: slow, for tests) or a "
                                  "machine with an NVIDIA GPU.")

    @classmethod
    def task_state_size(cls, config: EnvConfig) -> int:
        return task_class(config).state_size()

    @classmethod
    def task_names(cls) -> list[str]:
        return sorted(TASKS)

    @classmethod
    def task_variation_count(cls, config: EnvConfig) -> int:
        return task_class(config).variation_count

    @classmethod
    def envs_per_worker(cls, config: EnvConfig, num_envs: int, requested: int | None) -> int:
        """Every env in one worker: the worlds share one simulator."""
        if requested is not None and requested < num_envs:
            raise ConfigError(f"the mjwarp backend runs all {num_envs} envs as the worlds of one simulator in one "
                              f"worker; envs_per_worker={requested} would split them. Leave envs_per_worker unset.")
        return num_envs

    @classmethod
    def renders_video(cls, config: EnvConfig) -> bool:
        return True  # the group adds the video cameras' rgb to what it renders

    @classmethod
    def observations_on_device(cls, config: EnvConfig) -> bool:
        return device_of(config).startswith("cuda")

    @classmethod
    def make_group(cls, config: EnvConfig, instances: Sequence[int]) -> EnvGroup:
        from .first_start import announced
        from .group import MjwarpGroup  # imports torch, warp, mujoco_warp and mujoco

        with announced(config, device_of(config), len(instances)):  # a first start compiles kernels: said on stderr
            return MjwarpGroup(config, instances)


def check_draw_ahead(config: EnvConfig) -> None:
    """backend_options["draw_ahead"]: a count of processes or "auto", and not with the oracle (which plans on the
    host copy that holds a world's start right after the draw in place)."""
    value = config.backend_options.get("draw_ahead", 0)
    if value != "auto":
        integer("mjwarp backend_options['draw_ahead'] (or 'auto')", value, 0)
    if value and config.backend_options.get("oracle"):
        raise ConfigError("backend_options['draw_ahead'] draws episodes in other processes, and the oracle plans "
                          "each episode on the worker's own host copy right after its draw: leave draw_ahead unset "
                          "with oracle=True.")


BACKEND = MjwarpBackend
