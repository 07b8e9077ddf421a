"""How many of `env.action_space.sample()`'s actions end as invalid, per arm mode, on the MuJoCo backend.

Two envs of one worker, no cameras, RLBench's action timing; every sample is stepped, and an invalid one
ends its env's episode (an autoreset follows). Prints one line per mode: the invalid count of all samples
and the first reasons.

    python benchmarks/random_actions.py --samples 1000 --modes ik:absolute ik:delta
"""

from __future__ import annotations

import numpy as np

from rlbench_vec import RLBenchVectorEnv
from rlbench_vec.cli import ArgumentParser, positive, run_main

MODES = ("ik:absolute", "ik:delta", "planning:absolute", "planning:delta", "joint_velocity:delta",
         "joint_position:absolute", "joint_position:delta")


def invalid_samples(arm_mode: str, absolute: bool, samples: int, task: str, seed: int) -> list[str]:
    """The error of each sample that ended as an invalid action."""
    errors: list[str] = []
    with RLBenchVectorEnv(num_envs=2, envs_per_worker=2, task=task, backend="mujoco", cameras=(),
                          arm_mode=arm_mode, absolute_mode=absolute, seed=seed) as env:
        env.reset(seed=seed)
        env.action_space.seed(seed)
        for _ in range(samples // 2):
            *_, info = env.step(env.action_space.sample())
            errors += [str(info["error"][i]) for i in np.flatnonzero(info.get("_invalid_action", ()))]
    return errors


def main() -> None:
    parser = ArgumentParser("python benchmarks/random_actions.py", description=__doc__)
    parser.add_argument("--samples", type=positive, default=1000, help="per mode (two envs step half each)")
    parser.add_argument("--modes", nargs="+", default=["ik:absolute"], choices=MODES)
    parser.add_argument("--task", default="reach_target")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    for mode in args.modes:
        arm_mode, kind = mode.split(":")
        errors = invalid_samples(arm_mode, kind == "absolute", args.samples, args.task, args.seed)
        reasons = sorted({error.split(" for ")[0] for error in errors})
        print(f"{mode}: {len(errors)} of {args.samples // 2 * 2} samples invalid {reasons}", flush=True)


if __name__ == "__main__":
    run_main(main, "python benchmarks/random_actions.py")
