"""Where one round trip's Python time goes, on both sides: cProfile of the main process around a step loop,
and of each worker's command loop (rlbench_vec.worker.serve), on the synthetic backend with free steps.

Two runs of --steps step() calls each, on fresh vector envs:
  cpu       no profiler: wall time per step, the main process's CPU per reply (one reply per worker and
            step) and each worker's CPU per command, measured around its command loop
  profile   cProfile on (it slows every call): the functions that take the time, main side per reply
            and worker side per command, with their share of the profiled time

Workers are profiled from this script: a spawned worker imports its parent's main module (as
__mp_main__) before it runs, so this module wraps rlbench_vec.worker.serve there when PROFILE_VAR is set.

    PYTHONPATH=. python benchmarks/profile_engine.py --num_envs 16 --envs_per_worker 1 --steps 3000 \\
        --json docs/profile_engine_cpu2.json
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import platform
import pstats
import resource
import sys
import tempfile
import time
from typing import Any

import numpy as np

import rlbench_vec.worker
from rlbench_vec import RLBenchVectorEnv
from rlbench_vec.cli import ArgumentParser, run_main
from rlbench_vec.config import CAMERAS, MODALITIES, EnvConfig

PROFILE_VAR = "RLBENCH_VEC_PROFILE_DIR"  # where each worker writes its numbers; set only for these runs
MODE_VAR = "RLBENCH_VEC_PROFILE_MODE"  # "cpu" or "profile"
WARMUP_STEPS = 50
DEFAULTS = EnvConfig()
# Where a side blocks until the other answers (the main process in poll, a worker reading its next command):
# listed apart from the work, which the shares count.
WAITS = {"main": ("<method 'poll' of 'select.poll' objects>",),
         "worker": ("<built-in method posix.read>", "<method 'recv_into' of '_socket.socket' objects>")}


def cpu_since(start: resource.struct_rusage) -> tuple[float, float]:
    """User and system CPU seconds of this process (all its threads) since `start` (getrusage: microseconds,
    where os.times() counts clock ticks)."""
    now = resource.getrusage(resource.RUSAGE_SELF)
    return now.ru_utime - start.ru_utime, now.ru_stime - start.ru_stime


def profiled_serve(serve):
    """serve(fd, runner) that records the worker's CPU time over its command loop (and, in profile
    mode, a cProfile of it) into PROFILE_VAR/worker-<pid>.{json,prof} when the loop ends."""
    def wrapper(fd: int, runner: Any) -> None:
        folder, mode = os.environ[PROFILE_VAR], os.environ.get(MODE_VAR, "cpu")
        profile = cProfile.Profile() if mode == "profile" else None
        cpu, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        try:
            if profile is None:
                serve(fd, runner)
            else:
                profile.runcall(serve, fd, runner)
        finally:
            wall, user, system = time.perf_counter() - wall, *cpu_since(cpu)
            path = os.path.join(folder, f"worker-{os.getpid()}")
            with open(path + ".json", "w") as file:
                json.dump({"user_s": user, "system_s": system, "wall_s": wall}, file)
            if profile is not None:
                profile.dump_stats(path + ".prof")
    return wrapper


if __name__ == "__mp_main__" and os.environ.get(PROFILE_VAR):  # a worker spawned by this script
    rlbench_vec.worker.serve = profiled_serve(rlbench_vec.worker.serve)


def parse_args() -> argparse.Namespace:
    parser = ArgumentParser(prog="python benchmarks/profile_engine.py", description=__doc__)
    parser.add_argument("--num_envs", type=int, default=16)
    parser.add_argument("--envs_per_worker", type=int, default=1)
    parser.add_argument("--steps", type=int, default=3000, help="timed step() calls per run")
    parser.add_argument("--step_cost_s", type=float, default=0.0, help="synthetic backend: CPU seconds per step")
    parser.add_argument("--image_size", type=int, nargs=2, default=DEFAULTS.image_size, metavar=("WIDTH", "HEIGHT"))
    parser.add_argument("--cameras", nargs="+", default=list(DEFAULTS.cameras), choices=CAMERAS)
    parser.add_argument("--modalities", nargs="+", default=list(DEFAULTS.modalities), choices=MODALITIES)
    parser.add_argument("--top", type=int, default=15, help="functions listed per side")
    parser.add_argument("--json", default=None, metavar="PATH", help="write the results here")
    return parser.parse_args()


def top_functions(stats: pstats.Stats, per: int, top: int, waits: tuple[str, ...]) -> dict[str, Any]:
    """The time spent blocked in `waits` and the `top` other functions by own time (tottime), in
    microseconds per `per` (replies or commands), with their share of the profiled time not waiting."""
    table = stats.stats  # type: ignore[attr-defined]
    waiting = sum(row[2] for key, row in table.items() if key[2] in waits)
    total = sum(row[2] for row in table.values()) - waiting
    rows = sorted(((key, row) for key, row in table.items() if key[2] not in waits), key=lambda item: -item[1][2])
    out = []
    for (path, line, name), (_, calls, tottime, cumtime, _) in rows[:top]:
        where = f"{os.path.relpath(path) if path.startswith('/') else path}:{line}"
        out.append({"function": f"{name} ({where})", "calls_per": round(calls / per, 3),
                    "own_us_per": round(1e6 * tottime / per, 2), "cum_us_per": round(1e6 * cumtime / per, 2),
                    "own_share": round(tottime / total, 3)})
    return {"waiting_us_per": round(1e6 * waiting / per, 2), "working_us_per": round(1e6 * total / per, 2),
            "functions": out}


def run(args: argparse.Namespace, mode: str) -> dict[str, Any]:
    """One run of `mode` ("cpu" or "profile"), the workers' numbers in a folder removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="profile_engine-") as folder:
        return measure(args, mode, folder)


def measure(args: argparse.Namespace, mode: str, folder: str) -> dict[str, Any]:
    """The main side's loop and every worker's numbers (which the workers write into `folder`)."""
    os.environ[PROFILE_VAR], os.environ[MODE_VAR] = folder, mode
    try:
        env = RLBenchVectorEnv(num_envs=args.num_envs, backend="synthetic", envs_per_worker=args.envs_per_worker,
                               image_size=tuple(args.image_size), cameras=args.cameras, modalities=args.modalities,
                               backend_options={"step_cost_s": args.step_cost_s})
    finally:
        del os.environ[PROFILE_VAR], os.environ[MODE_VAR]
    with env:
        workers = len(env.worker_pids)
        env.reset(seed=0)
        actions = np.stack([env.single_action_space.sample() for _ in range(env.num_envs)])
        for _ in range(WARMUP_STEPS):
            env.step(actions)
        env.reset_stats()
        profile = cProfile.Profile() if mode == "profile" else None
        cpu, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        if profile is not None:
            profile.enable()
        for _ in range(args.steps):
            env.step(actions)
        if profile is not None:
            profile.disable()
        wall, (user, system) = time.perf_counter() - start, cpu_since(cpu)
        resets = int(env.stats()["resets"].sum())
    # closed: every worker has written its numbers. Each answered one reset, the warm-up and the timed
    # steps, one command per step (one command serves its whole env group)
    commands = 1 + WARMUP_STEPS + args.steps
    replies = args.steps * workers
    numbers = [read_json(os.path.join(folder, name)) for name in os.listdir(folder) if name.endswith(".json")]
    worker_user = float(np.mean([n["user_s"] for n in numbers])) if numbers else float("nan")
    worker_system = float(np.mean([n["system_s"] for n in numbers])) if numbers else float("nan")
    result: dict[str, Any] = {
        "mode": mode, "workers": workers, "workers_reporting": len(numbers), "steps": args.steps,
        "resets_in_timed_steps": resets, "step_us": 1e6 * wall / args.steps,
        "env_steps_per_s": args.steps * args.num_envs / wall,
        "main_user_us_per_reply": 1e6 * user / replies, "main_system_us_per_reply": 1e6 * system / replies,
        "worker_user_us_per_command": 1e6 * worker_user / commands,
        "worker_system_us_per_command": 1e6 * worker_system / commands,
    }
    if profile is not None:
        result["main_top"] = top_functions(pstats.Stats(profile), replies, args.top, WAITS["main"])
        dumps = [os.path.join(folder, name) for name in os.listdir(folder) if name.endswith(".prof")]
        if dumps:  # all workers' profiles merged: per command of one worker
            result["worker_top"] = top_functions(pstats.Stats(*dumps), commands * len(dumps), args.top,
                                                 WAITS["worker"])
    return result


def read_json(path: str) -> dict[str, Any]:
    with open(path) as file:
        return json.load(file)


def print_run(r: dict[str, Any]) -> None:
    print(f"\n{r['mode']}: {r['workers']} workers, {r['step_us']:.0f} us per step ({r['env_steps_per_s']:,.0f} "
          f"env-steps/s); main CPU per reply {r['main_user_us_per_reply']:.1f} us user + "
          f"{r['main_system_us_per_reply']:.1f} us system; worker CPU per command "
          f"{r['worker_user_us_per_command']:.1f} us user + {r['worker_system_us_per_command']:.1f} us system")
    for side, per in (("main_top", "reply"), ("worker_top", "command")):
        if side in r:
            top = r[side]
            print(f"  {side.split('_')[0]} side per {per}: {top['working_us_per']:.1f} us working, "
                  f"{top['waiting_us_per']:.1f} us blocked; own time (share of the working time):")
            for row in top["functions"]:
                print(f"    {row['own_us_per']:8.2f} us  {100 * row['own_share']:4.1f}%  {row['function']}")


def main() -> None:
    args = parse_args()
    load = os.getloadavg()  # other work on the machine makes every figure here larger
    runs = [run(args, "cpu"), run(args, "profile")]
    for result in runs:
        print_run(result)
    if args.json:
        command = "PYTHONPATH=. python benchmarks/profile_engine.py " + " ".join(sys.argv[1:])
        with open(args.json, "w") as file:
            json.dump({"command": command, "host": platform.node(), "cpus": os.cpu_count(),
                       "python": platform.python_version(), "load_average_1_5_15_min_before": load,
                       "num_envs": args.num_envs,
                       "envs_per_worker": args.envs_per_worker, "step_cost_s": args.step_cost_s,
                       "image_size": list(args.image_size), "cameras": args.cameras,
                       "modalities": args.modalities, "runs": runs}, file, indent=1)


if __name__ == "__main__":
    run_main(main, "python benchmarks/profile_engine.py")
