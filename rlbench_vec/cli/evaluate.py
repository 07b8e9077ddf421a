"""Score a policy on tasks x episodes with many envs: `python -m rlbench_vec.evaluate [flags]`, or
evaluate(EvaluateConfig(...)).

    python -m rlbench_vec.evaluate --policy oracle --tasks peract18 --episodes 25 --num_envs 16 --backend mujoco \\
        --out DIR

- Episodes: episode k of task t always gets the same variation and reset seed (evaluate_config.plan), whatever
  --num_envs and whichever env runs it, so a deterministic policy scores the same at 1 env and at 16.
- Running: one vector env for all tasks, each env running one episode at a time. The envs step as partial
  batches: an env whose action is done gets its next action, and an env whose episode ended starts the next
  pending episode at once (send_reset), so a slow task holds no other. An env keeps to one task while it has
  episodes left (evaluate_config.EpisodeQueue): each task an env meets costs it a scene build. Where a reset
  cannot change an env's task (mjwarp: a simulator per task), the envs are shared out between the tasks by their
  episodes (each task at least one env while there are as many envs as tasks, else the rest in a next vector
  env), and each env runs the episodes of its own task.
- Outcomes: success is the episode ending with reward > 0; a time limit (--max_steps), an invalid action (the
  robot's, or a policy's wrong shape or NaN: recorded and counted as failures) end it too. A worker crash
  mid-episode reruns that episode (flagged in its line), never counted twice.
- Output: DIR/episodes.jsonl, a line per finished episode as it ends; DIR/results.json (per task success rate and
  Wilson 95% interval, mean, command); DIR/results.md, the table also printed. A rerun with the same --out runs
  only the episodes not in episodes.jsonl.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..backends import backend_class, list_tasks
from ..config import ARM_MODES, BACKENDS, CAMERAS, GRIPPER_MODES, MODALITIES, VectorConfig, VideoConfig
from ..spec import action_size
from ..vector_env import RLBenchVectorEnv
from . import ArgumentParser, non_negative, positive
from .evaluate_config import EpisodeQueue, EvaluateConfig, Planned, plan, variation_count
from .evaluate_report import RESULTS_FILE, TABLE_FILE, EpisodeLog, markdown, read_episodes, scores
from .policies import Policy, as_actions, check_loads, make_policy
from .runs import ProgressBar, check_same_arguments, parsed_flags, run_stoppable, stop_if_disk_full, write_json
from .videos import Videos


@dataclass
class Running:
    """The episode an env runs."""

    planned: Planned
    started: float
    reruns: int = 0
    steps: int = 0
    reward: float = 0.0
    description: str = ""
    resetting: bool = True


def _flag(info: dict[str, Any], key: str, row: int) -> bool:
    """A per-env info entry of one row (gymnasium's batched infos: a value array and its mask)."""
    return key in info and bool(info.get("_" + key, np.ones(row + 1, bool))[row]) and bool(info[key][row])


class Evaluation:
    """One run: the episodes left, what is written, the counts the progress bar shows."""

    def __init__(self, config: EvaluateConfig, out: Path, done: list[dict[str, Any]]):
        self.config, self.out = config, out
        self.finished = list(done)
        self.successes = sum(bool(e["success"]) for e in done)
        self.total = len(config.tasks) * config.episodes
        self.log = EpisodeLog(out)
        self.invalid = sum(bool(e.get("invalid_action")) for e in done)
        self.reruns = 0
        self.in_flight = 0  # envs sent an action or a reset whose result is not in yet
        self.progress = ProgressBar(config.progress, "episodes")
        self.videos = Videos(out, config.video)

    def show(self, description: str) -> None:
        rate = f"{100 * self.successes / len(self.finished):.1f}%" if self.finished else "-"
        self.progress.update(description, len(self.finished), self.total, len(self.finished),
                             f"success {rate}, invalid actions {self.invalid}, reruns {self.reruns}", "episodes")

    def record(self, run: Running, success: bool, invalid: str | bool = False) -> None:
        p = run.planned
        line = {"task": p.task, "episode": p.episode, "variation": p.variation, "seed": p.seed, "success": success,
                "steps": run.steps, "reward": run.reward, "description": run.description,
                "seconds": round(time.perf_counter() - run.started, 3)}
        if invalid:
            line["invalid_action"] = invalid
            self.invalid += 1
        if run.reruns:
            line["reruns"] = run.reruns
        try:
            self.log.write(line)
        except OSError as error:
            stop_if_disk_full(str(error), self.out)
            raise
        self.finished.append(line)
        self.successes += success

    # ------------------------------------------------------------------ one vector env
    def run(self, pending: EpisodeQueue) -> None:
        """Every pending episode on one vector env."""
        config = self.config
        first = pending.first(config.num_envs)
        record = VideoConfig(directory=str(self.videos.raw), cameras=("front",)) if self.videos.wanted else False
        vector = VectorConfig(num_envs=len(first), seed=config.seed, autoreset_mode="disabled", record=record)
        with RLBenchVectorEnv.from_config(config.env_config([p.task for p in first]), vector) as env:
            policy = make_policy(config.policy, env)
            running: dict[int, Running] = {}
            # every env starts on its own: one whose first reset is quick need not wait for the slowest
            self._start(env, policy, running, [(env_id, p, 0) for env_id, p in enumerate(first)])
            while self.in_flight:
                obs, reward, terminated, truncated, info = env.recv(min_envs=1)
                self.in_flight -= len(reward)
                self._act(env, policy, running, pending, obs, info, reward, terminated | truncated)
                self.show("evaluating")
        self.videos.keep()

    @staticmethod
    def _options(p: Planned) -> dict[str, Any]:
        return {"task": p.task, "variation": p.variation}

    def _act(self, env: RLBenchVectorEnv, policy: Policy, running: dict[int, Running],
             pending: EpisodeQueue, obs: dict[str, Any], info: dict[str, Any], reward: np.ndarray,
             ended: np.ndarray) -> None:
        """Take in one batch of results: record the episodes that ended, start the next ones, act on the rest."""
        ids = info["env_id"].tolist()
        acting, starting = [], []
        for row, env_id in enumerate(ids):
            run = running[env_id]
            if run.resetting:  # the first observation of its episode
                run.resetting = False
                descriptions = info["descriptions"][row]
                run.description = str(descriptions[0]) if len(descriptions) else ""
                acting.append(row)
                continue
            run.steps += 1
            run.reward += float(reward[row])
            if _flag(info, "restarted", row):  # the worker died mid-episode: the same episode again
                self.reruns += 1
                run.reruns += 1
                starting.append((env_id, run.planned, run.reruns))
            elif ended[row]:
                self.record(run, float(reward[row]) > 0, _flag(info, "invalid_action", row))
                self._queue_next(starting, env_id, running, pending)
            else:
                acting.append(row)
        if acting:
            rows = np.array(acting)
            act_ids = np.array([ids[row] for row in acting])
            whole = len(acting) == len(ids)
            act_obs = obs if whole else {key: value[rows] for key, value in obs.items()}
            act_info = {"env_id": act_ids, "task": [running[e].planned.task for e in act_ids.tolist()],
                        "variation": [running[e].planned.variation for e in act_ids.tolist()],
                        "descriptions": [running[e].description for e in act_ids.tolist()],
                        "step": [running[e].steps for e in act_ids.tolist()]}
            size = action_size(env.env_config)
            actions, invalid = as_actions(policy.act(act_obs, act_info), len(acting), size)
            valid = [j for j, why in enumerate(invalid) if not why]
            for j, why in enumerate(invalid):
                if why:
                    env_id = int(act_ids[j])
                    self.record(running[env_id], False, why)
                    self._queue_next(starting, env_id, running, pending)
            if valid:
                env.send(actions[valid], act_ids[valid])
                self.in_flight += len(valid)
        if starting:
            self._start(env, policy, running, starting)

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
                       options={"env_options": [self._options(p) for _, p, _ in starting]})


def evaluate(config: EvaluateConfig, command: str | None = None) -> dict[str, Any]:
    """Score config.policy on every episode of `config` not yet in config.out; return the results, also written
    to {out}/results.json and {out}/results.md. command: what the results record (default: the equivalent
    command line)."""
    config = config.validated()
    check_loads(config.policy)
    counts = {task: variation_count(config, task) for task in config.tasks}
    unknown = [task for task, count in counts.items() if count is None]
    if unknown:
        counts.update(_ask_variation_counts(config, unknown))
    plans = {task: plan(config, task, int(counts[task] or 1)) for task in config.tasks}
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    check_same_arguments(out / RESULTS_FILE, config.scored_arguments(), "an evaluation")
    done = read_episodes(out)
    finished = {(e["task"], e["episode"]) for e in done}
    result: dict[str, Any] = {"command": command or config.command(), "backend": config.backend,
                              "policy": config.policy, "episodes_per_task": config.episodes,
                              "config": config.scored_arguments(), "finished": False}
    run = Evaluation(config, out, [e for e in done if e["task"] in config.tasks])
    started = time.perf_counter()
    try:
        if run.finished:
            run.progress.say(f"resuming {out}: {len(run.finished)} of {run.total} episodes are already there")
        pending = EpisodeQueue((p for task in config.tasks for p in plans[task] if (p.task, p.episode) not in finished),
                               pinned=backend_class(config.backend).task_change_reason is not None)
        while pending:
            run.run(pending)
        result["finished"] = True
    finally:
        run.log.close()
        run.show("done" if result["finished"] else "stopped")
        run.progress.stop()
        result.update(scores(config.tasks, run.finished))
        result.update({"invalid_actions": run.invalid, "reruns": run.reruns, "num_envs": config.num_envs,
                       "seconds": round(time.perf_counter() - started, 3)})
        try:
            write_json(out / RESULTS_FILE, result)
            (out / TABLE_FILE).write_text(markdown(result))
        except OSError:
            if result["finished"]:
                raise
    return result


def _ask_variation_counts(config: EvaluateConfig, tasks: list[str]) -> dict[str, int]:
    """The variation counts only a started env knows (rlbench): one env, reset to each task in turn."""
    counts = {}
    with RLBenchVectorEnv.from_config(config.env_config(tasks[0]), VectorConfig(num_envs=1)) as env:
        for task in tasks:
            env.reset(options={"task": task})
            counts[task] = int(env.get_attr("variation_count")[0])
    return counts


# ---- command line ----

def parse_args(argv: Sequence[str] | None = None) -> EvaluateConfig:
    parser = ArgumentParser(prog="python -m rlbench_vec.evaluate", description=__doc__)
    default = EvaluateConfig()
    parser.add_argument("--policy", default=default.policy,
                        help="oracle, random, FILE.py:NAME or package.module:NAME (a factory: docs/evaluate.md)")
    parser.add_argument("--tasks", nargs="+", default=list(default.tasks), metavar="TASK",
                        help="task names or a suite (peract18); the embedded backends run "
                             f"{' '.join(list_tasks('mujoco'))}")
    parser.add_argument("--episodes", type=positive, default=default.episodes, help="per task")
    parser.add_argument("--variations", type=non_negative, nargs="+", default=None,
                        help="the variations episodes cycle through (default: all of the task's)")
    parser.add_argument("--out", required=True, help="results folder (a rerun resumes it)")
    parser.add_argument("--seed", type=int, default=default.seed)
    parser.add_argument("--num_envs", type=positive, default=default.num_envs)
    parser.add_argument("--backend", default=default.backend, choices=BACKENDS)
    parser.add_argument("--video", type=non_negative, default=default.video,
                        help="record the first N episodes of each task (front camera, mp4)")
    parser.add_argument("--arm_mode", default=default.arm_mode, choices=ARM_MODES,
                        help="keyframe agents: planning or ik with --absolute_mode 1")
    parser.add_argument("--absolute_mode", type=int, default=1, choices=(0, 1))
    parser.add_argument("--gripper_mode", default=default.gripper_mode, choices=GRIPPER_MODES)
    parser.add_argument("--max_steps", type=positive, default=default.max_steps,
                        help="actions per episode (PerAct's keyframe agents: 25)")
    parser.add_argument("--image_size", type=positive, nargs=2, default=default.image_size, metavar=("WIDTH", "HEIGHT"))
    parser.add_argument("--cameras", nargs="+", default=list(default.cameras), choices=CAMERAS)
    parser.add_argument("--modalities", nargs="+", default=list(default.modalities), choices=MODALITIES)
    parser.add_argument("--backend_options", type=json.loads, default={}, help="JSON")
    parser.add_argument("--renderer", default=None, help="mujoco: osmesa, egl or glfw")
    parser.add_argument("--progress", type=int, default=1, choices=(0, 1))
    return EvaluateConfig(**parsed_flags(parser, argv, ("tasks", "cameras", "modalities", "image_size",
                                                        "variations")))


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    config = parse_args(argv)
    result = run_stoppable(evaluate, config, "rlbench_vec.evaluate", argv, "the finished episodes are kept; ",
                           Path(config.out) / RESULTS_FILE)
    if isinstance(result, int):
        return result
    print(markdown(result), end="")
    if result["invalid_actions"]:
        print(f"{result['invalid_actions']} episodes ended as invalid actions (counted as failures): "
              f"{Path(config.out) / 'episodes.jsonl'}")
    return 0


