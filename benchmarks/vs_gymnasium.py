"""Core-engine benchmark: rlbench_vec vs gymnasium AsyncVectorEnv on identical RLBench-shaped observations.

Both sides run the synthetic env at zero step cost, so only the vectorisation machinery is measured:
RLBench's default observation (5 cameras at 128x128: rgb, depth, mask; plus low-dim).
gymnasium runs with shared_memory=True, copy=False, context="spawn" (its fastest settings).

    python benchmarks/vs_gymnasium.py --num_envs 8 --steps 2000 --json docs/bench_vs_gymnasium.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import gymnasium as gym
import numpy as np

from rlbench_vec import RLBenchVectorEnv


class EquivalentGymEnv(gym.Env):
    """Produces the same arrays as the synthetic backend: images filled at reset, stamped each step."""

    def __init__(self, observation_space: gym.spaces.Dict, action_size: int):
        self.observation_space = observation_space
        self.action_space = gym.spaces.Box(-np.inf, np.inf, (action_size,), np.float32)
        self.obs = {k: np.zeros(s.shape, s.dtype) for k, s in observation_space.spaces.items()}
        self.steps = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        for key, array in self.obs.items():
            array[...] = self.np_random.integers(0, 256, array.shape) if array.dtype == np.uint8 else self.np_random.random(array.shape)
        self.steps = 0
        return self.obs, {}

    def step(self, action):
        self.steps += 1
        for key, array in self.obs.items():
            if array.ndim >= 2:
                array.reshape(-1)[0] = self.steps % 256
            else:
                array[...] = self.steps * 1e-3
        return self.obs, 0.0, False, False, {}


def make_equivalent(space, action_size):
    return lambda: EquivalentGymEnv(space, action_size)


def time_steps(step, steps: int) -> float:
    step()  # warm-up outside the clock
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return time.perf_counter() - start


def bench_rlbench_vec(num_envs: int, steps: int, chunk: int) -> float:
    with RLBenchVectorEnv(num_envs=num_envs, backend="synthetic", max_chunk=max(chunk, 1)) as env:
        env.reset(seed=0)
        if chunk == 1:
            actions = np.zeros((num_envs, 8), np.float32)
            elapsed = time_steps(lambda: env.step(actions), steps)
            return num_envs * steps / elapsed
        actions = np.zeros((num_envs, chunk, 8), np.float32)
        calls = max(1, steps // chunk)
        elapsed = time_steps(lambda: env.step_chunk(actions), calls)
        return num_envs * calls * chunk / elapsed


def bench_gymnasium(num_envs: int, steps: int) -> float:
    probe = RLBenchVectorEnv(num_envs=1, backend="synthetic")
    space, action_size = probe.single_observation_space, probe.single_action_space.shape[0]
    probe.close()
    env = gym.vector.AsyncVectorEnv(
        [make_equivalent(space, action_size) for _ in range(num_envs)],
        shared_memory=True, copy=False, context="spawn",
    )
    env.reset(seed=0)
    actions = np.zeros((num_envs, action_size), np.float32)
    elapsed = time_steps(lambda: env.step(actions), steps)
    env.close()
    return num_envs * steps / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num_envs", type=int, default=8)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3, help="take the best of this many runs per system")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    best = lambda fn: max(fn() for _ in range(args.repeats))
    gym_sps = best(lambda: bench_gymnasium(args.num_envs, args.steps))
    ours = best(lambda: bench_rlbench_vec(args.num_envs, args.steps, 1))
    ours_k16 = best(lambda: bench_rlbench_vec(args.num_envs, args.steps, 16))
    result = {
        "command": "python " + " ".join(sys.argv),
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus, {platform.python_version()}",
        "num_envs": args.num_envs, "steps": args.steps,
        "gymnasium_async_sps": round(gym_sps), "rlbench_vec_sps": round(ours),
        "rlbench_vec_chunk16_sps": round(ours_k16),
        "ratio": round(ours / gym_sps, 2), "ratio_chunk16": round(ours_k16 / gym_sps, 2),
    }
    for key, value in result.items():
        print(f"{key:>24}: {value}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
