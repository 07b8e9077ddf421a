"""Configuration dataclasses and their validation: the one source of every option and its default.

`EnvConfig` describes one environment (task, observation, action mode) and travels to every worker.
`VectorConfig` describes the vector engine around the workers and stays in the main process.
`split_options` routes RLBenchVectorEnv's keyword options to the two. Everything here is plain
Python: it never imports a simulator.
"""

from __future__ import annotations

import difflib
import importlib.util
import logging
import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from functools import cache
from typing import Any

from .errors import ConfigError
from .task_names import task_list

log = logging.getLogger("rlbench_vec")

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
DEFAULT_LOW_DIM = tuple(name for name in LOW_DIM_FIELDS if name != "gripper_matrix")
ARM_MODES = ("ik", "planning", "joint_velocity", "joint_position")
POSE_ARM_MODES = ("ik", "planning")
GRIPPER_MODES = ("discrete", "joint_position")
BACKENDS = ("auto", "rlbench", "mujoco", "mjwarp", "synthetic")
CHUNK_OBS = ("last", "all")
AUTORESET_MODES = ("next_step", "same_step", "disabled")
ACTION_TIMINGS = ("rlbench", "fixed")
MAX_CHUNK = 65535  # a step command carries K in 16 bits
MAX_IMAGE_SIDE = 4096
@cache
def resolve_backend(name: str) -> str:
    """'auto' -> 'rlbench' when rlbench is installed (found without importing it), else 'mujoco'."""
    if name != "auto":
        return name
    if importlib.util.find_spec("rlbench") is not None:
        return "rlbench"
    # the documented default, said at info level: a warning on every run of every command was noise
    log.info("rlbench is not installed: backend='auto' uses the embedded MuJoCo backend.")
    return "mujoco"


def close_matches(value: Any, allowed) -> str:
    close = difflib.get_close_matches(str(value), list(allowed), n=3)
    return f" Did you mean {', '.join(map(repr, close))}?" if close else ""


def choose(what: str, value: str, allowed: tuple[str, ...]) -> str:
    if value in allowed:
        return value
    raise ConfigError(f"unknown {what} {value!r}.{close_matches(value, allowed)} Choose from: {', '.join(allowed)}.")


def choose_all(what: str, values: Any, allowed: tuple[str, ...]) -> tuple[str, ...]:
    if isinstance(values, str):
        values = (values,)
    chosen = tuple(choose(what, v, allowed) for v in values)
    if len(set(chosen)) != len(chosen):
        raise ConfigError(f"{what}s {chosen} name one more than once; list each once.")
    return chosen


def integer(name: str, value: Any, low: int, high: int | None = None) -> int:
    """An integral value (Python or numpy) in [low, high], as int; ConfigError otherwise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ConfigError(f"{name} must be an integer, got {value!r} ({type(value).__name__}).")
    value = int(value)
    if value < low or (high is not None and value > high):
        bounds = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ConfigError(f"{name} must be {bounds}, got {value}.")
    return int(value)


def image_size(size: tuple[Any, Any] | list[Any]) -> tuple[int, int]:
    """(width, height), each an integer in [8, MAX_IMAGE_SIDE]; the error names every side that is wrong."""
    problems = []
    for side, value in zip(("width", "height"), size):
        try:
            integer(side, value, 8, MAX_IMAGE_SIDE)
        except ConfigError as error:
            problems.append(str(error).rstrip("."))
    if problems:
        raise ConfigError(f"image_size=({size[0]!r}, {size[1]!r}) is (width, height): {'; '.join(problems)}.")
    return int(size[0]), int(size[1])


def positive(name: str, value: Any, unit: str = "seconds") -> float:
    """A finite number > 0 (NaN or inf would disable the guard it sets)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{name} must be a finite number of {unit} > 0, got {value!r}.")
    return float(value)


def flag(name: str, value: Any) -> bool:
    if not isinstance(value, (bool, numbers.Integral)) or value not in (0, 1):
        raise ConfigError(f"{name} must be True or False, got {value!r}.")
    return bool(value)


@dataclass(frozen=True)
class EnvConfig:
    """What one environment is. Field names follow RLBench's ObservationConfig and action modes.

    task: RLBench task name, snake_case or CamelCase; or one name per env (a vector env's envs may run
    different tasks), or a suite (SUITES) whose tasks the envs take in turn. A vector env's `env_config.task` is
    one name, or a tuple with each env's (`tasks` lists them once each). backend: "auto" (rlbench when installed, else
    mujoco), "rlbench", "mujoco", "mjwarp" (the mujoco scene batched on a GPU), "synthetic".
    cameras / modalities: which images are observed.
    image_size is (width, height) as in RLBench; image arrays are (height, width, ...).
    low_dim: low-dim fields (None: the backend's default, see spec.low_dim_fields). misc: add each camera's extrinsics,
    intrinsics, near and far (RLBench's Observation.misc). arm_mode / absolute_mode / gripper_mode:
    RLBench's MoveArmThenGripper. ignore_collisions_flag: in the pose arm modes the action gains a 9th number,
    PerAct's ignore_collisions (> 0.5: that move runs without collision checking; else it follows the backend's
    collision checking), as PerAct's RLBench fork. renderer: backend-specific (mujoco: osmesa, egl, glfw).
    action_timing: "rlbench" (an action runs until it is done: ik until the arm gets there, a gripper
    change until the fingers stop) or "fixed" (every action is one 0.05 s control step; the arm's target
    and the gripper's goal are kept until reached or replaced, and info["arm_moving"] /
    info["gripper_moving"] say what is still under way): the embedded backends (mujoco, mjwarp).
    task_low_dim_size: task_low_dim_state's length, at least the longest of the envs' tasks (None: that
    longest): room for tasks an env changes to at a reset (reset(options={"task": ...})).
    `validated()` checks values and resolves backend="auto"; a vector env also names the low-dim
    fields its backend chose (spec.low_dim_fields) in its `env_config`.
    """

    task: str | tuple[str, ...] = "reach_target"
    backend: str = "auto"
    cameras: tuple[str, ...] = CAMERAS
    image_size: tuple[int, int] = (128, 128)
    modalities: tuple[str, ...] = ("rgb", "depth", "mask")
    low_dim: tuple[str, ...] | None = None
    misc: bool = False
    depth_in_meters: bool = False
    arm_mode: str = "ik"
    absolute_mode: bool = True
    ignore_collisions_flag: bool = False
    gripper_mode: str = "discrete"
    max_episode_steps: int = 200
    renderer: str | None = None
    backend_options: Mapping[str, Any] = field(default_factory=dict)
    action_timing: str = "rlbench"
    task_low_dim_size: int | None = None
    video_cameras: tuple[str, ...] = ()  # set by the engine for recording envs: render_rgb must serve these

    def validated(self) -> EnvConfig:
        """Return a normalised copy, or raise ConfigError naming the bad field and the fix."""
        if isinstance(self.task, str) and not self.task.strip():
            raise ConfigError(f"task must be a task name such as 'reach_target', got {self.task!r}.")
        names = task_list(self.task)
        task = names[0] if isinstance(self.task, str) or len(set(names)) == 1 else names
        if not isinstance(self.image_size, (tuple, list)) or len(self.image_size) != 2:
            raise ConfigError(f"image_size must be two integers (width, height), got {self.image_size!r}.")
        size = image_size(self.image_size)
        if not isinstance(self.backend_options, Mapping):
            raise ConfigError(f"backend_options must be a dict, got {self.backend_options!r}.")
        config = replace(
            self, task=task, backend=resolve_backend(choose("backend", self.backend, BACKENDS)),
            image_size=size, max_episode_steps=integer("max_episode_steps", self.max_episode_steps, 1),
            misc=flag("misc", self.misc), depth_in_meters=flag("depth_in_meters", self.depth_in_meters),
            absolute_mode=flag("absolute_mode", self.absolute_mode),
            ignore_collisions_flag=flag("ignore_collisions_flag", self.ignore_collisions_flag),
            action_timing=choose("action_timing", self.action_timing, ACTION_TIMINGS),
            cameras=choose_all("camera", self.cameras, CAMERAS),
            modalities=choose_all("modality", self.modalities, MODALITIES),
            low_dim=None if self.low_dim is None else choose_all("low-dim field", self.low_dim, LOW_DIM_FIELDS),
            arm_mode=choose("arm_mode", self.arm_mode, ARM_MODES),
            gripper_mode=choose("gripper_mode", self.gripper_mode, GRIPPER_MODES),
            backend_options=dict(self.backend_options),
            task_low_dim_size=None if self.task_low_dim_size is None else integer(
                "task_low_dim_size", self.task_low_dim_size, 0),
            video_cameras=choose_all("video camera", self.video_cameras, CAMERAS),
        )
        if config.backend == "rlbench" and config.action_timing == "fixed":
            raise ConfigError(
                "action_timing='fixed' needs a simulator the env steps itself, one control step per action: "
                "RLBench's action modes run each action until it is done (its own loop in CoppeliaSim), so the "
                "rlbench backend runs action_timing='rlbench' only; use backend='mujoco' or 'mjwarp' for 'fixed'.")
        if config.ignore_collisions_flag and config.arm_mode not in POSE_ARM_MODES:
            raise ConfigError(f"ignore_collisions_flag adds PerAct's 9th action number to the pose arm modes "
                              f"{POSE_ARM_MODES}, not arm_mode {config.arm_mode!r}: use one of them or drop the flag.")
        return config

    @property
    def tasks(self) -> tuple[str, ...]:
        """The tasks of the envs, each once, in order of first use."""
        return (self.task,) if isinstance(self.task, str) else tuple(dict.fromkeys(self.task))

    @property
    def one_task(self) -> str:
        """The task of a config whose envs all run one (what backends check and build: see for_task)."""
        if not isinstance(self.task, str):
            raise ConfigError(f"this needs one task for every env, got one per env: {', '.join(self.tasks)}.")
        return self.task

    def task_of(self, env: int) -> str:
        """The task env (or instance) `env` starts with: the one task, or its entry of the per-env list."""
        return self.task if isinstance(self.task, str) else self.task[env]

    def for_task(self, task: str) -> EnvConfig:
        """This config with one task for every env: what a backend checks and sizes each task with."""
        return replace(self, task=task)

    @property
    def height(self) -> int:
        return self.image_size[1]

    @property
    def width(self) -> int:
        return self.image_size[0]


@dataclass(frozen=True)
class VideoConfig:
    """Per-env video of chosen cameras, written by the workers (see rlbench_vec.worker.video).

    env_ids: the envs that record (None: all). per_episode: one file per episode, else one per run.
    Frames come from every executed action, sub-steps of a chunk included.
    """

    directory: str = "videos"
    env_ids: tuple[int, ...] | None = None
    cameras: tuple[str, ...] = ("front", "wrist")
    fps: int = 20
    per_episode: bool = True
    queue_size: int = 64

    def validated(self, num_envs: int) -> VideoConfig:
        cameras = choose_all("video camera", self.cameras, CAMERAS)
        env_ids = None if self.env_ids is None else tuple(
            integer("video env_ids", i, 0, num_envs - 1) for i in self.env_ids)
        return replace(self, cameras=cameras, env_ids=env_ids, fps=integer("video fps", self.fps, 1),
                       queue_size=integer("video queue_size", self.queue_size, 1))

    def records(self, env: int) -> bool:
        return self.env_ids is None or env in self.env_ids


@dataclass(frozen=True)
class VectorConfig:
    """How the vector engine runs the workers.

    num_envs: environments. envs_per_worker: how many one worker process runs (None: the backend's
        choice: 1 for rlbench, whose CoppeliaSim allows one per process; the envs spread over the
        cores for mujoco and synthetic). A worker steps its envs in turn and renders them with one
        GL context; a crash or hang restarts that worker's envs, never the others.
    seed: base seed (env i gets seed + i). copy_obs: return copies instead of shared-memory views.
    max_chunk: the largest K that step_chunk accepts (shared buffers are sized for it).
    chunk_obs: "last" returns the observation after the last executed action of a chunk; "all"
        also fills info["chunk_observations"] with the observation after every sub-step.
    autoreset_mode: "next_step" (gymnasium's default), "same_step" or "disabled" (see README).
    eager_reset: with next-step autoreset, a worker resets an env as soon as it has answered the
        step that ended its episode, so the reset overlaps the policy's compute.
    spare_envs: extra instances kept reset, which take over an env whose episode ended while its
        own instance resets (for resets longer than the policy's time per step).
    step_timeout_s / reset_timeout_s / start_timeout_s: a worker silent for longer is killed and
        restarted (step_timeout_s is per action and env). max_restarts_per_env /
        max_restarts_total: beyond these a crash loop raises RestartBudgetExceeded.
    recycle_after_episodes / max_worker_rss_mb: replace a worker between episodes once its envs
        ran that many episodes each, or its memory passed that many MB (simulators that leak).
        Like spare_envs, these need autoreset_mode="next_step".
    display: None picks per backend (own Xvfb per worker when the simulator needs X, rendering on an
        NVIDIA GPU where the worker's self-test gets one, else on the CPU); "xvfb-gpu" insists on the
        GPU, "xvfb-cpu" on Mesa; "shared" uses the existing $DISPLAY; a string like ":0.1" or a list
        (one per worker) pins displays (rlbench_vec/display/__init__.py).
    cpu_affinity: pin each worker to one core of this local rank's share of the cores.
    record: per-env video (True for the defaults, or a VideoConfig).
    as_torch / device: return torch tensors; device="cuda" delivers them on the GPU (rlbench_vec.engine.tensors).
    clip_actions: an action outside the action space's bounds is clipped to them and its env flagged with
        info["action_clipped"]; False refuses it with an ActionError instead.
    """

    num_envs: int = 1
    envs_per_worker: int | None = None
    seed: int | None = 0
    copy_obs: bool = False
    max_chunk: int = 16
    chunk_obs: str = "last"
    autoreset_mode: str = "next_step"
    eager_reset: bool = True
    spare_envs: int = 0
    step_timeout_s: float = 60.0
    reset_timeout_s: float = 300.0
    start_timeout_s: float = 300.0
    max_restarts_per_env: int = 5
    max_restarts_total: int = 50
    recycle_after_episodes: int | None = None
    max_worker_rss_mb: float | None = None
    display: str | list[str] | None = None
    cpu_affinity: bool = False
    record: bool | VideoConfig = False
    as_torch: bool = False
    device: str | None = None
    clip_actions: bool = True

    def validated(self) -> VectorConfig:
        n = integer("num_envs", self.num_envs, 1)
        values: dict[str, Any] = {
            "num_envs": n,
            "max_chunk": integer("max_chunk", self.max_chunk, 1, MAX_CHUNK),
            "chunk_obs": choose("chunk_obs", self.chunk_obs, CHUNK_OBS),
            "autoreset_mode": choose("autoreset_mode", self.autoreset_mode, AUTORESET_MODES),
            "spare_envs": integer("spare_envs", self.spare_envs, 0),
            "max_restarts_per_env": integer("max_restarts_per_env", self.max_restarts_per_env, 0),
            "max_restarts_total": integer("max_restarts_total", self.max_restarts_total, 0),
            "record": self._video(n),
        }
        for name in ("copy_obs", "eager_reset", "cpu_affinity", "as_torch", "clip_actions"):
            values[name] = flag(name, getattr(self, name))
        for name in ("step_timeout_s", "reset_timeout_s", "start_timeout_s"):
            values[name] = positive(name, getattr(self, name))
        if self.seed is not None:
            values["seed"] = integer("seed", self.seed, 0)
        if self.envs_per_worker is not None:
            values["envs_per_worker"] = integer("envs_per_worker", self.envs_per_worker, 1)
        if self.recycle_after_episodes is not None:
            values["recycle_after_episodes"] = integer("recycle_after_episodes", self.recycle_after_episodes, 1)
        if self.max_worker_rss_mb is not None:
            values["max_worker_rss_mb"] = positive("max_worker_rss_mb", self.max_worker_rss_mb, "MB")
        if values["autoreset_mode"] != "next_step":
            # both hand an env to another instance at its next-step autoreset
            for name in ("spare_envs", "recycle_after_episodes", "max_worker_rss_mb"):
                if getattr(self, name):
                    raise ConfigError(f"{name} hands envs to fresh instances at a next-step autoreset; "
                                      f"use autoreset_mode='next_step' (got {values['autoreset_mode']!r}).")
        if self.device is not None and not self.as_torch:
            raise ConfigError(f"device={self.device!r} needs as_torch=True (devices hold torch tensors).")
        return replace(self, **values)

    def _video(self, num_envs: int) -> VideoConfig | None:
        if self.record is True:
            return VideoConfig().validated(num_envs)
        if self.record is False or self.record is None:
            return None
        if not isinstance(self.record, VideoConfig):
            raise ConfigError(f"record must be True, False or a VideoConfig, got {self.record!r}.")
        return self.record.validated(num_envs)

    @property
    def video(self) -> VideoConfig | None:
        """The validated video settings (a validated config holds a VideoConfig or None in `record`)."""
        return self.record if isinstance(self.record, VideoConfig) else None


ENV_OPTIONS = tuple(f.name for f in fields(EnvConfig) if f.name != "video_cameras")
VECTOR_OPTIONS = tuple(f.name for f in fields(VectorConfig))


def split_options(options: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """RLBenchVectorEnv's keyword options -> (EnvConfig fields, VectorConfig fields)."""
    unknown = sorted(set(options) - set(ENV_OPTIONS) - set(VECTOR_OPTIONS))
    if unknown:
        name = unknown[0]
        raise ConfigError(
            f"unknown option {name!r}.{close_matches(name, ENV_OPTIONS + VECTOR_OPTIONS)} "
            f"Environment options: {', '.join(ENV_OPTIONS)}. Engine options: {', '.join(VECTOR_OPTIONS)}."
        )
    env = {k: v for k, v in options.items() if k in ENV_OPTIONS}
    vector = {k: v for k, v in options.items() if k in VECTOR_OPTIONS}
    for name in ("cameras", "modalities", "low_dim", "image_size"):  # lists from JSON or argparse
        if isinstance(env.get(name), list):
            env[name] = tuple(env[name])
    return env, vector
