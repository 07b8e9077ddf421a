"""The episodes `evaluate` scores: episode k of a task always gets the same variation and reset seed (`plan`),
whatever the number of envs and whichever env runs it, and the queue that hands the pending ones to envs."""

from __future__ import annotations

import collections
from collections.abc import Iterable
from dataclasses import dataclass

from ..backends import backend_class
from ..config import EnvConfig, VectorConfig
from ..datasets.writers import Episode
from ..errors import ConfigError
from ..vector_env import RLBenchVectorEnv
from .evaluate_config import EvaluateConfig
from .runs import job_seed


@dataclass(frozen=True)
class Planned:
    """One episode to score: task, its number, and the variation and reset seed it always gets."""

    task: str
    episode: int
    variation: int
    seed: int


def variation_counts(env: EnvConfig, known: dict[str, int] | None = None) -> dict[str, int]:
    """Each task's variation count: the backend's classmethod where the main process knows it, else those
    `known` (a resumed folder's), else (rlbench) one started env's, reset to each such task in turn."""
    backend = backend_class(env.backend)
    counts = {task: backend.task_variation_count(env.for_task(task)) for task in env.tasks}
    unknown = [task for task, count in counts.items() if count is None and task not in (known or {})]
    if unknown:
        with RLBenchVectorEnv.from_config(env.for_task(unknown[0]), VectorConfig(num_envs=1)) as started:
            for task in unknown:
                started.reset(options={"task": task})
                counts[task] = int(started.get_attr("variation_count")[0])
    return {task: int(count or (known or {})[task]) for task, count in counts.items()}


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
