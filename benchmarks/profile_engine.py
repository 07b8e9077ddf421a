"""Where one round trip's Python time goes, on both sides: cProfile of the main process around a step loop,
and of each worker's command loop (rlbench_vec.worker.main.serve), on the synthetic backend with free steps.

Two runs of --steps step() calls each, on fresh vector envs:
  cpu       no profiler: wall time per step, the main process's CPU per reply (one reply per worker and
            step) and each worker's CPU per command, measured around its command loop
  profile   cProfile on (it slows every call): the functions that take the time, main side per reply
            and worker side per command, with their share of the profiled time

With --min_envs M the loop is partial batches instead: send to every env once, then --steps times
recv(min_envs=M) and send to the envs it returned; figures are then per env-step (every reply and
command answers a worker's envs that were ready, a number that varies).

Workers are profiled from this script: a spawned worker imports its parent's main module (as
__mp_main__) before it runs, so this module wraps rlbench_vec.worker.main.serve there when PROFILE_VAR is set.

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

import rlbench_vec.worker.main
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
    """serve(...) that records the worker's CPU time over its command loop (and, in profile mode, a
    cProfile of it) into PROFILE_VAR/worker-<pid>.{json,prof} when the loop ends. Takes serve's
    arguments as they are, so it profiles older packages in an A/B too."""
    def wrapper(*args: Any) -> None:
        folder, mode = os.environ[PROFILE_VAR], os.environ.get(MODE_VAR, "cpu")
        profile = cProfile.Profile() if mode == "profile" else None
        cpu, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        try:
            if profile is None:
                serve(*args)
            else:
                profile.runcall(serve, *args)
        finally:
            wall, user, system = time.perf_counter() - wall, *cpu_since(cpu)
            path = os.path.join(folder, f"worker-{os.getpid()}")
            with open(path + ".json", "w") as file:
                json.dump({"user_s": user, "system_s": system, "wall_s": wall}, file)
            if profile is not None:
                profile.dump_stats(path + ".prof")
    return wrapper


if __name__ == "__mp_main__" and os.environ.get(PROFILE_VAR):  # a worker spawned by this script
    rlbench_vec.worker.main.serve = profiled_serve(rlbench_vec.worker.main.serve)


def parse_args() -> argparse.Namespace:
    parser = ArgumentParser(prog="python benchmarks/profile_engine.py", description=__doc__)
    parser.add_argument("--num_envs", type=int, default=16)
    parser.add_argument("--envs_per_worker", type=int, default=1)
    parser.add_argument("--steps", type=int, default=3000, help="timed step() (or recv) calls per run")
    parser.add_argument("--min_envs", type=int, default=None,
                        help="time send/recv partial batches of at least this many envs instead of step()")
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
        loop = steps_loop if args.min_envs is None else partial_batches_loop(env, actions)
        warmup_env_steps = loop(env, actions, WARMUP_STEPS, args.min_envs)
        env.reset_stats()
        profile = cProfile.Profile() if mode == "profile" else None
        cpu, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        if profile is not None:
            profile.enable()
        env_steps = loop(env, actions, args.steps, args.min_envs)
        if profile is not None:
            profile.disable()
        wall, (user, system) = time.perf_counter() - start, cpu_since(cpu)
        resets = int(env.stats()["resets"].sum())
        if args.min_envs is not None:
            env.recv()  # the envs still in flight: answered before close, so every worker ends its loop
    # closed: every worker has written its numbers. Each answered one reset, the warm-up and the timed
    # steps, one command per step (one command serves its whole env group)
    commands = 1 + WARMUP_STEPS + args.steps
    replies = args.steps * workers
    # every action sent ran: a partial loop's first send, then one per env returned, the last ones drained
    run_env_steps = args.num_envs + warmup_env_steps + env_steps if args.min_envs is not None else (
        (1 + WARMUP_STEPS + args.steps) * args.num_envs)
    numbers = [read_json(os.path.join(folder, name)) for name in os.listdir(folder) if name.endswith(".json")]
    worker_user = float(np.mean([n["user_s"] for n in numbers])) if numbers else float("nan")
    worker_system = float(np.mean([n["system_s"] for n in numbers])) if numbers else float("nan")
    result: dict[str, Any] = {
        "mode": mode, "workers": workers, "workers_reporting": len(numbers), "steps": args.steps,
        "resets_in_timed_steps": resets, "step_us": 1e6 * wall / args.steps, "env_steps": env_steps,
        "env_steps_per_s": env_steps / wall,
        "main_cpu_us_per_env_step": 1e6 * (user + system) / env_steps,
        "worker_cpu_us_per_env_step": 1e6 * (worker_user + worker_system) * len(numbers) / run_env_steps,
    }
    if args.min_envs is not None:
        result["rows_per_recv"] = env_steps / args.steps
    else:
        result.update({
            "main_user_us_per_reply": 1e6 * user / replies, "main_system_us_per_reply": 1e6 * system / replies,
            "worker_user_us_per_command": 1e6 * worker_user / commands,
            "worker_system_us_per_command": 1e6 * worker_system / commands})
    # per reply and command where each is one per worker and step; else per env-step
    main_per, worker_per = (replies, commands) if args.min_envs is None else (env_steps, run_env_steps)
    if profile is not None:
        result["main_top"] = top_functions(pstats.Stats(profile), main_per, args.top, WAITS["main"])
        dumps = [os.path.join(folder, name) for name in os.listdir(folder) if name.endswith(".prof")]
        if dumps:  # all workers' profiles merged: per command of one worker (or per env-step of all)
            per = worker_per * len(dumps) if args.min_envs is None else worker_per
            result["worker_top"] = top_functions(pstats.Stats(*dumps), per, args.top, WAITS["worker"])
    return result


def steps_loop(env: RLBenchVectorEnv, actions: np.ndarray, calls: int, min_envs: None) -> int:
    """`calls` full steps; the env-steps they ran."""
    for _ in range(calls):
        env.step(actions)
    return calls * env.num_envs


def partial_batches_loop(env: RLBenchVectorEnv, actions: np.ndarray):
    """A loop of `calls` recv(min_envs) each followed by a send to the envs it returned, after one send to
    every env (made now); each call of the loop returns the env-steps it sent."""
    env.send(actions)

    def loop(env: RLBenchVectorEnv, actions: np.ndarray, calls: int, min_envs: int) -> int:
        sent = 0
        for _ in range(calls):
            ids = env.recv(min_envs=min_envs)[4]["env_id"]
            env.send(actions[: len(ids)], env_ids=ids)
            sent += len(ids)
        return sent
    return loop


def read_json(path: str) -> dict[str, Any]:
    with open(path) as file:
        return json.load(file)


def print_run(r: dict[str, Any]) -> None:
    print(f"\n{r['mode']}: {r['workers']} workers, {r['step_us']:.0f} us per call ({r['env_steps_per_s']:,.0f} "
          f"env-steps/s); CPU per env-step: main {r['main_cpu_us_per_env_step']:.1f} us, workers "
          f"{r['worker_cpu_us_per_env_step']:.1f} us"
          + (f"; {r['rows_per_recv']:.1f} rows per recv" if "rows_per_recv" in r else ""))
    per_reply = "main_user_us_per_reply" in r
    if per_reply:
        print(f"  main CPU per reply {r['main_user_us_per_reply']:.1f} us user + "
              f"{r['main_system_us_per_reply']:.1f} us system; worker CPU per command "
              f"{r['worker_user_us_per_command']:.1f} us user + {r['worker_system_us_per_command']:.1f} us system")
    units = ("reply", "command") if per_reply else ("env-step", "env-step")
    for side, per in zip(("main_top", "worker_top"), units):
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
        package = os.path.dirname(os.path.dirname(os.path.abspath(rlbench_vec.__file__)))
        command = f"PYTHONPATH={os.path.relpath(package)} python benchmarks/profile_engine.py " + " ".join(sys.argv[1:])
        with open(args.json, "w") as file:
            json.dump({"command": command, "host": platform.node(), "cpus": os.cpu_count(),
                       "python": platform.python_version(), "load_average_1_5_15_min_before": load,
                       "num_envs": args.num_envs, "min_envs": args.min_envs,
                       "envs_per_worker": args.envs_per_worker, "step_cost_s": args.step_cost_s,
                       "image_size": list(args.image_size), "cameras": args.cameras,
                       "modalities": args.modalities, "runs": runs}, file, indent=1)


if __name__ == "__main__":
    run_main(main, "python benchmarks/profile_engine.py")
