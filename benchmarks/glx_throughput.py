"""The mujoco backend's glfw renderer (a GLX client) in per-worker Xvfb, per display mode and env count:
env-steps/s, start-up time, and the OpenGL renderer each worker's display self-test reported.

    python benchmarks/glx_throughput.py --modes xvfb-cpu xvfb-gpu --num_envs 1 4 16 64 --seconds 10 \\
        --json glx_throughput.json --images DIR

Each run is RLBenchVectorEnv(num_envs, backend="mujoco", renderer="glfw", display=mode) with the env
defaults of `python -m rlbench_vec.bench` (reach_target, five cameras at 128x128 with rgb, depth and
mask, ik arm mode, its action sampler): reset(seed=0), 10 warm-up steps, then steps for --seconds;
env-steps/s = envs x steps / seconds. --images saves env 0's first observation per mode
(DIR/<mode>.npz), so renderers can be compared image by image. scripts/glx_gpu_check.sh runs this
on the GPU machine (xvfb-cpu: Mesa's llvmpipe; xvfb-gpu: NVIDIA's GLX library).
"""

from __future__ import annotations

import collections
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from rlbench_vec import RLBenchVectorEnv
from rlbench_vec.cli import ArgumentParser, run_main
from rlbench_vec.cli.bench_actions import ActionSampler

WARMUP_STEPS = 10
MIN_STEPS = 10


def worker_facts(env: RLBenchVectorEnv) -> list[dict[str, Any]]:
    """What each worker reported at start (a property or a method, by engine version; none: nothing)."""
    report = getattr(env, "worker_facts", [])
    return list(report() if callable(report) else report)


def summarize(facts: list[dict[str, Any]]) -> dict[str, Any]:
    count = collections.Counter
    return {
        "renderers": dict(count(f.get("gl_renderer") or f"none: {f.get('gl_error', '?')[:120]}" for f in facts)),
        "gl_modes": dict(count(str(f.get("gl_mode")) for f in facts)),
        "gpus_asked": dict(count(str(f.get("gpu")) for f in facts)),
        "gpus_got": dict(count(str(f.get("gl_gpu")) for f in facts)),
        "fallbacks": sorted({f["gl_fallback"] for f in facts if f.get("gl_fallback")}),
        "worker_pids": [f.get("pid") for f in facts],
    }


def run(mode: str, num_envs: int, seconds: float, images: Path | None = None,
        during: Callable[[RLBenchVectorEnv], Any] | None = None) -> dict[str, Any]:
    """One measurement; `during(env)`, if given, is called once mid-way and its result kept."""
    start = time.perf_counter()
    env = RLBenchVectorEnv(num_envs=num_envs, backend="mujoco", renderer="glfw", display=mode)
    try:
        started = time.perf_counter() - start
        obs, _ = env.reset(seed=0)
        if images is not None:
            images.mkdir(parents=True, exist_ok=True)
            np.savez_compressed(images / f"{mode}.npz", **{k: np.array(v[0]) for k, v in obs.items()
                                                           if k.endswith(("_rgb", "_depth", "_mask"))})
        sample = ActionSampler(env, 1, seed=0)
        for _ in range(WARMUP_STEPS):
            obs = env.step(sample(obs)[:, 0])[0]
        steps, observed, paused, begin = 0, None, 0.0, time.perf_counter()
        while steps < MIN_STEPS or time.perf_counter() - begin - paused < seconds:
            obs = env.step(sample(obs)[:, 0])[0]
            steps += 1
            if during is not None and observed is None and time.perf_counter() - begin > seconds / 2:
                pause = time.perf_counter()
                observed = during(env)
                paused = time.perf_counter() - pause  # not stepping meanwhile: not timed
        elapsed = time.perf_counter() - begin - paused
        facts = worker_facts(env)
    finally:
        env.close()
    return {"mode": mode, "num_envs": num_envs, "start_s": round(started, 2), "steps": steps,
            "seconds": round(elapsed, 2), "env_steps_per_s": round(num_envs * steps / elapsed, 1),
            **summarize(facts), "during": observed}


def main() -> None:
    parser = ArgumentParser(description=__doc__)
    parser.add_argument("--modes", nargs="+", default=["xvfb-cpu", "xvfb-gpu"])
    parser.add_argument("--num_envs", type=int, nargs="+", default=[1, 4, 16, 64])
    parser.add_argument("--seconds", type=float, default=10.0, help="timed stepping per run")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--images", type=Path, default=None, help="save env 0's first observation per mode here")
    args = parser.parse_args()
    results = []
    for num_envs in args.num_envs:
        for mode in args.modes:
            result = run(mode, num_envs, args.seconds, args.images if num_envs == args.num_envs[0] else None)
            results.append(result)
            print(f"{mode:9s} {num_envs:3d} envs: {result['env_steps_per_s']:7.1f} env-steps/s "
                  f"(start {result['start_s']} s) renderers {result['renderers']}", flush=True)
            if args.json is not None:
                args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    run_main(main, "python benchmarks/glx_throughput.py")
