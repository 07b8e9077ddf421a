"""What `python -m rlbench_vec.evaluate` scores and how: EvaluateConfig (its flags' names, defaults and
checks) and the episodes it plans, each with the variation and reset seed it always gets."""

from __future__ import annotations

import collections
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ..backends import backend_class
from ..backends.mujoco.backend import task_class
from ..config import CAMERAS, EnvConfig, close_matches, integer, resolve_backend
from ..datasets.writers import Episode
from ..errors import ConfigError
from ..spec import low_dim_fields, task_state_size
from ..task_names import SUITES, env_tasks, task_list
from .collect import job_seed
from .runs import command_line

POLICIES = ("oracle", "random")  # besides FILE.py:NAME and package.module:NAME
# Arguments that decide each episode's outcome: a resumed --out must repeat them.
SCORED_ARGUMENTS = ("tasks", "episodes", "variations", "seed", "backend", "policy", "arm_mode", "absolute_mode",
                    "gripper_mode", "max_steps", "image_size", "cameras", "modalities", "backend_options")


@dataclass(frozen=True)
class EvaluateConfig:
    """What to score and how; the flags of `python -m rlbench_vec.evaluate` have the same names.

    policy: "oracle" (the task's waypoint oracle acting through the env's actions; on rlbench RLBench's own waypoints,
    arm_mode "planning" or "ik"), "random"
    (action_space samples), or "FILE.py:NAME" / "package.module:NAME", a factory of the agent (docs/evaluate.md).
    tasks: names, or a suite (SUITES). episodes: per task. variations: the variations episodes cycle through
    (None: all of the task's, episode k gets variation k mod their count). seed: the base of every episode's reset
    seed. out: the folder of episodes.jsonl, results.json and results.md (a rerun resumes it). video: the first N
    episodes of each task as mp4 (front camera). Environment: backend, num_envs, arm_mode, absolute_mode,
    gripper_mode, max_steps (per episode), image_size, cameras, modalities, backend_options, renderer. progress:
    a progress bar on a terminal, whole lines otherwise."""

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

    def validated(self) -> EvaluateConfig:
        """A copy with names resolved, or ConfigError naming what is wrong: an unknown task with the closest
        names, before anything is written."""
        names = [name for given in ((self.tasks,) if isinstance(self.tasks, str) else self.tasks)
                 for name in task_list(given)]
        if not names or len(set(names)) != len(names):
            raise ConfigError(f"tasks must name at least one task, each once; got {self.tasks!r}.")
        if self.policy == "oracle" and resolve_backend(self.backend) == "synthetic":
            raise ConfigError("--policy oracle acts a task's waypoints, and the synthetic backend's tasks have none: "
                              "use --backend mujoco, mjwarp or rlbench for the oracle's table, or another policy.")
        if "variation" in self.backend_options:
            raise ConfigError("backend_options['variation'] is set per episode by the evaluation; use --variations.")
        for shaping in ("shaped_rewards", "dense_rewards"):
            if self.backend_options.get(shaping):
                raise ConfigError(f"backend_options[{shaping!r}] makes rewards other than 1 on success, and the "
                                  f"evaluation counts an episode a success by its last reward: leave {shaping} unset.")
        config = replace(self, tasks=tuple(names), episodes=integer("episodes", self.episodes, 1),
                         seed=integer("seed", self.seed, 0), video=integer("video", self.video, 0),
                         num_envs=integer("num_envs", self.num_envs, 1),
                         max_steps=integer("max_steps", self.max_steps, 1),
                         variations=None if self.variations is None else tuple(
                             integer("variations", v, 0) for v in self.variations),
                         backend_options=dict(self.backend_options))
        env = config.env_config(config.tasks[0])
        known = backend_class(env.backend).task_names()
        for task in config.tasks:
            if task not in known:
                raise ConfigError(f"unknown task {task!r} for the {env.backend} backend.{close_matches(task, known)}"
                                  f" Suites: {', '.join(SUITES)}; tasks: rlbench_vec.list_tasks({env.backend!r}).")
        config = replace(config, backend=env.backend)
        config.env_config(list(config.tasks))  # every task with these options (a backend's own checks)
        return config

    def env_config(self, tasks: str | list[str]) -> EnvConfig:
        """The validated environment of these tasks (one name, or one per env)."""
        options = dict(self.backend_options)
        if self.policy == "oracle":
            options["oracle"] = True
        room = None if isinstance(tasks, str) else self.state_size()  # any env may change to any task
        config = EnvConfig(task=env_tasks(tasks, len(tasks)) if isinstance(tasks, list) else tasks,
                           task_low_dim_size=room,
                           backend=self.backend, cameras=self.cameras, image_size=self.image_size,
                           modalities=self.modalities, arm_mode=self.arm_mode, absolute_mode=self.absolute_mode,
                           gripper_mode=self.gripper_mode, max_episode_steps=self.max_steps, renderer=self.renderer,
                           backend_options=options).validated()
        backend = backend_class(config.backend)
        for task in config.tasks:
            backend.validate(config.for_task(task))
        return config

    def state_size(self) -> int | None:
        """The longest task_low_dim_state of the tasks (every env may run any of them); None where the observation
        leaves it out (rlbench's default where a task's length is known only to its scene)."""
        every_task = replace(self.env_config(self.tasks[0]), task=self.tasks)
        return task_state_size(every_task) if "task_low_dim_state" in low_dim_fields(every_task) else None

    def scored_arguments(self) -> dict[str, Any]:
        return json.loads(json.dumps({name: getattr(self, name) for name in SCORED_ARGUMENTS}))

    def command(self) -> str:
        """The command line that runs this evaluation (and resumes it)."""
        return command_line("rlbench_vec.evaluate", self)


@dataclass(frozen=True)
class Planned:
    """One episode to score: task, its number, and the variation and reset seed it always gets."""

    task: str
    episode: int
    variation: int
    seed: int


def variation_count(config: EvaluateConfig, task: str) -> int | None:
    """How many variations the task has where the main process knows it (embedded tasks; synthetic's one); None
    where only a started env can tell (rlbench)."""
    if config.backend in ("mujoco", "mjwarp"):
        return task_class(config.env_config(task)).variation_count
    return 1 if config.backend == "synthetic" else None


def plan(config: EvaluateConfig, task: str, count: int) -> list[Planned]:
    """Episode k of the task: the variation --variations (else all `count` of them) gives it in turn, as
    RLBench's evaluations cycle through a task's variations, and the seed collect's jobs get from (seed, task,
    variation, k): the same whatever the number of envs and whichever env runs it."""
    cycle = config.variations if config.variations is not None else tuple(range(count))
    too_high = [v for v in cycle if v >= count]
    if too_high:
        raise ConfigError(f"{task} has {count} variations (0..{count - 1}); --variations {' '.join(map(str, cycle))} "
                          f"names {too_high}.")
    episodes = []
    for k in range(config.episodes):
        variation = cycle[k % len(cycle)]
        episodes.append(Planned(task, k, variation, job_seed(config.seed, Episode(task, variation, k), 0)))
    return episodes


class EpisodeQueue:
    """The episodes not yet run, handed to envs by task. An env's first episode of a task builds that task's
    scene (seconds, as long as several episodes), so an env keeps to its task while it has episodes left; then,
    unless tasks are pinned (the backend cannot change an env's task at a reset), it takes the task with the
    most left. Which env runs an episode never changes its variation or seed."""

    def __init__(self, episodes: Iterable[Planned], pinned: bool = False):
        self.pinned = pinned
        self.by_task: dict[str, collections.deque[Planned]] = {}
        for episode in episodes:
            self.by_task.setdefault(episode.task, collections.deque()).append(episode)

    def __len__(self) -> int:
        return sum(map(len, self.by_task.values()))

    def first(self, num_envs: int) -> list[Planned]:
        """The first episodes of up to num_envs envs: an env for each task (in order, as far as they go), the
        others shared out in proportion to the tasks' episodes left (D'Hondt: each to the task with the most
        episodes per env); grouped by task."""
        left = {task: len(queue) for task, queue in self.by_task.items() if queue}
        total = min(num_envs, sum(left.values()))
        envs = {task: 1 for task in list(left)[:total]}
        for _ in range(total - len(envs)):
            task = max((t for t in envs if envs[t] < left[t]), key=lambda t: left[t] / (envs[t] + 1))
            envs[task] += 1
        return [self.by_task[task].popleft() for task, count in envs.items() for _ in range(count)]

    def next(self, task: str) -> Planned | None:
        """The next episode for an env whose last episode was of `task`; None when none is left for it."""
        queue = self.by_task.get(task)
        if not queue and not self.pinned and self.by_task:
            queue = max(self.by_task.values(), key=len)
        return queue.popleft() if queue else None
