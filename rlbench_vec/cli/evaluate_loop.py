"""`evaluate`'s scheduling loop: the pending episodes on one vector env at a time, as partial batches.

An env whose action is done gets its next action at once, and an env whose episode ended starts the next
pending episode at once (send_reset), so a slow task holds no other. Outcomes: success is the episode ending
with reward > 0; the time limit, an invalid action (the robot's, or a policy's NaN, inf or number outside the
action space's bounds, never clipped: recorded with its reason) or a backend error in that env (recorded with
its reason; the others go on) end it too. A worker crash mid-episode reruns that episode (its record says how
often), never counted twice. Each finished episode is appended to the run folder's log as it ends.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium.spaces import Box

from ..config import EnvConfig, VectorConfig, VideoConfig
from ..errors import WorkerError
from ..vector_env import RLBenchVectorEnv
from .evaluate_config import EvaluateConfig, for_envs
from .evaluate_folder import OtherRanks, RunLog
from .evaluate_plan import EpisodeQueue, Planned
from .policies import Policy, PolicySource, as_actions
from .runs import FINAL, ProgressBar
from .videos import Videos


@dataclass
class Running:
    """The episode an env runs."""

    planned: Planned
    started: float
    reruns: int = 0
    steps: int = 0
    reward: float = 0.0
    descriptions: tuple[str, ...] = ()
    resetting: bool = True


def _entry(info: dict[str, Any], key: str, row: int) -> Any:
    """A per-env info entry of one row (gymnasium's batched infos: a value array and its mask), else None."""
    if key not in info or not bool(info.get("_" + key, np.ones(row + 1, bool))[row]):
        return None
    return info[key][row]


class Evaluation:
    """One run of a folder: the episodes left, what is logged, the counts the progress bar shows."""

    def __init__(self, config: EvaluateConfig, env_config: EnvConfig, policy: PolicySource, log: RunLog,
                 total: int, world: OtherRanks | None = None):
        self.config, self.env_config, self.source, self.log, self.total = config, env_config, policy, log, total
        self.world = world  # rank 0 under torchrun: the other ranks' episodes join the progress bar's counts
        self.done_before = len(log.log.episodes)
        self.counts = {key: 0 for key in ("success", "invalid_action", "backend_error", "reruns")}
        for episode in log.log.episodes:
            self._count(episode)
        self.in_flight = 0  # envs sent an action or a reset whose result is not in yet
        self.progress = ProgressBar(config.progress, "episodes")
        self.videos = Videos(log.out, config.video)

    def _count(self, episode: dict[str, Any]) -> None:
        """The progress bar's totals over the folder, kept up to date (not summed again at every step)."""
        self.counts["success"] += bool(episode["success"])
        self.counts["invalid_action"] += "invalid_action" in episode
        self.counts["backend_error"] += "backend_error" in episode
        self.counts["reruns"] += episode.get("reruns", 0)

    def show(self, description: str) -> None:
        for episode in self.world.episodes(now=description in FINAL) if self.world is not None else ():
            self.log.log.episodes.append(episode)
            self._count(episode)
        done, counts = len(self.log.log.episodes), self.counts
        rate = f"{100 * counts['success'] / done:.1f}%" if done else "-"
        self.progress.update(description, done, self.total, done - self.done_before,
                             f"success {rate}, invalid actions {counts['invalid_action']}, backend errors "
                             f"{counts['backend_error']}, reruns {counts['reruns']}", "episodes")

    def record(self, run: Running, success: bool, **why: str) -> None:
        """An episode that ended, appended to the log (why: invalid_action or backend_error, with its reason)."""
        p = run.planned
        line: dict[str, Any] = {"task": p.task, "episode": p.episode, "repeat": p.repeat, "variation": p.variation,
                                "seed": p.seed, "success": success, "steps": run.steps, "reward": run.reward,
                                "description": run.descriptions[0] if run.descriptions else "",
                                "seconds": round(time.perf_counter() - run.started, 3), **why}
        if run.reruns:
            line["reruns"] = run.reruns
        self.log.add(line, "episode")
        self._count(line)
        self.videos.finished(p)

    def run(self, pending: EpisodeQueue) -> None:
        """Pending episodes on one vector env: all of them, or (tasks pinned to envs) those of its envs' tasks."""
        config = self.config
        first = pending.first(config.num_envs)
        record = VideoConfig(directory=str(self.videos.raw), cameras=("front",)) if self.videos.wanted else False
        vector = VectorConfig(num_envs=len(first), seed=config.seed, autoreset_mode="disabled", record=record)
        try:
            with RLBenchVectorEnv.from_config(for_envs(self.env_config, [p.task for p in first]), vector) as env:
                self.log.add({"num_envs": len(first)}, "envs")
                policy = self.source.make(env, config.seed, config.max_steps)
                running: dict[int, Running] = {}
                # every env starts on its own: one whose first reset is quick need not wait for the slowest
                self._start(env, policy, running, [(env_id, p, 0) for env_id, p in enumerate(first)])
                while self.in_flight:
                    try:
                        obs, reward, terminated, truncated, info = env.recv(min_envs=1)
                        failed: dict[int, str] = {}
                    except WorkerError as error:  # a backend error fails its env's episode; the others go on
                        obs, reward, terminated, truncated, info = error.result
                        failed = {e.env_index: e.message.splitlines()[0] for e in error.errors}
                    self.in_flight -= len(reward)
                    self._act(env, policy, running, pending, obs, info, reward, terminated | truncated, failed)
                    self.show("evaluating")
        finally:
            self.videos.keep()  # the vector env is closed: its files are complete

    def _act(self, env: RLBenchVectorEnv, policy: Policy, running: dict[int, Running], pending: EpisodeQueue,
             obs: dict[str, Any], info: dict[str, Any], reward: np.ndarray, ended: np.ndarray,
             failed: dict[int, str]) -> None:
        """Take in one batch of results: record the episodes that ended, start the next ones, act on the rest."""
        ids = info["env_id"].tolist()
        acting: list[int] = []
        starting: list[tuple[int, Planned, int]] = []
        for row, env_id in enumerate(ids):
            run = running[env_id]
            if env_id in failed:
                self.record(run, False, backend_error=failed[env_id])
                self._queue_next(starting, env_id, running, pending)
                continue
            if run.resetting:  # the first observation of its episode
                run.resetting = False
                run.descriptions = tuple(map(str, info["descriptions"][row]))
                acting.append(row)
                continue
            run.steps += 1
            run.reward += float(reward[row])
            if _entry(info, "restarted", row):  # the worker died mid-episode: the same episode again
                run.reruns += 1
                starting.append((env_id, run.planned, run.reruns))
            elif ended[row]:
                invalid = _entry(info, "invalid_action", row)
                why = {"invalid_action": f"robot: {_entry(info, 'error', row) or 'no reason given'}"} if invalid else {}
                self.record(run, float(reward[row]) > 0, **why)
                self._queue_next(starting, env_id, running, pending)
            else:
                acting.append(row)
        if acting:
            self._send_actions(env, policy, running, starting, pending, obs, np.array(acting), ids)
        if starting:
            self._start(env, policy, running, starting)

    def _send_actions(self, env: RLBenchVectorEnv, policy: Policy, running: dict[int, Running],
                      starting: list[tuple[int, Planned, int]], pending: EpisodeQueue, obs: dict[str, Any],
                      rows: np.ndarray, ids: list[int]) -> None:
        """The policy's actions for the envs at `rows`: sent, or an invalid action recorded (NaN, inf, outside
        the bounds)."""
        act_ids = np.array([ids[row] for row in rows.tolist()])
        runs = [running[e] for e in act_ids.tolist()]
        # indexing copies: the policy may keep what it gets (the next recv reuses the shared rows)
        act_obs = {key: value[rows] for key, value in obs.items()}
        act_info = {"env_id": act_ids, "task": [r.planned.task for r in runs],
                    "variation_index": [r.planned.variation for r in runs],
                    "episode": [r.planned.episode for r in runs],
                    "repeat": [r.planned.repeat for r in runs], "descriptions": [list(r.descriptions) for r in runs],
                    "lang_goal": [r.descriptions[0] if r.descriptions else "" for r in runs],
                    "step": [r.steps for r in runs]}
        act_info["variation"] = act_info["variation_index"]  # the name of rlbench_vec 0.3's evaluate
        space = env.single_action_space
        assert isinstance(space, Box)
        actions, invalid = as_actions(policy.act(act_obs, act_info), len(rows), space.low, space.high)
        valid = [j for j, why in enumerate(invalid) if not why]
        for j, why in enumerate(invalid):
            if why:
                env_id = int(act_ids[j])
                self.record(running[env_id], False, invalid_action=why)
                self._queue_next(starting, env_id, running, pending)
        if valid:
            env.send(actions[valid], act_ids[valid])
            self.in_flight += len(valid)

    @staticmethod
    def _queue_next(starting: list[tuple[int, Planned, int]], env_id: int, running: dict[int, Running],
                    pending: EpisodeQueue) -> None:
        """The env's next episode, if any is left, joins those to start."""
        episode = pending.next(running[env_id].planned.task)
        if episode is not None:
            starting.append((env_id, episode, 0))

    def _start(self, env: RLBenchVectorEnv, policy: Policy, running: dict[int, Running],
               starting: list[tuple[int, Planned, int]]) -> None:
        ids = np.array([env_id for env_id, _, _ in starting])
        for env_id, p, reruns in starting:
            running[env_id] = Running(p, time.perf_counter(), reruns)
            self.videos.started(env_id, p)
        policy.reset(ids)
        self.in_flight += len(ids)
        env.send_reset(ids, seeds=[p.seed for _, p, _ in starting],
                       options={"env_options": [self._reset_options(p) for _, p, _ in starting]})

    def _reset_options(self, p: Planned) -> dict[str, Any]:
        """The episode's task and variation; a stored episode on rlbench also which one reset_to_demo starts
        (on the embedded backends its reset seed starts its scene)."""
        options: dict[str, Any] = {"task": p.task, "variation": p.variation}
        if p.demo is not None and self.config.backend == "rlbench":
            options.update(demo=p.demo, all_variations=p.all_variations)
        return options
