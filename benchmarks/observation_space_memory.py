"""Host memory of a vector env's batched observation space: gymnasium's batch_space (every bound and bound
mask written out per env) against rlbench_vec.spec.batched_observations (broadcast views), for the bench's
layout (five cameras, rgb + depth + mask, and the default low-dim fields) at several env counts.

    python benchmarks/observation_space_memory.py --num_envs 1024 4096 --json docs/observation_space_memory.json

Each figure is the growth of this process's RSS while the space is built, measured in a fresh child process
so one measurement's freed memory does not hide the next's.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import platform
import shlex
import sys

import psutil

from rlbench_vec.cli import ArgumentParser, positive, run_main

MB = 1 << 20


def grow(kind: str, num_envs: int, size: int, queue) -> None:
    import gymnasium as gym
    import numpy as np
    from gymnasium.vector.utils import batch_space

    from rlbench_vec.config import EnvConfig
    from rlbench_vec.spec import batched_observations, observation_spec

    config = EnvConfig(task="pick_and_lift", backend="mujoco", image_size=(size, size),
                       modalities=("rgb", "depth", "mask")).validated()
    single = gym.spaces.Dict({key: gym.spaces.Box(0, 255, s.shape, np.uint8) if s.dtype == np.uint8 else
                              gym.spaces.Box(-np.inf, np.inf, s.shape, s.dtype)
                              for key, s in observation_spec(config).items()})
    before = psutil.Process().memory_info().rss
    space = batch_space(single, num_envs) if kind == "gymnasium batch_space" else batched_observations(single, num_envs)
    queue.put(((psutil.Process().memory_info().rss - before) / MB, sum(s.shape[0] for s in space.values()) > 0))


def main() -> None:
    parser = ArgumentParser(description=__doc__)
    parser.add_argument("--num_envs", type=positive, nargs="+", default=[1024, 4096])
    parser.add_argument("--image_size", type=positive, default=128, help="square camera images")
    parser.add_argument("--json", default=None, metavar="PATH")
    args = parser.parse_args()
    context = mp.get_context("spawn")
    rows = []
    for num_envs in args.num_envs:
        for kind in ("gymnasium batch_space", "rlbench_vec batched_observations"):
            queue = context.Queue()
            child = context.Process(target=grow, args=(kind, num_envs, args.image_size, queue))
            child.start()
            grown_mb, _ = queue.get()
            child.join()
            rows.append({"num_envs": num_envs, "space": kind, "rss_growth_mb": round(grown_mb, 1)})
            print(f"{num_envs:>6} envs  {kind:<34} {grown_mb:>9.1f} MB")
    if args.json:
        with open(args.json, "w") as file:
            json.dump({"command": shlex.join(["python", *sys.argv]), "host": platform.node(),
                       "cpus": psutil.cpu_count(), "image_size": args.image_size, "rows": rows}, file, indent=2)


if __name__ == "__main__":
    run_main(main, "python benchmarks/observation_space_memory.py")
