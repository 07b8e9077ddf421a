"""Host cost of arm_mode="planning" on mujoco per keyframe, on one core: pick_and_lift's block between two keyframes
at its height, the second keyframe acted with collision checking (the straight path collides: planned around the
block, RRTConnect or a plain joint move) and with ignore_collisions (straight, unchecked); and a free keyframe above
the table, checked. Prints per kind the mean and 95th percentile of the time choosing the path (IK, checks, planner;
not the physics that executes it), in ms.

    taskset -c 0 nice python benchmarks/planning_cost.py --episodes 30
"""

from __future__ import annotations

import json
import os
import platform
import sys

import numpy as np

from rlbench_vec.backends.mujoco import BACKEND
from rlbench_vec.cli import ArgumentParser, run_main
from rlbench_vec.config import EnvConfig

SIDE = np.array([0.0, 0.12, 0.0])


def main() -> None:
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=30)
    args = parser.parse_args()
    config = EnvConfig(task="pick_and_lift", backend="mujoco", arm_mode="planning", ignore_collisions_flag=True,
                       cameras=(), modalities=(), backend_options={"variation": "random"}).validated()
    backend = BACKEND(config, 0)
    costs: dict[str, list[float]] = {}
    try:
        for seed in range(args.episodes):
            for kind, ignore in (("blocked, checked", 0.0), ("blocked, ignore_collisions", 1.0)):
                backend.reset(seed, None)
                block = backend.sim.world.position("block").copy()
                quat = backend.sim.panda.tcp_pose()[1]
                for target, flag, label in ((block + [0, 0, 0.2], 0.0, "free, checked"), (block - SIDE, 1.0, None),
                                            (block + SIDE, ignore, kind)):
                    action = backend.sim.executor.pose_action(target, quat, 1.0, bool(flag))
                    plans = {how: list(s) for how, s in backend.sim.executor.planning_s.items()}
                    backend.step(action)
                    if label is not None:
                        executor = backend.sim.executor
                        new = {how: s[len(plans.get(how, [])):] for how, s in executor.planning_s.items()}
                        how = next(how for how, s in new.items() if s)
                        costs.setdefault(f"{label} ({how})", []).append(1000 * new[how][0])
    finally:
        backend.close()
    report = {kind: {"count": len(v), "mean_ms": round(float(np.mean(v)), 1),
                     "p95_ms": round(float(np.percentile(v, 95)), 1)} for kind, v in sorted(costs.items())}
    print(json.dumps({"costs": report, "command": " ".join(["python", *sys.argv]),
                      "machine": f"{platform.node()}, {os.cpu_count()} cores (shared)",
                      "cpu_affinity": sorted(os.sched_getaffinity(0))}, indent=1))


if __name__ == "__main__":
    run_main(main, "python benchmarks/planning_cost.py")
