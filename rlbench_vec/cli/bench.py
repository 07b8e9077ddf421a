"""Throughput benchmark: `python -m rlbench_vec.bench [flags]`.

Starts num_envs workers (a progress bar follows the slow simulator start-up), resets, then runs
--steps actions per env with valid random actions for the arm mode, and prints env-steps/s, where
each step's time goes (worker execution, observation write, IPC wait, reset), start-up time, memory
and CPU use. --json PATH also writes the numbers.

    python -m rlbench_vec.bench --num_envs 64 --steps 100 --task OpenDrawer --arm_mode ik \\
        --action_chunk 16 --copy_obs 0 --image_size 128 128 --record

Under torchrun every rank runs its own vector env; rank 0 prints the throughput summed over ranks:

    torchrun --nproc_per_node=4 -m rlbench_vec.bench --num_envs 16 --cpu_affinity
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..config import ACTION_TIMINGS, ARM_MODES, BACKENDS, CAMERAS, GRIPPER_MODES, MODALITIES, EnvConfig, VideoConfig
from ..distributed import RankInfo, cores_of_rank
from ..vector_env import RLBenchVectorEnv
from . import ArgumentParser, add_ignore_collisions_flag, json_object, non_negative, positive
from .bench_actions import GRIPPER_SWITCH_P, ActionSampler
from .bench_report import Progress, combine, print_summary
from .bench_usage import CpuClock, gpu_used_mb, memory

DEFAULTS = EnvConfig()


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = ArgumentParser(prog="python -m rlbench_vec.bench", description=__doc__)
    parser.add_argument("--num_envs", type=positive, default=None,
                        help="envs of this rank (default: this host's cores / local ranks)")
    parser.add_argument("--steps", type=positive, default=100,
                        help="timed actions per env (rounded up to whole chunks)")
    parser.add_argument("--task", default=DEFAULTS.task, help="RLBench task, e.g. ReachTarget or open_drawer")
    parser.add_argument("--backend", default=DEFAULTS.backend, choices=BACKENDS,
                        help="auto: rlbench when installed, else the embedded mujoco")
    parser.add_argument("--backend_options", type=json_object, default={},
                        help='JSON, e.g. \'{"step_cost_s": 0.01}\' for the synthetic backend')
    parser.add_argument("--arm_mode", default=DEFAULTS.arm_mode, choices=ARM_MODES)
    parser.add_argument("--absolute_mode", type=int, default=int(DEFAULTS.absolute_mode), choices=(0, 1),
                        help="0: delta actions")
    add_ignore_collisions_flag(parser)
    parser.add_argument("--gripper_mode", default=DEFAULTS.gripper_mode, choices=GRIPPER_MODES)
    parser.add_argument("--action_timing", default=DEFAULTS.action_timing, choices=ACTION_TIMINGS,
                        help="rlbench: an action runs until done; fixed: one control step per action (mujoco, mjwarp)")
    parser.add_argument("--renderer", default=None, help="backend renderer (mujoco: osmesa, egl, glfw)")
    parser.add_argument("--action_chunk", type=positive, default=1,
                        help="K actions per env per round trip (step_chunk)")
    parser.add_argument(
        "--copy_obs", type=int, default=0, choices=(0, 1), help="1: copy observations out of shared memory"
    )
    parser.add_argument("--image_size", type=positive, nargs=2, default=DEFAULTS.image_size,
                        metavar=("WIDTH", "HEIGHT"))
    parser.add_argument("--cameras", nargs="+", default=list(DEFAULTS.cameras), choices=CAMERAS)
    parser.add_argument("--modalities", nargs="+", default=list(DEFAULTS.modalities), choices=MODALITIES)
    parser.add_argument("--max_episode_steps", type=positive, default=DEFAULTS.max_episode_steps)
    parser.add_argument("--envs_per_worker", type=positive, default=None, help="envs per worker process (default: the "
                        "backend's: all cores busy for mujoco/synthetic, 1 for rlbench)")
    parser.add_argument("--spare_envs", type=non_negative, default=0,
                        help="spare instances that take over at episode ends")
    parser.add_argument("--eager_reset", type=int, default=1, choices=(0, 1),
                        help="1: reset an ended episode before its next step is asked for")
    parser.add_argument("--async", dest="async_", action="store_true",
                        help="partial batches: send/recv, acting on the first --min_envs envs to finish")
    parser.add_argument(
        "--min_envs", type=positive, default=None, help="envs per partial batch (implies --async; default num_envs/2)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--cpu_affinity", action="store_true", help="pin each worker to a core of this local rank's share"
    )
    parser.add_argument("--record", action="store_true", help="record per-env video while benchmarking")
    parser.add_argument("--video_dir", default="videos")
    parser.add_argument("--video_envs", type=non_negative, nargs="+", default=None,
                        help="envs that record (default: all)")
    parser.add_argument("--video_fps", type=positive, default=20)
    parser.add_argument("--gripper_switch", type=float, default=GRIPPER_SWITCH_P,
                        help="probability per env and action that the gripper changes (open <-> closed)")
    parser.add_argument("--as_torch", action="store_true", help="observations as torch tensors")
    parser.add_argument("--device", default=None, help="with --as_torch: the tensors' device, e.g. cuda")
    parser.add_argument("--profile", action="store_true",
                        help="mjwarp: time each phase of the step on the device (physics, render, each camera's "
                             "conversions, page writes, resets) and show it per env-step")
    parser.add_argument("--json", default=None, metavar="PATH", help="write the results here (rank 0)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # recorded in the JSON
    if args.min_envs is not None:
        args.async_ = True
    if not 0.0 <= args.gripper_switch <= 1.0:
        parser.error("--gripper_switch is a probability in [0, 1]")
    if args.device is not None and not args.as_torch:
        parser.error("--device needs --as_torch")
    if args.profile:
        if args.backend != "mjwarp":
            parser.error("--profile times the phases of the mjwarp backend's simulator: add --backend mjwarp")
        args.backend_options = {**args.backend_options, "profile": True}
    return args


def default_num_envs(info: RankInfo) -> int:
    """One env per core of this rank's share of the host."""
    return cores_of_rank(info)


def count_errors(info: dict[str, Any]) -> int:
    """Episodes ended by an invalid action in one step's (merged) info."""
    return int(np.count_nonzero(info.get("_error", ())))


def make_env(args: argparse.Namespace, num_envs: int, on_worker_ready) -> RLBenchVectorEnv:
    record: bool | VideoConfig = False
    if args.record:
        record = VideoConfig(directory=args.video_dir, fps=args.video_fps,
                             env_ids=None if args.video_envs is None else tuple(args.video_envs))
    return RLBenchVectorEnv(
        num_envs=num_envs, task=args.task, backend=args.backend, cameras=args.cameras,
        image_size=tuple(args.image_size), modalities=args.modalities, arm_mode=args.arm_mode,
        absolute_mode=bool(args.absolute_mode), ignore_collisions_flag=bool(args.ignore_collisions_flag),
        gripper_mode=args.gripper_mode, renderer=args.renderer,
        action_timing=args.action_timing,
        max_episode_steps=args.max_episode_steps, backend_options=args.backend_options,
        copy_obs=bool(args.copy_obs), seed=args.seed, max_chunk=args.action_chunk,
        envs_per_worker=args.envs_per_worker, spare_envs=args.spare_envs, eager_reset=bool(args.eager_reset),
        cpu_affinity=args.cpu_affinity, record=record, on_worker_ready=on_worker_ready, as_torch=args.as_torch,
        device=args.device,
    )


def run_sync(env: RLBenchVectorEnv, obs, sample: ActionSampler, calls: int, advance) -> int:
    """`calls` step (or step_chunk) calls over all envs. Returns invalid-action episode ends."""
    errors = 0
    for call in range(calls):
        actions = sample(obs)
        if sample.chunk == 1:
            obs, _, _, _, info = env.step(actions[:, 0])
        else:
            obs, _, _, _, info = env.step_chunk(actions)
        errors += count_errors(info)
        advance((call + 1) * env.num_envs)
    return errors


def run_async(env: RLBenchVectorEnv, obs, sample: ActionSampler, calls: int, min_envs: int, advance) -> int:
    """Partial batches: act on whichever min_envs envs finish first, until each env averaged `calls`
    commands; then collect the rest. Returns invalid-action episode ends."""
    actions = sample(obs)
    env.send(actions[:, 0] if sample.chunk == 1 else actions)
    done, errors, target, in_flight = 0, 0, calls * env.num_envs, env.num_envs
    while done < target:
        obs, _, _, _, info = env.recv(min_envs=min(min_envs, in_flight))
        ids = info["env_id"]
        done += len(ids)
        in_flight -= len(ids)
        errors += count_errors(info)
        advance(min(done, target))
        if done < target:
            actions = sample(obs)
            env.send(actions[:, 0] if sample.chunk == 1 else actions, env_ids=ids)
            in_flight += len(ids)
    if in_flight:  # settle the envs still in flight (their steps count: they are in the workers' totals)
        errors += count_errors(env.recv()[4])
    return errors


def bench_rank(args: argparse.Namespace, info: RankInfo, dist) -> dict[str, Any]:
    """Run this rank's benchmark; returns its numbers."""
    num_envs = args.num_envs or default_num_envs(info)
    progress = Progress(enabled=not args.quiet and info.rank == 0)
    try:
        on_ready = progress.task("starting workers")  # counts workers, as they report
        gpu_before = gpu_used_mb(args.device)
        env = make_env(args, num_envs, on_ready)
        with env:
            obs, _ = env.reset(seed=args.seed)
            sample = ActionSampler(env, args.action_chunk, seed=args.seed + 7919 * info.rank,
                                   gripper_switch=args.gripper_switch)
            calls = math.ceil(args.steps / args.action_chunk)
            obs = env.step(sample(obs)[:, 0])[0]  # warm-up (first renders, caches), not timed
            if dist is not None:
                dist.barrier()  # ranks time the same window
            advance = progress.task("stepping", calls * num_envs)
            env.reset_stats()
            if args.profile:
                env.call("phase_profile", env_ids=[0])  # the phases from here on
            cpu = CpuClock()
            cpu.begin(env.worker_pids)
            start = time.perf_counter()
            if args.async_:
                min_envs = min(args.min_envs or max(1, num_envs // 2), num_envs)
                errors = run_async(env, obs, sample, calls, min_envs, advance)
            else:
                min_envs, errors = None, run_sync(env, obs, sample, calls, advance)
            elapsed = time.perf_counter() - start
            phases = env.call("phase_profile", env_ids=[0])[0] if args.profile else None
            usage = cpu.end(env.worker_pids, elapsed)
            gpu_after = gpu_used_mb(args.device)
            stats = {key: float(value.sum()) for key, value in env.stats().items()}
            result = {
                "rank": info.rank, "backend": env.env_config.backend, "num_envs": num_envs, "min_envs": min_envs,
                "env_steps": int(stats["steps"]), "elapsed_s": elapsed, "sps": stats["steps"] / elapsed,
                "startup_s": env.start_time_s, "resets": int(stats["resets"]), "invalid_actions": errors,
                "workers": len(env.worker_pids),
                "gl_renderers": sorted({f["gl_renderer"] for f in env.worker_facts if f.get("gl_renderer")}),
                "restarts": int(stats["restarts"]), **usage, **memory(env),
                # the whole device's memory in use (every process) while the env runs, minus before it started
                "gpu_memory_mb": None if gpu_after is None or gpu_before is None else gpu_after - gpu_before,
            }
            steps = max(stats["steps"], 1.0)
            for part in ("exec", "write", "ipc", "reset"):
                result[f"{part}_ms"] = 1000 * stats[f"{part}_s"] / steps  # worker time per env-step
            result["step_ms"] = 1000 * elapsed / steps  # wall time per env-step
            if phases is not None:  # device time per env-step (the worlds step together: shared evenly)
                result["phases_ms"] = {name: 1000 * seconds / steps for name, seconds in phases.items()}
    finally:
        progress.stop()
    return result


def init_distributed(info: RankInfo):
    """torch.distributed (gloo: CPU only) when launched with several ranks; torch is imported only then."""
    if info.world_size == 1:
        return None
    import torch.distributed as dist

    dist.init_process_group(backend="gloo")
    return dist


def main(argv: Sequence[str] | None = None) -> dict[str, Any] | None:
    args = parse_args(argv)
    info = RankInfo.from_env()
    dist = init_distributed(info)
    try:
        result = bench_rank(args, info, dist)
        ranks: list[Any] = [result]
        if dist is not None:
            ranks = [None] * info.world_size
            dist.all_gather_object(ranks, result)
    finally:
        if dist is not None:
            dist.destroy_process_group()
    if info.rank != 0:
        return None
    combined = combine(args, ranks)
    print_summary(combined)
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as file:
            json.dump(combined, file, indent=2)
    return combined

