"""Keyframe agents as RLBench runs them, on mujoco: the waypoint oracle and the keyframe policy (each episode's
own oracle demo reduced to PerAct's keyframes) acted in arm_mode="planning" with ignore_collisions_flag on, as
`rlbench_vec.evaluate --policy oracle|keyframes` acts them (backend_options oracle / keyframes), in-process on one
core. Per task: episodes solved (seeds 0..N-1, variation drawn per seed), mean keyframes (steps) per episode, and
the host time of choosing each path, by how it was found (unchecked: the straight path of a move marked
ignore_collisions; straight: checked and free; joint / rrt: around an obstacle). Writes {out}/{policy}.jsonl (a
line per task of this run, replacing an earlier run's file) and prints docs/tasks.md's rows.

    nice python benchmarks/keyframe_agents.py --policy oracle --episodes 100 --tasks peract18
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

from rlbench_vec.backends.mujoco import BACKEND
from rlbench_vec.cli import ArgumentParser, run_main
from rlbench_vec.config import EnvConfig
from rlbench_vec.task_names import task_list


def measure(task: str, policy: str, episodes: int, max_steps: int, image_size: int) -> dict:
    config = EnvConfig(task=task, backend="mujoco", arm_mode="planning", ignore_collisions_flag=True,
                       cameras=("front",), modalities=("rgb",), image_size=(image_size, image_size),
                       max_episode_steps=max_steps, backend_options={"variation": "random", policy: True}).validated()
    BACKEND.validate(config)
    backend = BACKEND(config, 0)
    solved, steps, failures, started = 0, [], {}, time.process_time()
    try:
        for seed in range(episodes):
            backend.reset(seed, None)
            taken, result = 1, backend.step(np.zeros(9, np.float32))
            while not result.terminated and taken < max_steps:
                taken, result = taken + 1, backend.step(np.zeros(9, np.float32))
            success = result.reward >= 1.0
            solved += success
            steps.append(taken)
            if not success:
                failures[seed] = result.info.get("error") or ("no keyframes left" if result.info.get(
                    "oracle_exhausted") else f"not solved in {taken} steps")
        costs = backend.sim.executor.planning_s
    finally:
        backend.close()
    return {
        "task": task, "policy": policy, "episodes": episodes, "solved": solved, "mean_keyframes": float(np.mean(steps)),
        "planning_ms": {how: {"count": len(s), "mean": 1000 * float(np.mean(s)), "p95": 1000 * float(np.percentile(
            s, 95))} for how, s in sorted(costs.items())},
        "cpu_s_per_episode": (time.process_time() - started) / episodes, "failures": failures,
        "command": " ".join(["python", *sys.argv]), "machine": f"{platform.node()}, {os.cpu_count()} cores (shared)",
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }


def table_row(report: dict) -> str:
    costs = report["planning_ms"]
    cost = ", ".join(f"{how} {c['mean']:.1f} ({c['count']})" for how, c in costs.items())
    return (f"| `{report['task']}` | {report['policy']} | {report['solved']}/{report['episodes']} | "
            f"{report['mean_keyframes']:.1f} | {cost} |")


def main() -> None:
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--policy", default="oracle", choices=("oracle", "keyframes"))
    parser.add_argument("--tasks", nargs="+", default=["peract18"], help="task names or a suite")
    parser.add_argument("--episodes", type=int, default=100, help="seeded episodes per task")
    parser.add_argument("--max_steps", type=int, default=100, help="actions (keyframes) per episode at most")
    parser.add_argument("--image_size", type=int, default=16, help="the front camera's side, pixels")
    parser.add_argument("--out", type=Path, default=Path("docs/keyframes"), help="folder for {policy}.jsonl")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / f"{args.policy}.jsonl", "w") as file:  # this run's lines only, never an earlier run's
        for task in [task for name in args.tasks for task in task_list(name)]:
            report = measure(task, args.policy, args.episodes, args.max_steps, args.image_size)
            file.write(json.dumps(report) + "\n")
            file.flush()
            print(table_row(report), flush=True)


if __name__ == "__main__":
    run_main(main, "python benchmarks/keyframe_agents.py")
