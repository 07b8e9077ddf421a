"""Compile the mjwarp backend's kernels ahead: `python -m rlbench_vec.warmup --backend mjwarp --tasks ...`.

A task's first start on a machine compiles MuJoCo Warp's and this backend's kernels into warp's kernel cache
(~/.cache/warp, or WARP_CACHE_PATH): minutes per task (docs/mjwarp.md). This starts each named task once, one
env, and closes it, so that later starts (evaluate, the bench, training) load the kernels from the cache. A
Docker image can run it as a build step: the cache is then part of the image. Start the tasks with the cameras
and modalities your runs observe: the announcement of a first start counts them (backends/mjwarp/first_start.py).

    python -m rlbench_vec.warmup --backend mjwarp --tasks peract18 reach_target pick_and_lift
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

from ..backends import list_tasks
from ..backends.mjwarp import ARM_MODES
from ..config import CAMERAS, MODALITIES, EnvConfig
from ..errors import ConfigError
from ..task_names import SUITES, task_list
from ..vector_env import RLBenchVectorEnv
from . import ArgumentParser

DEFAULTS = EnvConfig()
BACKENDS = ("mjwarp",)  # the backends whose first start compiles kernels


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = ArgumentParser(prog="python -m rlbench_vec.warmup", description=__doc__)
    parser.add_argument("--backend", default="mjwarp", choices=BACKENDS)
    parser.add_argument("--tasks", nargs="+", required=True,
                        help=f"task names (RLBench's, either spelling) or suites ({', '.join(SUITES)})")
    parser.add_argument("--device", default=None,
                        help="cpu, cuda or cuda:N (default: the first GPU torch sees, else warp's CPU device)")
    parser.add_argument("--cameras", nargs="*", default=list(DEFAULTS.cameras), choices=CAMERAS)
    parser.add_argument("--modalities", nargs="*", default=list(DEFAULTS.modalities), choices=MODALITIES)
    parser.add_argument("--arm_mode", default="joint_velocity", choices=ARM_MODES)
    parser.add_argument("--start_timeout_s", type=float, default=1800.0,
                        help="seconds one task's start (its compile) may take")
    return parser.parse_args(argv)


def tasks_of(given: Sequence[str]) -> list[str]:
    """The named tasks and the suites' tasks, each once, in order."""
    names = [name for item in given for name in task_list(item)]
    return list(dict.fromkeys(names))


def warm(task: str, args: argparse.Namespace) -> float:
    """Start `task` once (one env), reset it and close it; the seconds it took."""
    started = time.perf_counter()
    options = {} if args.device is None else {"device": args.device}
    with RLBenchVectorEnv(num_envs=1, task=task, backend=args.backend, cameras=tuple(args.cameras),
                          modalities=tuple(args.modalities), arm_mode=args.arm_mode, backend_options=options,
                          start_timeout_s=args.start_timeout_s) as env:
        env.reset(seed=0)
    return time.perf_counter() - started


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    tasks = tasks_of(args.tasks)
    known = list_tasks(args.backend)
    unknown = [task for task in tasks if task not in known]
    if unknown or not tasks:
        raise ConfigError(f"--tasks: unknown to the {args.backend} backend: {', '.join(unknown) or 'none given'}; "
                          f"it runs {', '.join(known)} and the suites {', '.join(SUITES)}.")
    total = time.perf_counter()
    for k, task in enumerate(tasks, 1):
        print(f"[{k}/{len(tasks)}] {task}: starting", flush=True)
        print(f"[{k}/{len(tasks)}] {task}: ready in {warm(task, args):.0f} s", flush=True)
    print(f"{len(tasks)} tasks' kernels are in warp's kernel cache ({time.perf_counter() - total:.0f} s)", flush=True)
    return 0
