"""The episodes `evaluate` scores: episode k of a task always gets the same variation and reset seed (`plan`),
whatever the number of envs and whichever env runs it, and the queue that hands the pending ones to envs."""

from __future__ import annotations

import collections
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..backends import backend_class
from ..config import EnvConfig, VectorConfig
from ..datasets.stored_episodes import dataset_identity, stored_task_episodes
from ..datasets.writers import Episode
from ..errors import ConfigError, DatasetError
from ..vector_env import RLBenchVectorEnv
from .evaluate_config import EvaluateConfig
from .runs import job_seed


@dataclass(frozen=True)
class Planned:
    """One episode to score: task, its number, the variation and reset seed it always gets, its repeat; a stored
    episode's place in its folder (demo) and the folder's layout, for RLBench's reset_to_demo."""

    task: str
    episode: int
    variation: int
    seed: int
    repeat: int = 0
    demo: int | None = None
    all_variations: bool = False

    @property
    def key(self) -> tuple[str, int, int, int, int]:
        """What identifies it in the run folder's log: (task, episode, repeat, variation, seed)."""
        return self.task, self.episode, self.repeat, self.variation, self.seed


def stored_starts(config: EvaluateConfig) -> dict[str, list[dict[str, Any]]] | None:
    """With episodes_from: per task, the start of each stored episode scored (at most config.episodes): its
    variation, reset_seed (None where the dataset names none), place in its folder and layout; recorded in the
    run folder's first record, so its plan rebuilds from the log. ConfigError where an embedded backend cannot
    start one (no reset seed: a dataset not written by rlbench_vec's collect)."""
    if config.episodes_from is None:
        return None
    starts = {}
    for task in config.tasks:
        try:
            stored = stored_task_episodes(config.episodes_from, task, config.episodes)
        except DatasetError as error:
            raise ConfigError(str(error)) from None
        unseeded = [str(e.path) for e in stored if e.reset_seed is None]
        if unseeded and config.backend != "rlbench":
            raise ConfigError(f"the {config.backend} backend starts a stored episode from the reset seed rlbench_vec's "
                              f"collect stores as its random_seed, and {unseeded[0]} has none (RLBench's own "
                              "dataset): score it with --backend rlbench (reset_to_demo), or collect the episodes "
                              "with python -m rlbench_vec.collect --format rlbench.")
        starts[task] = [{"variation": e.variation, "reset_seed": e.reset_seed, "demo": e.number,
                         "all_variations": e.all_variations} for e in stored]
    return starts


def dataset_record(config: EvaluateConfig, starts: dict[str, list[dict[str, Any]]] | None) -> dict[str, Any] | None:
    """The scored dataset's identity (a sha256 of the files that decide its scored episodes' starts)."""
    if config.episodes_from is None or starts is None:
        return None
    stored = {task: stored_task_episodes(config.episodes_from, task, len(task_starts))
              for task, task_starts in starts.items()}
    return {"sha256": dataset_identity(config.episodes_from, stored)}


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


def plan(config: EvaluateConfig, task: str, count: int, starts: list[dict[str, Any]] | None = None) -> list[Planned]:
    """Episode k of the task in repeat r: the variation --variations (else all `count` of them) gives it in turn,
    as RLBench's evaluations cycle through a task's variations, and the seed collect's jobs get from (seed, task,
    variation, k) at attempt r: the same whatever the number of envs and whichever env runs it. starts (stored
    episodes, stored_starts): episode k is the k-th stored one, with its variation; on an embedded backend its
    reset seed starts its scene in every repeat, on rlbench reset_to_demo does."""
    if starts is None:
        cycle = config.variations if config.variations is not None else tuple(range(count))
        too_high = [v for v in cycle if v >= count]
        if too_high:
            raise ConfigError(f"{task} has {count} variations (0..{count - 1}); --variations "
                              f"{' '.join(map(str, cycle))} names {too_high}.")
        starts = [{"variation": cycle[k % len(cycle)]} for k in range(config.episodes)]
    episodes = []
    for repeat in range(config.repeats):
        for k, start in enumerate(starts):
            variation = int(start["variation"])
            seed = start.get("reset_seed")
            if seed is None or config.backend == "rlbench":
                seed = job_seed(config.seed, Episode(task, variation, k), repeat)
            episodes.append(Planned(task, k, variation, int(seed), repeat, start.get("demo"),
                                    bool(start.get("all_variations", False))))
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
