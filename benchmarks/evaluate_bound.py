"""The oracle's evaluation with the engine cut away: what `python -m rlbench_vec.evaluate --policy oracle --backend
mujoco --num_envs N` does, done by N plain processes. Each builds the mujoco backend in-process and runs the
episodes handed to it one at a time (the evaluation's own plan and EpisodeQueue: the same episodes, variations,
seeds and scheduling), stepping the oracle and writing every observation into private arrays: a worker's work per
step, without shared memory, commands, replies or batches. No vector env of N worker processes runs these episodes
sooner on the same machine, so the wall times bound the evaluation's, and their ratio bounds its speed-up.
--round_trip 1 adds the least a vector env whose policy runs in the main process must do: before each step a process
tells the main process and waits for its answer (a pickled word each way), the main process answering at once.

    MUJOCO_GL=egl PYTHONPATH=. python benchmarks/evaluate_bound.py --tasks peract18 --episodes 25 --num_envs 1 16 \\
        --json docs/evaluate_h200/bound.json
"""

from __future__ import annotations

import json
import multiprocessing
import os
import platform
import shlex
import sys
import time
from multiprocessing.connection import Connection, wait
from typing import Any, NamedTuple

import numpy as np

from rlbench_vec.cli import ArgumentParser, positive, run_main
from rlbench_vec.cli.evaluate_config import EvaluateConfig, checked, for_envs
from rlbench_vec.cli.evaluate_plan import EpisodeQueue, Planned, plan, variation_counts
from rlbench_vec.config import CAMERAS, MODALITIES, EnvConfig
from rlbench_vec.task_names import task_list

STEPPED = "stepped"  # a process's word to the main process before a step (--round_trip)


class Outcome(NamedTuple):
    """An episode's end, as a process reports it: seconds from its reset's start to its last step's end, of which
    reset_s the reset and its observation, act_s the steps' actions, write_s their observations (as the engine's
    workers count exec_s and write_s)."""
    success: bool
    steps: int
    seconds: float
    reset_s: float
    act_s: float
    write_s: float


def serve(connection: Connection, env_config: EnvConfig, index: int, max_steps: int, batch: bool,
          round_trip: bool) -> None:
    """A process's loop: run each episode it is sent, reply with its outcome; None ends it. batch: run as
    SCHED_BATCH, as the engine's workers do. round_trip: wait for the main process's answer before each step."""
    from rlbench_vec.backends.mujoco import BACKEND
    from rlbench_vec.spec import action_size, observation_spec

    if batch:
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    backend = BACKEND(env_config, index)
    observation = {key: np.empty(spec.shape, spec.dtype) for key, spec in observation_spec(env_config).items()}
    ignored = np.zeros(action_size(env_config), np.float32)  # the oracle acts in its place
    connection.send("ready")
    for planned in iter(connection.recv, None):
        started = time.perf_counter()
        backend.reset(planned.seed, {"task": planned.task, "variation": planned.variation})
        backend.write_observation(observation)
        reset_s, act_s, write_s, steps = time.perf_counter() - started, 0.0, 0.0, 0
        while True:
            if round_trip:  # the observation goes out, an action comes back
                connection.send(STEPPED)
                connection.recv()
            acting = time.perf_counter()
            result = backend.step(ignored)
            writing = time.perf_counter()
            backend.write_observation(observation)
            act_s, write_s = act_s + writing - acting, write_s + time.perf_counter() - writing
            steps += 1
            if result.terminated or steps == max_steps:
                break
        connection.send(Outcome(result.reward > 0, steps, time.perf_counter() - started, reset_s, act_s, write_s))
    backend.close()


def run(config: EvaluateConfig, num_envs: int, batch: bool, round_trip: bool) -> dict[str, Any]:
    """Every episode of `config` over num_envs processes; wall time from the first process's start to the last
    episode's end."""
    config, every_task = checked(config)
    counts = variation_counts(every_task)
    pending = EpisodeQueue(p for task in config.tasks for p in plan(config, task, counts[task]))
    first = pending.first(num_envs)
    env_config = for_envs(every_task, [p.task for p in first])
    context = multiprocessing.get_context("spawn")
    started = time.perf_counter()
    connections, processes, running = [], [], {}
    for index in range(len(first)):
        mine, theirs = context.Pipe()
        process = context.Process(target=serve, args=(theirs, env_config, index, config.max_steps, batch, round_trip),
                                  daemon=True)
        process.start()
        connections.append(mine)
        processes.append(process)
    for connection, episode in zip(connections, first):
        assert connection.recv() == "ready"
        connection.send(episode)
        running[connection] = episode
    ready_s = time.perf_counter() - started
    outcomes = []
    while running:
        for ready in wait(list(running)):
            assert isinstance(ready, Connection)
            message = ready.recv()
            if message == STEPPED:
                ready.send(True)
                continue
            outcomes.append(message)
            following: Planned | None = pending.next(running.pop(ready).task)
            ready.send(following)
            if following is not None:
                running[ready] = following
    wall_s = time.perf_counter() - started
    for process in processes:
        process.join()
    summed = lambda field: round(sum(getattr(o, field) for o in outcomes), 3)
    return {"num_envs": len(first), "sched_batch": batch, "round_trip": round_trip, "wall_s": round(wall_s, 3),
            "all_started_s": round(ready_s, 3), "episodes": len(outcomes), "successes": summed("success"),
            "episode_seconds_summed": summed("seconds"), "reset_seconds_summed": summed("reset_s"),
            "act_seconds_summed": summed("act_s"), "write_seconds_summed": summed("write_s"),
            "steps": summed("steps")}


def main() -> None:
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", default=["peract18"], help="task names or a suite")
    parser.add_argument("--episodes", type=positive, default=25, help="per task")
    parser.add_argument("--num_envs", type=positive, nargs="+", default=[1, 16], help="process counts, each a run")
    parser.add_argument("--cameras", nargs="+", default=list(CAMERAS), choices=CAMERAS)
    parser.add_argument("--modalities", nargs="+", default=["rgb", "depth"], choices=MODALITIES)
    parser.add_argument("--image_size", type=positive, nargs=2, default=[128, 128])
    parser.add_argument("--max_steps", type=positive, default=200)
    parser.add_argument("--sched_batch", type=int, nargs="+", default=[0], choices=[0, 1],
                        help="1: the processes run as SCHED_BATCH, as the engine's workers do; each a run")
    parser.add_argument("--round_trip", type=int, nargs="+", default=[0], choices=[0, 1],
                        help="1: a round trip to the main process before each step; each a run")
    parser.add_argument("--json", default=None, help="write the results here")
    args = parser.parse_args()
    config = EvaluateConfig(tasks=tuple(n for given in args.tasks for n in task_list(given)), episodes=args.episodes,
                            backend="mujoco", cameras=tuple(args.cameras), modalities=tuple(args.modalities),
                            image_size=tuple(args.image_size), max_steps=args.max_steps, progress=False).validated()
    runs = []
    for num_envs in args.num_envs:
        for batch in args.sched_batch:
            for round_trip in args.round_trip:
                runs.append(run(config, num_envs, bool(batch), bool(round_trip)))
                print(json.dumps(runs[-1]), flush=True)
    report = {"command": shlex.join(["python", *sys.argv]), "machine": f"{platform.node()}, {os.cpu_count()} cores",
              "mujoco_gl": os.environ.get("MUJOCO_GL"), "date": time.strftime("%Y-%m-%d %H:%M"), "runs": runs}
    if args.json:
        with open(args.json, "w") as file:
            json.dump(report, file, indent=2)


if __name__ == "__main__":
    run_main(main, "benchmarks/evaluate_bound.py")
