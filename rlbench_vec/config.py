"""Configuration dataclasses and their validation.

`EnvConfig` describes one environment (task, observation, action mode) and travels to every worker.
`VectorConfig` describes the vector engine around the workers and stays in the main process.
Everything here is plain Python: it never imports a simulator.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from .errors import ConfigError

CAMERAS = ("left_shoulder", "right_shoulder", "overhead", "wrist", "front")
MODALITIES = ("rgb", "depth", "mask", "point_cloud")
LOW_DIM_FIELDS = (
    "joint_velocities",
    "joint_positions",
    "joint_forces",
    "gripper_open",
    "gripper_pose",
    "gripper_matrix",
    "gripper_joint_positions",
    "task_low_dim_state",
)
DEFAULT_LOW_DIM = (
    "joint_velocities",
    "joint_positions",
    "joint_forces",
    "gripper_open",
    "gripper_pose",
    "gripper_joint_positions",
    "task_low_dim_state",
)
ARM_MODES = ("ik", "planning", "joint_velocity", "joint_position")
GRIPPER_MODES = ("discrete", "joint_position")
BACKENDS = ("auto", "rlbench", "mujoco", "synthetic")
CHUNK_OBS = ("last", "all")
MAX_CHUNK = 65535  # a step command carries K in 16 bits


def snake_case(name: str) -> str:
    """'OpenDrawer' / 'open_drawer' / 'open-drawer' -> 'open_drawer'."""
    name = name.strip().replace("-", "_")
    name = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name)
    return name.lower()


def camel_case(name: str) -> str:
    """'open_drawer' -> 'OpenDrawer' (RLBench's task class names)."""
    return "".join(part.capitalize() for part in snake_case(name).split("_"))


def _choose(what: str, value: str, allowed: tuple[str, ...]) -> str:
    if value in allowed:
        return value
    close = difflib.get_close_matches(str(value), allowed, n=3)
    hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
    raise ConfigError(f"unknown {what} {value!r}.{hint} Choose from: {', '.join(allowed)}.")


def _choose_all(what: str, values: Any, allowed: tuple[str, ...]) -> tuple[str, ...]:
    if isinstance(values, str):
        values = (values,)
    chosen = tuple(_choose(what, v, allowed) for v in values)
    if len(set(chosen)) != len(chosen):
        raise ConfigError(f"{what}s {chosen} name one more than once; list each once.")
    return chosen


@dataclass(frozen=True)
class EnvConfig:
    """What one environment is. Field names follow RLBench's ObservationConfig and action modes.

    image_size is (width, height) as in RLBench; image arrays are (height, width, ...).
    `validated()` resolves backend="auto" and low_dim=None, so a validated config names both.
    """

    task: str = "reach_target"
    backend: str = "auto"
    cameras: tuple[str, ...] = CAMERAS
    image_size: tuple[int, int] = (128, 128)
    modalities: tuple[str, ...] = ("rgb", "depth", "mask")
    low_dim: tuple[str, ...] | None = None  # None: the backend's default (Backend.default_low_dim)
    depth_in_meters: bool = False
    arm_mode: str = "ik"
    absolute_mode: bool = True
    gripper_mode: str = "discrete"
    max_episode_steps: int = 200
    renderer: str | None = None
    backend_options: Mapping[str, Any] = field(default_factory=dict)
    video_cameras: tuple[str, ...] = ()  # set by the engine for recording envs: render_rgb must serve these

    def validated(self) -> "EnvConfig":
        """Return a normalised copy, or raise ConfigError naming the bad field and the fix."""
        if not isinstance(self.task, str) or not self.task.strip():
            raise ConfigError(f"task must be a task name such as 'reach_target', got {self.task!r}.")
        size = tuple(self.image_size)
        if len(size) != 2 or not all(isinstance(s, int) and s >= 8 for s in size):
            raise ConfigError(
                f"image_size must be two integers (width, height), each at least 8, got {self.image_size!r}."
            )
        if self.max_episode_steps < 1:
            raise ConfigError(f"max_episode_steps must be >= 1, got {self.max_episode_steps}.")
        from .backends import backend_class, resolve_backend  # the registry imports this module

        config = replace(self, task=snake_case(self.task),
                         backend=resolve_backend(_choose("backend", self.backend, BACKENDS)))
        low_dim = backend_class(config.backend).default_low_dim(config) if self.low_dim is None else self.low_dim
        return replace(
            config,
            cameras=_choose_all("camera", self.cameras, CAMERAS),
            image_size=size,
            modalities=_choose_all("modality", self.modalities, MODALITIES),
            low_dim=_choose_all("low-dim field", low_dim, LOW_DIM_FIELDS),
            arm_mode=_choose("arm_mode", self.arm_mode, ARM_MODES),
            gripper_mode=_choose("gripper_mode", self.gripper_mode, GRIPPER_MODES),
            backend_options=dict(self.backend_options),
            video_cameras=_choose_all("video camera", self.video_cameras, CAMERAS),
        )

    @property
    def height(self) -> int:
        return self.image_size[1]

    @property
    def width(self) -> int:
        return self.image_size[0]


@dataclass(frozen=True)
class VideoConfig:
    """Per-env video of chosen cameras, written by each worker (see rlbench_vec.video).

    env_ids: the envs that record (None: all). per_episode: one file per episode, else one per run.
    Frames come from every executed action, sub-steps of a chunk included.
    """

    directory: str = "videos"
    env_ids: tuple[int, ...] | None = None
    cameras: tuple[str, ...] = ("front", "wrist")
    fps: int = 20
    per_episode: bool = True
    queue_size: int = 64

    def validated(self, num_envs: int) -> "VideoConfig":
        cameras = _choose_all("video camera", self.cameras, CAMERAS)
        if self.fps < 1 or self.queue_size < 1:
            raise ConfigError(f"video fps and queue_size must be >= 1, got {self.fps} and {self.queue_size}.")
        env_ids = None if self.env_ids is None else tuple(int(i) for i in self.env_ids)
        if env_ids is not None and any(not 0 <= i < num_envs for i in env_ids):
            raise ConfigError(f"video env_ids {env_ids} must lie in [0, {num_envs}).")
        return replace(self, cameras=cameras, env_ids=env_ids)


@dataclass(frozen=True)
class VectorConfig:
    """How the vector engine runs the workers.

    max_chunk: the largest K that step_chunk accepts (shared buffers are sized for it).
    chunk_obs: "last" returns the observation after the last executed action of a chunk;
        "all" also fills `chunk_observations` with the observation after every sub-step.
    step_timeout_s / reset_timeout_s: a worker silent for longer is killed and restarted.
    max_restarts_per_env / max_restarts_total: beyond these a crash loop raises instead.
    display: None picks per backend (own Xvfb per worker when the simulator needs X);
        "shared" uses the existing $DISPLAY; a string like ":0.1" or a list (one per worker) pins displays.
    cpu_affinity: pin each worker to one core of this local rank's share of the cores.
    video: per-env video recording, or None.
    as_torch / device: return torch tensors sharing the shared memory; device="cuda" copies them to
        the GPU (rlbench_vec.tensors).
    """

    num_envs: int = 1
    seed: int | None = 0
    copy_obs: bool = False
    max_chunk: int = 16
    chunk_obs: str = "last"
    step_timeout_s: float = 60.0
    reset_timeout_s: float = 300.0
    start_timeout_s: float = 300.0
    max_restarts_per_env: int = 5
    max_restarts_total: int = 50
    display: str | list[str] | None = None
    cpu_affinity: bool = False
    video: VideoConfig | None = None
    as_torch: bool = False
    device: str | None = None

    def validated(self) -> "VectorConfig":
        if not isinstance(self.num_envs, int) or self.num_envs < 1:
            raise ConfigError(f"num_envs must be an integer >= 1, got {self.num_envs!r}.")
        if self.seed is not None and (not isinstance(self.seed, int) or self.seed < 0):
            raise ConfigError(f"seed must be an integer >= 0 or None, got {self.seed!r}.")
        if not isinstance(self.max_chunk, int) or not 1 <= self.max_chunk <= MAX_CHUNK:
            raise ConfigError(f"max_chunk must be an integer in [1, {MAX_CHUNK}], got {self.max_chunk!r}.")
        _choose("chunk_obs", self.chunk_obs, CHUNK_OBS)
        for name in ("step_timeout_s", "reset_timeout_s", "start_timeout_s"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be > 0 seconds, got {getattr(self, name)!r}.")
        if self.max_restarts_per_env < 0 or self.max_restarts_total < 0:
            raise ConfigError("max_restarts_per_env and max_restarts_total must be >= 0.")
        if isinstance(self.display, (list, tuple)) and len(self.display) != self.num_envs:
            raise ConfigError(
                f"display lists {len(self.display)} displays for {self.num_envs} envs; give one per env "
                "or a single string for all."
            )
        if self.device is not None and not self.as_torch:
            raise ConfigError(f"device={self.device!r} needs as_torch=True (devices hold torch tensors).")
        video = None if self.video is None else self.video.validated(self.num_envs)
        return replace(self, video=video)
