"""The embedded MuJoCo backend with env groups: throughput as envs per worker grow, on one GPU (EGL).

One env per worker means one GL context and one frame read-back per env, and those contend for the
GPU; a worker serving a group of envs draws them all with one context into one framebuffer and reads
them back with one call. Five cameras at 128x128, rgb + depth + mask, reach_target, joint_velocity
(random velocities), episodes of --max_episode_steps with autoreset.

    MUJOCO_GL=egl python benchmarks/mujoco_groups.py --tag h100 --num_envs 16 64 --envs_per_worker 1 2 4 8
Writes {out}/mujoco_groups_{tag}.json.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time

import numpy as np

from rlbench_vec import RLBenchVectorEnv
from rlbench_vec.cli import ArgumentParser, run_main


def measure(num_envs: int, per_worker: int, renderer: str, steps: int, max_episode_steps: int) -> dict:
    with RLBenchVectorEnv(num_envs=num_envs, backend="mujoco", renderer=renderer, envs_per_worker=per_worker,
                          arm_mode="joint_velocity", max_episode_steps=max_episode_steps) as env:
        rng = np.random.default_rng(0)
        env.reset(seed=0)
        actions = lambda: np.concatenate([rng.normal(0, 0.3, (num_envs, 7)), np.ones((num_envs, 1))], 1)  # noqa: E731
        bank = [actions().astype(np.float32) for _ in range(16)]
        for i in range(5):  # warm-up: first renders, caches
            env.step(bank[i])
        env.reset_stats()
        start = time.perf_counter()
        for i in range(steps):
            env.step(bank[i % len(bank)])
        elapsed = time.perf_counter() - start
        stats = env.stats()
        executed = float(stats["steps"].sum())
        per_step = {key: 1000 * float(stats[key].sum()) / executed for key in ("exec_s", "write_s", "ipc_s", "reset_s")}
        return {"num_envs": num_envs, "envs_per_worker": per_worker, "workers": len(env.worker_pids),
                "env_steps_per_s": round(executed / elapsed, 1), "ms_per_env_step": per_step}


def main() -> None:
    parser = ArgumentParser(description=__doc__)
    parser.add_argument("--tag", required=True)
    parser.add_argument("--num_envs", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--envs_per_worker", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--renderer", default=os.environ.get("MUJOCO_GL", "egl"))
    parser.add_argument("--steps", type=int, default=100, help="timed vector steps")
    parser.add_argument("--max_episode_steps", type=int, default=200)
    parser.add_argument("--out", default="docs")
    args = parser.parse_args()
    results = []
    for num_envs in args.num_envs:
        for per_worker in args.envs_per_worker:
            row = measure(num_envs, per_worker, args.renderer, args.steps, args.max_episode_steps)
            results.append(row)
            print(f"{num_envs:4d} envs, {per_worker} per worker ({row['workers']} workers): "
                  f"{row['env_steps_per_s']:8,.0f} env-steps/s  {row['ms_per_env_step']}", flush=True)
    report = {"command": " ".join(["python", *sys.argv]), "renderer": args.renderer, "results": results,
              "machine": {"cpus": os.cpu_count(), "platform": platform.platform()}}
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, f"mujoco_groups_{args.tag}.json")
    with open(path, "w") as file:
        json.dump(report, file, indent=2)
    print(f"wrote {path}")


if __name__ == "__main__":
    run_main(main, "python benchmarks/mujoco_groups.py")
