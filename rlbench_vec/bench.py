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
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

import numpy as np
import psutil

from .backends import mjwarp
from .cli import ArgumentParser, run_main
from .config import (
    ACTION_TIMINGS,
    ARM_MODES,
    BACKENDS,
    CAMERAS,
    GRIPPER_MODES,
    MODALITIES,
    POSE_ARM_MODES,
    EnvConfig,
    VideoConfig,
)
from .distributed import RankInfo
from .vector_env import RLBenchVectorEnv

POSITION_NOISE_M = 0.01  # per action: a policy exploring around the current pose
ROTATION_NOISE = 0.02  # added to quaternion components, then renormalised
JOINT_NOISE = 0.05  # rad (joint_position) or rad/s (joint_velocity)
GRIPPER_SWITCH_P = 0.05  # per env and action: a gripper actuation runs until the fingers stop, keep them rare
NOISE_BANK = 64
MB = 1 << 20
DEFAULTS = EnvConfig()


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = ArgumentParser(prog="python -m rlbench_vec.bench", description=__doc__)
    parser.add_argument("--num_envs", type=int, default=None,
                        help="envs of this rank (default: this host's cores / local ranks)")
    parser.add_argument("--steps", type=int, default=100, help="timed actions per env (rounded up to whole chunks)")
    parser.add_argument("--task", default=DEFAULTS.task, help="RLBench task, e.g. ReachTarget or open_drawer")
    parser.add_argument("--backend", default=DEFAULTS.backend, choices=BACKENDS,
                        help="auto: rlbench when installed, else the embedded mujoco")
    parser.add_argument("--backend_options", type=json.loads, default={},
                        help='JSON, e.g. \'{"step_cost_s": 0.01}\' for the synthetic backend')
    parser.add_argument("--arm_mode", default=DEFAULTS.arm_mode, choices=ARM_MODES)
    parser.add_argument("--absolute_mode", type=int, default=int(DEFAULTS.absolute_mode), choices=(0, 1),
                        help="0: delta actions")
    parser.add_argument("--gripper_mode", default=DEFAULTS.gripper_mode, choices=GRIPPER_MODES)
    parser.add_argument("--action_timing", default=DEFAULTS.action_timing, choices=ACTION_TIMINGS,
                        help="rlbench: an action runs until done; fixed: one control step per action (mujoco, mjwarp)")
    parser.add_argument("--renderer", default=None, help="backend renderer (mujoco: osmesa, egl, glfw)")
    parser.add_argument("--action_chunk", type=int, default=1, help="K actions per env per round trip (step_chunk)")
    parser.add_argument(
        "--copy_obs", type=int, default=0, choices=(0, 1), help="1: copy observations out of shared memory"
    )
    parser.add_argument("--image_size", type=int, nargs=2, default=DEFAULTS.image_size, metavar=("WIDTH", "HEIGHT"))
    parser.add_argument("--cameras", nargs="+", default=list(DEFAULTS.cameras), choices=CAMERAS)
    parser.add_argument("--modalities", nargs="+", default=list(DEFAULTS.modalities), choices=MODALITIES)
    parser.add_argument("--max_episode_steps", type=int, default=DEFAULTS.max_episode_steps)
    parser.add_argument("--envs_per_worker", type=int, default=None, help="envs per worker process (default: the "
                        "backend's: all cores busy for mujoco/synthetic, 1 for rlbench)")
    parser.add_argument("--spare_envs", type=int, default=0, help="spare instances that take over at episode ends")
    parser.add_argument("--eager_reset", type=int, default=1, choices=(0, 1),
                        help="1: reset an ended episode before its next step is asked for")
    parser.add_argument("--async", dest="async_", action="store_true",
                        help="partial batches: send/recv, acting on the first --min_envs envs to finish")
    parser.add_argument(
        "--min_envs", type=int, default=None, help="envs per partial batch (implies --async; default num_envs/2)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--cpu_affinity", action="store_true", help="pin each worker to a core of this local rank's share"
    )
    parser.add_argument("--record", action="store_true", help="record per-env video while benchmarking")
    parser.add_argument("--video_dir", default="videos")
    parser.add_argument("--video_envs", type=int, nargs="+", default=None, help="envs that record (default: all)")
    parser.add_argument("--video_fps", type=int, default=20)
    parser.add_argument("--gripper_switch", type=float, default=GRIPPER_SWITCH_P,
                        help="probability per env and action that the gripper changes (open <-> closed)")
    parser.add_argument("--as_torch", action="store_true", help="observations as torch tensors")
    parser.add_argument("--device", default=None, help="with --as_torch: the tensors' device, e.g. cuda")
    parser.add_argument("--json", default=None, metavar="PATH", help="write the results here (rank 0)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # recorded in the JSON
    if args.min_envs is not None:
        args.async_ = True
    if args.steps < 1 or args.action_chunk < 1:
        parser.error("--steps and --action_chunk must be >= 1")
    if not 0.0 <= args.gripper_switch <= 1.0:
        parser.error("--gripper_switch is a probability in [0, 1]")
    if args.device is not None and not args.as_torch:
        parser.error("--device needs --as_torch")
    return args


def default_num_envs(info: RankInfo) -> int:
    """One env per core of this rank's share of the host."""
    return max(1, len(os.sched_getaffinity(0)) // info.local_world_size)


class ActionSampler:
    """Valid actions near the current state, so episodes look like an exploring policy's.

    Pose modes hold the observed gripper pose plus a small random walk over the chunk (unit
    quaternions); joint modes move by small random amounts. Moves that are still invalid (a pose
    IK cannot reach) end the episode with info["error"], as in RLBench; the bench counts them.
    The gripper changes with probability gripper_switch per env and call. Observations may be numpy
    arrays or torch tensors (the few fields read here are copied to the host).
    """

    def __init__(self, env: RLBenchVectorEnv, chunk: int, seed: int, gripper_switch: float = GRIPPER_SWITCH_P):
        self.config = env.env_config
        self.action_size = int(np.prod(env.single_action_space.shape or (1,)))
        self.chunk = chunk
        self.rng = np.random.default_rng(seed)
        self.switch_z = NormalDist().inv_cdf(1.0 - gripper_switch) if 0.0 < gripper_switch < 1.0 else (
            math.inf if gripper_switch <= 0.0 else -math.inf)  # P(normal > z) = gripper_switch
        self._banks: dict[int, np.ndarray] = {}
        self._calls = 0

    def _normal(self, m: int) -> np.ndarray:
        """Standard normal noise (m, K, A + 1) from a bank drawn once per batch size: drawing it every
        call would cost a good share of what the bench times when steps are cheap."""
        bank = self._banks.get(m)
        if bank is None:
            bank = self._banks[m] = self.rng.standard_normal((NOISE_BANK, m, self.chunk, self.action_size + 1))
        self._calls += 1
        return bank[self._calls % NOISE_BANK]

    def __call__(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        """Actions (M, K, A) for the M envs whose observations are given."""
        obs = {key: host(obs[key]) for key in ("gripper_open", "gripper_pose", "joint_positions",
                                                "gripper_joint_positions") if key in obs}
        m, k, c = len(obs["gripper_open"]), self.chunk, self.config
        actions = np.empty((m, k, self.action_size), np.float32)
        normal = self._normal(m)
        noise = lambda first, size, scale: scale * normal[..., first:first + size]
        # absolute targets wander from the observed state over the chunk; deltas are fresh each step
        drift = (lambda *a: np.cumsum(noise(*a), axis=1)) if c.absolute_mode else noise
        if c.arm_mode in POSE_ARM_MODES:
            pose = obs["gripper_pose"] if c.absolute_mode else np.tile([0, 0, 0, 0, 0, 0, 1.0], (m, 1))
            actions[..., :3] = pose[:, None, :3] + drift(0, 3, POSITION_NOISE_M)
            quat = pose[:, None, 3:7] + drift(3, 4, ROTATION_NOISE)
            norm = np.linalg.norm(quat, axis=-1, keepdims=True)
            actions[..., 3:7] = np.where(norm > 1e-6, quat / np.maximum(norm, 1e-6), [0, 0, 0, 1])
        elif c.arm_mode == "joint_position":
            start = obs["joint_positions"][:, None] if c.absolute_mode else 0.0
            actions[..., :-1] = start + drift(0, 7, JOINT_NOISE)
        else:  # joint velocities
            actions[..., :-1] = noise(0, 7, JOINT_NOISE)
        if c.gripper_mode == "discrete":
            gripper = np.asarray(obs["gripper_open"], np.float32)
            switch = normal[:, 0, -1] > self.switch_z
            actions[..., -1] = np.where(switch, 1.0 - gripper, gripper)[:, None]
        else:
            actions[..., -1] = np.clip(obs["gripper_joint_positions"][:, :1], 0.0, 0.04)
        return actions


def host(array: Any) -> np.ndarray:
    """A numpy array of a numpy array or a torch tensor (copied to the host where it lives on a device)."""
    return array.cpu().numpy() if hasattr(array, "cpu") else np.asarray(array)


def gpu_used_mb(device: str | None) -> float | None:
    """Memory in use on a CUDA device by every process (torch's view of cudaMemGetInfo), else None."""
    if device is None or not device.startswith("cuda"):
        return None
    import torch

    free, total = torch.cuda.mem_get_info(torch.device(device))
    return (total - free) / MB


def count_errors(info: dict[str, Any]) -> int:
    """Episodes ended by an invalid action in one step's (merged) info."""
    return int(np.count_nonzero(info.get("_error", ())))


@dataclass
class CpuClock:
    """CPU seconds of the main process, the workers and their helpers (Xvfb, ffmpeg) over a window."""

    main: psutil.Process = field(default_factory=psutil.Process)
    start: dict[int, float] = field(default_factory=dict)

    @staticmethod
    def seconds(process: psutil.Process) -> float:
        t = process.cpu_times()
        return t.user + t.system + t.children_user + t.children_system

    def sample(self, worker_pids: list[int]) -> dict[int, float]:
        out = {}
        for pid in worker_pids:
            try:
                worker = psutil.Process(pid)
                for process in (worker, *worker.children(recursive=True)):
                    out[process.pid] = self.seconds(process)
            except psutil.NoSuchProcess:
                continue
        return out

    def begin(self, worker_pids: list[int]) -> None:
        psutil.cpu_percent()  # starts the machine-wide window
        self.start = {0: self.seconds(self.main), **self.sample(worker_pids)}

    def end(self, worker_pids: list[int], elapsed: float) -> dict[str, float]:
        main = self.seconds(self.main) - self.start[0]
        workers = sum(s - self.start.get(pid, 0.0) for pid, s in self.sample(worker_pids).items())
        return {
            "cpu_main_cores": main / elapsed,
            "cpu_workers_cores": workers / elapsed,
            "cpu_machine_percent": psutil.cpu_percent(),
        }


def memory(env: RLBenchVectorEnv) -> dict[str, float]:
    """RSS of the main process and of each worker (shared-memory pages a worker touched count in its
    RSS too), and the size of the shared block."""
    workers = []
    for pid in env.worker_pids:
        try:
            workers.append(psutil.Process(pid).memory_info().rss / MB)
        except psutil.NoSuchProcess:
            continue
    shm_path = os.path.join("/dev/shm", env.shm_name or "")
    return {
        "rss_main_mb": psutil.Process().memory_info().rss / MB,
        "rss_worker_mb_mean": float(np.mean(workers)) if workers else 0.0,
        "rss_worker_mb_max": float(np.max(workers)) if workers else 0.0,
        "shm_mb": os.stat(shm_path).st_size / MB if os.path.exists(shm_path) else 0.0,
    }


class Progress:
    """A rich progress bar on stderr (or nothing: quiet, or not rank 0)."""

    def __init__(self, enabled: bool):
        self.bar = None
        if enabled:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
            from rich.progress import Progress as RichProgress

            self.bar = RichProgress(TextColumn("{task.description:<18}"), BarColumn(), MofNCompleteColumn(),
                                    TimeElapsedColumn(), console=Console(stderr=True))
            self.bar.start()

    def task(self, description: str, total: int | None = None):
        """A bar; the returned function takes (completed) or (completed, total)."""
        if self.bar is None:
            return lambda completed, total=None: None
        task = self.bar.add_task(description, total=total)
        return lambda completed, total=total: self.bar.update(task, completed=completed, total=total)

    def stop(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def make_env(args: argparse.Namespace, num_envs: int, on_worker_ready) -> RLBenchVectorEnv:
    record: bool | VideoConfig = False
    if args.record:
        record = VideoConfig(directory=args.video_dir, fps=args.video_fps,
                             env_ids=None if args.video_envs is None else tuple(args.video_envs))
    return RLBenchVectorEnv(
        num_envs=num_envs, task=args.task, backend=args.backend, cameras=args.cameras,
        image_size=tuple(args.image_size), modalities=args.modalities, arm_mode=args.arm_mode,
        absolute_mode=bool(args.absolute_mode), gripper_mode=args.gripper_mode, renderer=args.renderer,
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
            cpu = CpuClock()
            cpu.begin(env.worker_pids)
            start = time.perf_counter()
            if args.async_:
                min_envs = min(args.min_envs or max(1, num_envs // 2), num_envs)
                errors = run_async(env, obs, sample, calls, min_envs, advance)
            else:
                min_envs, errors = None, run_sync(env, obs, sample, calls, advance)
            elapsed = time.perf_counter() - start
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
    finally:
        progress.stop()
    return result


def combine(args: argparse.Namespace, ranks: list[dict[str, Any]]) -> dict[str, Any]:
    """One result for the whole job: sums over ranks (throughput, envs, steps, CPU), worst start-up."""
    first = ranks[0]
    env_steps = sum(r["env_steps"] for r in ranks)
    result = {
        "command": " ".join(["python -m rlbench_vec.bench", *args.argv]),
        "world_size": len(ranks), "backend": first["backend"], "task": args.task, "arm_mode": args.arm_mode,
        "action_timing": args.action_timing,
        "num_envs": sum(r["num_envs"] for r in ranks), "steps": args.steps, "action_chunk": args.action_chunk,
        "async": args.async_, "min_envs": first["min_envs"], "copy_obs": bool(args.copy_obs),
        "record": args.record, "image_size": list(args.image_size), "cameras": args.cameras, "seed": args.seed,
        "gripper_switch": args.gripper_switch, "as_torch": args.as_torch, "device": args.device,
        "env_steps": env_steps, "elapsed_s": max(r["elapsed_s"] for r in ranks),
        "sps": sum(r["sps"] for r in ranks), "startup_s": max(r["startup_s"] for r in ranks),
    }
    result["gl_renderers"] = sorted({name for r in ranks for name in r["gl_renderers"]})
    for key in ("resets", "invalid_actions", "restarts", "workers", "cpu_main_cores", "cpu_workers_cores"):
        result[key] = sum(r[key] for r in ranks)
    for key in ("exec_ms", "write_ms", "ipc_ms", "reset_ms"):  # weighted by each rank's steps
        result[key] = sum(r[key] * r["env_steps"] for r in ranks) / max(env_steps, 1)
    for key in ("cpu_machine_percent", "rss_main_mb", "rss_worker_mb_mean", "shm_mb"):
        result[key] = float(np.mean([r[key] for r in ranks]))
    result["rss_worker_mb_max"] = max(r["rss_worker_mb_max"] for r in ranks)
    gpu = [r["gpu_memory_mb"] for r in ranks if r["gpu_memory_mb"] is not None]
    result["gpu_memory_mb"] = sum(gpu) if gpu else None
    if len(ranks) > 1:
        result["ranks"] = ranks
    return result


def print_summary(result: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    r = result
    mode = "step_chunk" if r["action_chunk"] > 1 else "step"
    if r["async"]:
        mode += f", async (min_envs={r['min_envs']})"
    ranks = f" over {r['world_size']} ranks" if r["world_size"] > 1 else ""
    table = Table(title=f"rlbench_vec bench: {r['task']} on {r['backend']}, {r['num_envs']} envs{ranks}, "
                        f"{r['arm_mode']}, K={r['action_chunk']} ({mode})" + (", recording" if r["record"] else ""))
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_row("env-steps/s", f"{r['sps']:,.0f}")
    table.add_row("env-steps timed", f"{r['env_steps']:,} in {r['elapsed_s']:.2f} s")
    worker_ms = r["exec_ms"] + r["write_ms"] + r["ipc_ms"] + r["reset_ms"]
    for part, label in (("exec", "worker execution"), ("write", "observation write"), ("ipc", "IPC wait"),
                        ("reset", "reset")):
        share = 100 * r[f"{part}_ms"] / worker_ms if worker_ms else 0.0
        table.add_row(f"  {label} per env-step", f"{r[f'{part}_ms']:.3f} ms ({share:.0f}%)")
    table.add_row("startup (all workers ready)", f"{r['startup_s']:.2f} s")
    table.add_row("worker processes", str(r["workers"]))
    if r["gl_renderers"]:
        table.add_row("GL renderer (workers' X displays)", ", ".join(r["gl_renderers"]))
    table.add_row("RSS main process", f"{r['rss_main_mb']:.0f} MB")
    table.add_row("RSS per worker (mean / max)", f"{r['rss_worker_mb_mean']:.0f} / {r['rss_worker_mb_max']:.0f} MB")
    table.add_row("shared memory block", f"{r['shm_mb']:.1f} MB" + (" per rank" if r["world_size"] > 1 else ""))
    if r["gpu_memory_mb"] is not None:
        table.add_row("GPU memory (device, all processes)",
                      f"{r['gpu_memory_mb']:.0f} MB, {r['gpu_memory_mb'] / r['num_envs']:.2f} MB per env")
    table.add_row("CPU main / workers", f"{r['cpu_main_cores']:.2f} / {r['cpu_workers_cores']:.2f} cores")
    table.add_row("CPU machine busy", f"{r['cpu_machine_percent']:.0f}%")
    table.add_row(
        "resets / invalid-action ends / restarts", f"{r['resets']} / {r['invalid_actions']} / {r['restarts']}"
    )
    for rank in r.get("ranks", []):
        table.add_row(f"rank {rank['rank']}", f"{rank['sps']:,.0f} env-steps/s, {rank['num_envs']} envs")
    Console().print(table)
    if r["backend"] == "mujoco" and mjwarp.usable_here():
        Console().print(mjwarp.BENCH_HINT)


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


if __name__ == "__main__":
    run_main(main, "python -m rlbench_vec.bench")
