"""Throughput of the embedded MuJoCo backend through RLBenchVectorEnv: per-env steps/s with five
cameras at 128x128 (rgb + depth + mask), for each --num_envs and --arm_modes. Prints a table and saves
JSON (with the exact command) to --json.

    python scripts/bench_mujoco.py                          # 1 and 8 envs -> docs/mujoco_bench_cpu.json
    python scripts/bench_mujoco.py --renderer egl --num_envs 1 16   # on a GPU machine -> docs/mujoco_bench_gpu.json
    python scripts/bench_mujoco.py --render_only             # only the rendering comparison

Actions: joint_velocity draws random velocities (one 0.05 s control step each, RLBench's JointVelocity);
ik draws 1 cm random end-effector deltas (each moves until the IK target is reached, as RLBench's
EndEffectorPoseViaIK). Episodes are truncated at --max_episode_steps and auto-reset by the engine; the
reset time is included.

First, in this process, the CPU time of one observation's rendering (5 cameras, rgb + depth + mask)
by this backend's renderer and by mujoco.Renderer with MuJoCo's default visual settings (three
renders per camera), on each task's scene; --render_only stops there.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import shlex
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import psutil

from rlbench_vec import RLBenchVectorEnv
from rlbench_vec.backends.mujoco.backend import resolve_renderer
from rlbench_vec.cli import ArgumentParser, run_main
from rlbench_vec.config import CAMERAS, EnvConfig

JOINT_SPEED = 0.5  # rad/s, uniform in +-
IK_STEP = 0.01  # metres, normal per axis


def sample_actions(rng: np.random.Generator, arm_mode: str, num_envs: int) -> np.ndarray:
    actions = np.zeros((num_envs, 8), np.float32)
    if arm_mode == "joint_velocity":
        actions[:, :7] = rng.uniform(-JOINT_SPEED, JOINT_SPEED, (num_envs, 7))
    else:  # ik, delta: a small translation, no rotation (quaternion xyzw = identity)
        actions[:, :3] = rng.normal(0.0, IK_STEP, (num_envs, 3))
        actions[:, 6] = 1.0
    actions[:, 7] = 1.0  # gripper stays open
    return actions


def bench(args: argparse.Namespace, num_envs: int, arm_mode: str) -> dict:
    env = RLBenchVectorEnv(
        num_envs=num_envs, task=args.task, backend="mujoco", cameras=CAMERAS, image_size=tuple(args.image_size),
        modalities=("rgb", "depth", "mask"), arm_mode=arm_mode, absolute_mode=arm_mode == "joint_velocity",
        renderer=args.renderer, max_episode_steps=args.max_episode_steps, seed=0,
    )
    try:
        rng = np.random.default_rng(0)
        env.reset(seed=0)
        for _ in range(args.warmup):
            env.step(sample_actions(rng, arm_mode, num_envs))
        workers = [psutil.Process(pid) for pid in env.worker_pids]
        cpu_before = sum(worker_cpu_seconds(p) for p in workers)
        start = time.perf_counter()
        for _ in range(args.steps):
            env.step(sample_actions(rng, arm_mode, num_envs))
        elapsed = time.perf_counter() - start
        cpu = sum(worker_cpu_seconds(p) for p in workers) - cpu_before
    finally:
        env.close()
    return {
        "num_envs": num_envs, "arm_mode": arm_mode, "steps_per_env": args.steps, "seconds": round(elapsed, 3),
        "per_env_steps_per_s": round(args.steps / elapsed, 1),
        "total_steps_per_s": round(num_envs * args.steps / elapsed, 1),
        # Less sensitive to other processes on the machine than the wall-clock figures.
        "worker_cpu_ms_per_step": round(1000 * cpu / (num_envs * args.steps), 2),
    }


def worker_cpu_seconds(process: psutil.Process) -> float:
    """User + system time of a worker and its threads (llvmpipe renders on threads of its own)."""
    times = process.cpu_times()
    return times.user + times.system


def render_all_cameras(renderer, data) -> None:
    """What mujoco.Renderer at its defaults does for one RLBench observation: rgb, depth, mask per camera."""
    for camera in CAMERAS:
        renderer.update_scene(data, camera)
        renderer.render()
        renderer.enable_depth_rendering()
        renderer.render()
        renderer.enable_segmentation_rendering()
        renderer.render()
        renderer.disable_segmentation_rendering()


def render_only(args: argparse.Namespace, repeats: int = 20) -> dict:
    """CPU ms per observation: this backend's renderer vs mujoco.Renderer with MuJoCo's default
    visual quality (shadows, 4x multisampling, fine tessellation), on each task's scene."""
    from rlbench_vec.backends.mujoco.backend import use_renderer

    config = EnvConfig(backend="mujoco", renderer=args.renderer, image_size=tuple(args.image_size),
                       low_dim=()).validated()
    use_renderer(config)
    import mujoco

    from rlbench_vec.backends.mujoco.simulation import Simulation
    from rlbench_vec.spec import observation_spec

    def cpu_ms(render) -> float:
        render()
        start = time.process_time()
        for _ in range(repeats):
            render()
        return round(1000 * (time.process_time() - start) / repeats, 2)

    timings = {}
    for task in ("reach_target", "pick_and_lift", "open_drawer"):
        task_config = replace(config, task=task)
        sim = Simulation(task_config)
        sim.reset(0, np.random.default_rng(0))
        out = {key: np.empty(spec.shape, spec.dtype) for key, spec in observation_spec(task_config).items()}
        ours = cpu_ms(functools.partial(sim.write_observation, out))
        defaults = mujoco.MjModel.from_xml_string("<mujoco/>").vis.quality
        for name in ("offsamples", "numslices", "numstacks", "numquads", "shadowsize"):
            setattr(sim.model.vis.quality, name, getattr(defaults, name))
        renderer = mujoco.Renderer(sim.model, config.height, config.width)
        default_ms = cpu_ms(functools.partial(render_all_cameras, renderer, sim.data))
        timings[task] = {"this_backend_ms": ours, "mujoco_renderer_defaults_ms": default_ms}
        renderer.close()
        sim.close()
    return timings


def main() -> None:
    parser = ArgumentParser(description=__doc__)
    parser.add_argument("--num_envs", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--arm_modes", nargs="+", default=["joint_velocity", "ik"], choices=["joint_velocity", "ik"])
    parser.add_argument("--renderer", default=None, help="egl, osmesa or glfw (default: the backend's choice)")
    parser.add_argument("--task", default="reach_target")
    parser.add_argument("--image_size", type=int, nargs=2, default=(128, 128), metavar=("WIDTH", "HEIGHT"))
    parser.add_argument("--steps", type=int, default=200, help="timed steps per env")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--max_episode_steps", type=int, default=100)
    parser.add_argument("--render_only", action="store_true", help="only the in-process rendering comparison")
    parser.add_argument("--json", default=None,
                        help="default: docs/mujoco_bench_gpu.json where an NVIDIA GPU is visible, else ..._cpu.json")
    args = parser.parse_args()
    if args.json is None:
        args.json = f"docs/mujoco_bench_{'gpu' if os.path.exists('/dev/nvidia0') else 'cpu'}.json"

    load_before = os.getloadavg()
    render = render_only(args)
    print("CPU ms per observation (5 cameras, rgb+depth+mask), this backend vs mujoco.Renderer defaults:")
    for task, timing in render.items():
        print(f"  {task:>14}: {timing['this_backend_ms']:>6} vs {timing['mujoco_renderer_defaults_ms']:>6}")
    results = []
    if not args.render_only:
        print(f"{'envs':>5} {'arm_mode':>15} {'per-env steps/s':>16} {'total steps/s':>14} {'worker CPU ms/step':>19}")
        for arm_mode in args.arm_modes:
            for num_envs in args.num_envs:
                result = bench(args, num_envs, arm_mode)
                results.append(result)
                print(f"{num_envs:>5} {arm_mode:>15} {result['per_env_steps_per_s']:>16} "
                      f"{result['total_steps_per_s']:>14} {result['worker_cpu_ms_per_step']:>19}")
    report = {
        "command": shlex.join(["python", "scripts/bench_mujoco.py", *sys.argv[1:]]),
        "what": f"{args.task}, 5 cameras {args.image_size[0]}x{args.image_size[1]} rgb+depth+mask, "
                "low-dim defaults, per-env steps/s through RLBenchVectorEnv (one worker process per env)",
        "renderer": resolve_renderer(EnvConfig(backend="mujoco", renderer=args.renderer)),
        "LP_NUM_THREADS": os.environ.get("LP_NUM_THREADS"),
        "cpu_count": os.cpu_count(),
        # Other processes compete for the cores: a high load average means lower figures.
        "load_average_1min_before_after": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
        "machine": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "render_cpu_ms_per_observation": render,
        "results": results,
    }
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    print(f"saved {args.json}")


if __name__ == "__main__":
    run_main(main, "python scripts/bench_mujoco.py")
