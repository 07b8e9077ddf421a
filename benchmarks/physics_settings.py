"""Evidence for a lighter physics step (issue 56, item 3), without changing the package's settings: for each
candidate (timestep, solver iterations, line-search iterations), the mujoco backend's oracle success on seeded
demos of each task, and the physics' time per control step of a BatchedSimulation (mjwarp) of the first task.

A candidate is applied to the scene's MJCF <option> in this process only (Scene.to_xml patched), so the control
step stays CONTROL_DT and its substeps follow the timestep (robot.Panda and BatchedSimulation derive them).
physics_ms: the profile's physics phase per control step of all worlds (fixed timing, holding actions), on the
device given (warp's CPU device measures host code, not a GPU: evidence to rank candidates, not GPU figures).

    python benchmarks/physics_settings.py --tasks pick_and_lift open_drawer --demos 20 --device cpu \\
        --candidates 0.002:100:50 0.005:100:50 0.005:20:10 --json physics_settings.json
"""

from __future__ import annotations

import json
import platform
import sys
import time

import numpy as np

from rlbench_vec.backends.mujoco import BACKEND, scene
from rlbench_vec.backends.mujoco.backend import use_renderer
from rlbench_vec.cli import ArgumentParser, positive, run_main
from rlbench_vec.config import EnvConfig
from rlbench_vec.spec import observation_spec

DEFAULT_OPTION = 'timestep="0.002"'  # what Scene writes (scene.py), replaced by each candidate


def apply(candidate: str) -> None:
    """Make every Scene built from now on use the candidate 'timestep:iterations:ls_iterations'."""
    timestep, iterations, line_search = candidate.split(":")
    original = getattr(scene.Scene, "_original_to_xml", scene.Scene.to_xml)
    scene.Scene._original_to_xml = original  # type: ignore[attr-defined]
    option = f'timestep="{timestep}" iterations="{iterations}" ls_iterations="{line_search}"'
    scene.Scene.to_xml = lambda self: original(self).replace(DEFAULT_OPTION, option, 1)  # type: ignore[method-assign]


def oracle_success(task: str, demos: int) -> float:
    """The share of seeded demos (seeds 0..demos-1, first attempt) the oracle solves on the mujoco backend."""
    config = EnvConfig(task=task, backend="mujoco", cameras=(), low_dim=("gripper_pose",), arm_mode="ik",
                       absolute_mode=True).validated()
    use_renderer(config)
    backend = BACKEND(config, 0)
    try:
        spec = observation_spec(config)
        return float(np.mean([backend.record_demo(seed, spec, None).success for seed in range(demos)]))
    finally:
        backend.close()


def physics_ms(task: str, worlds: int, steps: int, device: str) -> float:
    """The physics phase per control step of `worlds` worlds holding still (fixed timing, joint velocities 0)."""
    from rlbench_vec.backends.mjwarp.simulation import BatchedSimulation

    config = EnvConfig(task=task, backend="mujoco", cameras=(), arm_mode="joint_velocity",
                       action_timing="fixed").validated()
    sim = BatchedSimulation(config, worlds, device, profile=True)
    try:
        sim.reset(seeds=list(range(worlds)))
        hold = np.zeros((worlds, sim.action_size), np.float32)
        hold[:, -1] = 1.0
        sim.step(hold)
        sim.phase_totals()
        for _ in range(steps):
            sim.step(hold)
        return 1000 * sim.phase_totals()["physics"] / steps
    finally:
        sim.close()


def main() -> int:
    parser = ArgumentParser(prog="python benchmarks/physics_settings.py", description=__doc__)
    parser.add_argument("--tasks", nargs="+", default=["pick_and_lift"])
    parser.add_argument("--candidates", nargs="+", default=["0.002:100:50", "0.005:100:50"],
                        help="timestep:iterations:ls_iterations (MuJoCo's defaults: 100 and 50)")
    parser.add_argument("--demos", type=positive, default=20)
    parser.add_argument("--worlds", type=positive, default=8)
    parser.add_argument("--steps", type=positive, default=5, help="control steps timed per candidate")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    rows = []
    for candidate in args.candidates:
        apply(candidate)
        started = time.perf_counter()
        success = {task: oracle_success(task, args.demos) for task in args.tasks}
        row = {"candidate": candidate, "oracle_success": success,
               "physics_ms_per_control_step": physics_ms(args.tasks[0], args.worlds, args.steps, args.device)}
        row["seconds"] = round(time.perf_counter() - started, 1)
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w") as file:
            json.dump({"command": " ".join(sys.argv), "host": platform.node(), "device": args.device,
                       "demos": args.demos, "worlds": args.worlds, "rows": rows}, file, indent=2)
    return 0


if __name__ == "__main__":
    run_main(main, "python benchmarks/physics_settings.py")
