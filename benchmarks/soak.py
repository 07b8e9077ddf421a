"""Soak run: thousands of steps while random workers are SIGKILLed; nothing may leak.

    python benchmarks/soak.py --num_envs 8 --steps 3000 --kill_every 50 --json docs/soak_cpu2.json

Prints steps done, kills survived, restarts, and what outlived close(): processes (workers, Xvfb)
and /dev/shm segments. Both leak counts must be zero; the exit code is 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import time

import numpy as np
import psutil

from rlbench_vec import RLBenchVectorEnv
from rlbench_vec.shm import PREFIX, SHM_DIR


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num_envs", type=int, default=8)
    parser.add_argument("--steps", type=int, default=3000, help="vector steps")
    parser.add_argument("--kill_every", type=int, default=50, help="SIGKILL a random worker every N steps")
    parser.add_argument("--step_cost_s", type=float, default=0.001)
    parser.add_argument("--xvfb", action="store_true", help="give every worker its own Xvfb, like RLBench")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()

    rng = random.Random(args.seed)
    options = {"step_cost_s": args.step_cost_s, "episode_length": 100, "needs_display": args.xvfb}
    env = RLBenchVectorEnv(num_envs=args.num_envs, backend="synthetic", backend_options=options,
                           max_restarts_per_env=10**6, max_restarts_total=10**6)
    shm_name = env.shm_name
    env.reset(seed=args.seed)
    actions = np.zeros(env.action_space.shape, np.float32)
    seen = set()
    kills = flagged = 0
    start = time.perf_counter()
    for step in range(1, args.steps + 1):
        if step % args.kill_every == 0:
            os.kill(env.worker_pids[rng.randrange(args.num_envs)], signal.SIGKILL)
            kills += 1
        *_, info = env.step(actions)
        flagged += int(np.sum(info.get("restarted", 0)))
        seen.update(p.pid for p in psutil.Process().children(recursive=True))
    elapsed = time.perf_counter() - start
    restarts = int(env.stats()["restarts"].sum())
    env.close()
    time.sleep(0.5)
    leaked_processes = [  # Python's resource tracker is the interpreter's, and exits with it
        f"{p.pid} {' '.join(p.cmdline())[:80]}" for p in psutil.Process().children(recursive=True)
        if p.pid in seen and p.status() != psutil.STATUS_ZOMBIE and "resource_tracker" not in " ".join(p.cmdline())
    ]
    leaked_segments = [n for n in os.listdir(SHM_DIR) if n.startswith(f"{PREFIX}_{os.getpid()}_")]
    result = {
        "command": "python " + " ".join(sys.argv), "num_envs": args.num_envs, "steps": args.steps,
        "env_steps": args.steps * args.num_envs, "sps": round(args.steps * args.num_envs / elapsed),
        "kills": kills, "restarts": restarts, "restarted_steps_flagged": flagged,
        "leaked_processes": leaked_processes, "leaked_segments": leaked_segments,
        "shm_segment_unlinked": not os.path.exists(os.path.join(SHM_DIR, shm_name)),
    }
    for key, value in result.items():
        print(f"{key:>24}: {value}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    clean = not leaked_processes and not leaked_segments and kills == restarts == flagged
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
