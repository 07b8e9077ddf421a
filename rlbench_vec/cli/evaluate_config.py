"""What `python -m rlbench_vec.evaluate` scores and how: EvaluateConfig (its flags' names, defaults and
checks), validated once with the one EnvConfig every vector env of the run derives from (`checked`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..backends import backend_class
from ..config import CAMERAS, EnvConfig, close_matches, integer, resolve_backend
from ..errors import ConfigError
from ..spec import low_dim_fields, task_state_size
from ..task_names import SUITES, env_tasks, task_list
from .runs import command_line

POLICIES = ("oracle", "keyframes", "random")  # besides FILE.py:NAME and package.module:NAME
# Arguments that decide each episode's outcome: a resumed --out must repeat them (with the package version and
# the policy's identity: evaluate_folder).
SCORED_ARGUMENTS = ("tasks", "episodes", "variations", "seed", "backend", "policy", "policy_args", "arm_mode",
                    "absolute_mode", "ignore_collisions_flag", "gripper_mode", "max_steps", "image_size", "cameras",
                    "modalities", "backend_options", "episodes_from", "repeats")
# PerAct's evaluation (peract eval.py through YARR; RVT's rvt/eval.py): the flags `--protocol peract` sets.
PROTOCOLS: dict[str, dict[str, Any]] = {"peract": {
    "tasks": ("peract18",), "episodes": 25, "max_steps": 25, "cameras": ("front", "left_shoulder", "right_shoulder",
                                                                          "wrist"),
    "modalities": ("rgb", "point_cloud"), "image_size": (128, 128), "arm_mode": "planning", "absolute_mode": True,
    "gripper_mode": "discrete", "ignore_collisions_flag": True,
}}


@dataclass(frozen=True)
class EvaluateConfig:
    """What to score and how; the flags of `python -m rlbench_vec.evaluate` have the same names.

    policy: "oracle" (the task's waypoint oracle acting through the env's actions; on rlbench RLBench's own waypoints,
    arm_mode "planning" or "ik"), "keyframes" (mujoco: each episode's own oracle demo reduced to PerAct's keyframes,
    acted through the pose arm mode: the upper bound of a keyframe agent trained on these demos), "random"
    (action_space samples), or "FILE.py:NAME" / "package.module:NAME", a factory of the agent (docs/evaluate.md).
    tasks: names, or a suite (SUITES). episodes: per task. variations: the variations episodes cycle through
    (None: all of the task's, episode k gets variation k mod their count). seed: the base of every episode's reset
    seed. out: the run folder: its log (log.jsonl), results.json and results.md (a rerun resumes it). video: the first N
    episodes of each task as mp4 (front camera). Environment: backend, num_envs, arm_mode, absolute_mode,
    gripper_mode, max_steps (per episode), image_size, cameras, modalities, backend_options, renderer. progress:
    a progress bar on a terminal, whole lines otherwise. policy_args: keyword arguments of the policy's factory
    (JSON values; scored). episodes_from: a dataset in RLBench's layout whose stored episodes are scored
    (datasets.stored_episodes: episode k of a task is its k-th stored one, with its variation and start; episodes
    caps how many; its identity is scored). repeats: the whole evaluation this many times over the same episodes,
    each repeat with its own seeds (results give each repeat, the mean and the standard deviation).
    ignore_collisions_flag: pose arm modes take a 9th number, PerAct's ignore_collisions (EnvConfig's).
    The flags' `--protocol peract` sets PROTOCOLS["peract"] (EvaluateConfig.of_protocol)."""

    policy: str = "oracle"
    tasks: tuple[str, ...] = ("reach_target",)
    episodes: int = 25
    variations: tuple[int, ...] | None = None
    seed: int = 0
    out: str = "evaluation"
    video: int = 0
    backend: str = "auto"
    num_envs: int = 1
    arm_mode: str = "ik"
    absolute_mode: bool = True
    gripper_mode: str = "discrete"
    max_steps: int = 200
    image_size: tuple[int, int] = (128, 128)
    cameras: tuple[str, ...] = CAMERAS
    modalities: tuple[str, ...] = ("rgb", "depth")
    backend_options: Mapping[str, Any] = field(default_factory=dict)
    renderer: str | None = None
    progress: bool = True
    policy_args: Mapping[str, Any] = field(default_factory=dict)
    episodes_from: str | None = None
    repeats: int = 1
    ignore_collisions_flag: bool = False

    @classmethod
    def of_protocol(cls, name: str, **changes: Any) -> EvaluateConfig:
        """PROTOCOLS[name]'s settings, then `changes` (e.g. policy, out, num_envs)."""
        if name not in PROTOCOLS:
            raise ConfigError(f"unknown protocol {name!r}; choose from {', '.join(PROTOCOLS)}.")
        return cls(**{**PROTOCOLS[name], **changes})

    def validated(self) -> EvaluateConfig:
        """A copy with names resolved, or ConfigError naming what is wrong: an unknown task with the closest
        names, before anything is written."""
        return checked(self)[0]

    def scored_arguments(self) -> dict[str, Any]:
        return json.loads(json.dumps({name: getattr(self, name) for name in SCORED_ARGUMENTS}))

    def command(self) -> str:
        """The command line that runs this evaluation (and resumes it)."""
        return command_line("rlbench_vec.evaluate", self)


def checked(config: EvaluateConfig) -> tuple[EvaluateConfig, EnvConfig]:
    """The config validated and the validated environment of all its tasks (task: the tuple of them, room in
    task_low_dim_state for the longest), computed once: a vector env of the run takes it with its envs' tasks
    (for_envs). ConfigError names what is wrong, before anything is written."""
    names = [name for given in ((config.tasks,) if isinstance(config.tasks, str) else config.tasks)
             for name in task_list(given)]
    if not names or len(set(names)) != len(names):
        raise ConfigError(f"tasks must name at least one task, each once; got {config.tasks!r}.")
    if config.policy == "oracle" and resolve_backend(config.backend) == "synthetic":
        raise ConfigError("--policy oracle acts a task's waypoints, and the synthetic backend's tasks have none: "
                          "use --backend mujoco, mjwarp or rlbench for the oracle's table, or another policy.")
    if config.policy == "keyframes" and resolve_backend(config.backend) != "mujoco":
        raise ConfigError("--policy keyframes reduces each episode's own oracle demo to keyframes, which the mujoco "
                          "backend records: use --backend mujoco.")
    if "variation" in config.backend_options:
        raise ConfigError("backend_options['variation'] is set per episode by the evaluation; use --variations.")
    if config.episodes_from is not None and config.variations is not None:
        raise ConfigError("--episodes_from scores each stored episode with its own variation; leave --variations out.")
    if "dataset_root" in config.backend_options and config.episodes_from is not None:
        raise ConfigError("--episodes_from sets the rlbench backend's dataset_root; leave it out of backend_options.")
    if config.episodes_from is not None and not Path(config.episodes_from).is_dir():
        raise ConfigError(f"--episodes_from {config.episodes_from}: no such folder (a dataset in RLBench's layout, "
                          "e.g. from python -m rlbench_vec.collect --format rlbench).")
    if not isinstance(config.policy_args, Mapping):
        raise ConfigError(f"policy_args must be a JSON object of the factory's keyword arguments, got "
                          f"{config.policy_args!r}.")
    for shaping in ("shaped_rewards", "dense_rewards"):
        if config.backend_options.get(shaping):
            raise ConfigError(f"backend_options[{shaping!r}] makes rewards other than 1 on success, and the evaluation "
                              f"counts an episode a success by its last reward: leave {shaping} unset.")
    config = replace(config, tasks=tuple(names), episodes=integer("episodes", config.episodes, 1),
                     seed=integer("seed", config.seed, 0), video=integer("video", config.video, 0),
                     num_envs=integer("num_envs", config.num_envs, 1),
                     max_steps=integer("max_steps", config.max_steps, 1),
                     variations=None if config.variations is None else tuple(
                         integer("variations", v, 0) for v in config.variations),
                     backend_options=dict(config.backend_options), repeats=integer("repeats", config.repeats, 1),
                     policy_args=json.loads(json.dumps(dict(config.policy_args))),
                     episodes_from=None if config.episodes_from is None else str(Path(config.episodes_from).resolve()))
    options = dict(config.backend_options)
    if config.policy in ("oracle", "keyframes"):
        options[config.policy] = True
    if config.episodes_from is not None and resolve_backend(config.backend) == "rlbench":
        options["dataset_root"] = config.episodes_from  # RLBench's get_demos reads the stored episodes there
    # misc: every policy gets the cameras' matrices (a few numbers per camera)
    env = EnvConfig(task=config.tasks, backend=config.backend, cameras=config.cameras, image_size=config.image_size,
                    modalities=config.modalities, arm_mode=config.arm_mode, absolute_mode=config.absolute_mode,
                    gripper_mode=config.gripper_mode, max_episode_steps=config.max_steps, renderer=config.renderer,
                    misc=True, backend_options=options,
                    ignore_collisions_flag=config.ignore_collisions_flag).validated()
    backend = backend_class(env.backend)
    known = backend.task_names()
    for task in config.tasks:
        if task not in known:
            raise ConfigError(f"unknown task {task!r} for the {env.backend} backend.{close_matches(task, known)}"
                              f" Suites: {', '.join(SUITES)}; tasks: rlbench_vec.list_tasks({env.backend!r}).")
    for task in config.tasks:  # every task with these options (the backend's own checks)
        backend.validate(env.for_task(task))
    # any env may change to any task: room for the longest task_low_dim_state (None where the observation leaves
    # it out: rlbench's default where a task's length is known only to its scene)
    every_task = replace(env, task=config.tasks)
    room = task_state_size(every_task) if "task_low_dim_state" in low_dim_fields(every_task) else None
    return replace(config, backend=env.backend), replace(env, task=config.tasks, task_low_dim_size=room)


def for_envs(env: EnvConfig, tasks: list[str]) -> EnvConfig:
    """The run's environment (checked) with each env's first task."""
    return replace(env, task=env_tasks(tasks, len(tasks)))
