"""Throughput and GPU memory of the batched MuJoCo Warp core (rlbench_vec.backends.mjwarp) alone,
and the ceiling under it: MuJoCo Warp alone on the same scene.

Layer "simulation", for each arm mode and world count: one BatchedSimulation of pick_and_lift with
the cameras (default: the five), modalities (rgb + depth + mask) at the image size (128x128) and the
default low-dim fields; then timed rounds of step(actions) + observe(), the observations staying on
the GPU as torch tensors. An env-step is one action of one world plus its observation. Actions:
joint_velocity draws joint velocities uniformly in +-1 rad/s; ik draws end-effector deltas of +-1 cm
with the orientation kept (absolute_mode=False); the gripper stays open. Memory: the device's used
memory after building and running the simulation, minus before, per world.

Layer "mujoco_warp", per world count: the model, data and render context that BatchedSimulation
builds for that scene (same cameras, modalities, size, contact and constraint slots), driven by
MuJoCo Warp alone, in this process: per env-step the arm's position servos get new setpoints (each
world's start plus uniform +-0.02 rad, one device copy), then one control step of physics (the
substeps a fixed-timing action takes: mujoco_warp.step each) and one render of every camera
(refit_bvh + render), each a captured graph. No controllers, conditions, conversions, low-dim fields
or engine: what any code on MuJoCo Warp pays for this scene. physics_ms and render_ms: device time
per step of all worlds (events, rlbench_vec.backends.mjwarp.profile).

    python benchmarks/mjwarp_core.py --json docs/mjwarp_core_h100.json --layers simulation
    python benchmarks/mjwarp_core.py --layers mujoco_warp --num_worlds 1024 --cameras front --modalities rgb
    python benchmarks/mjwarp_core.py --device cpu --num_worlds 2 --rounds 2 --image_size 16 16  # a smoke check
"""

from __future__ import annotations

import gc
import json
import os
import platform
import sys
import time
from importlib.metadata import version

import numpy as np
import torch

from rlbench_vec.cli import ArgumentParser, positive, run_main
from rlbench_vec.config import ACTION_TIMINGS, CAMERAS, MODALITIES, EnvConfig

ACTION_SETS = 8  # distinct random action batches, cycled
SETPOINT_RANGE = 0.02  # rad: the mujoco_warp layer's servo setpoints around each world's start


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize(torch.device(device))


def used_bytes(device: str) -> int:
    if not device.startswith("cuda"):
        return 0
    free, total = torch.cuda.mem_get_info(torch.device(device))
    return total - free


def random_actions(arm_mode: str, num_worlds: int, size: int, device: str, rng: np.random.Generator) -> torch.Tensor:
    actions = np.zeros((ACTION_SETS, num_worlds, size), np.float32)
    if arm_mode == "joint_velocity":
        actions[..., :7] = rng.uniform(-1.0, 1.0, (ACTION_SETS, num_worlds, 7))
    else:
        actions[..., :3] = rng.uniform(-0.01, 0.01, (ACTION_SETS, num_worlds, 3))
        actions[..., 6] = 1.0  # identity rotation (x, y, z, w)
    actions[..., -1] = 1.0  # gripper open
    return torch.as_tensor(actions, device=device)


def scene(args, arm_mode: str) -> EnvConfig:
    return EnvConfig(task=args.task, backend="mujoco", cameras=tuple(args.cameras), image_size=tuple(args.image_size),
                     modalities=tuple(args.modalities), arm_mode=arm_mode, absolute_mode=False,
                     action_timing=args.action_timing)


def measure(config: EnvConfig, num_worlds: int, rounds: int, device: str) -> dict:
    from rlbench_vec.backends.mjwarp.simulation import BatchedSimulation

    arm_mode = config.arm_mode
    gc.collect()
    synchronize(device)  # freed memory goes back to the device (mempool release threshold 0)
    before = used_bytes(device)
    start = time.perf_counter()
    sim = BatchedSimulation(config, num_worlds, device)
    sim.reset(seeds=list(range(num_worlds)))
    build_s = time.perf_counter() - start
    actions = random_actions(arm_mode, num_worlds, sim.action_size, device, np.random.default_rng(0))
    for i in range(3):  # warm-up
        sim.step(actions[i % ACTION_SETS])
        sim.observe()
    synchronize(device)
    used = used_bytes(device) - before

    control_steps, faults = [], 0
    step_s = observe_s = 0.0
    for i in range(rounds):
        t0 = time.perf_counter()
        result = sim.step(actions[i % ACTION_SETS])
        synchronize(device)
        t1 = time.perf_counter()
        observations = sim.observe()
        synchronize(device)
        t2 = time.perf_counter()
        step_s, observe_s = step_s + t1 - t0, observe_s + t2 - t1
        control_steps.append(result.control_steps.max().item())
        faults += int((result.fault != 0).sum().item())
    # The same rounds without synchronising between step and observe: the throughput figure.
    synchronize(device)
    t0 = time.perf_counter()
    for i in range(rounds):
        sim.step(actions[i % ACTION_SETS])
        observations = sim.observe()
    synchronize(device)
    total_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    host = {key: tensor.cpu() for key, tensor in observations.items()}
    host_copy_s = time.perf_counter() - t0
    row = {
        "layer": "simulation", "arm_mode": arm_mode, "num_worlds": num_worlds, "rounds": rounds,
        "env_steps_per_s": round(num_worlds * rounds / total_s, 1),
        "step_ms": round(step_s / rounds * 1e3, 2), "observe_ms": round(observe_s / rounds * 1e3, 2),
        "control_steps_per_action_max_mean": round(float(np.mean(control_steps)), 2),
        "faults": faults, "build_s": round(build_s, 1),
        "gpu_memory_bytes": used, "gpu_memory_mb_per_world": round(used / num_worlds / 2**20, 3),
        "observation_bytes_per_world": int(sum(t.numel() * t.element_size() for t in host.values()) / num_worlds),
        "copy_observations_to_host_ms": round(host_copy_s * 1e3, 1),
    }
    sim.close()
    del sim, observations, host, result
    return row


def measure_mujoco_warp(config: EnvConfig, num_worlds: int, rounds: int, device: str) -> dict:
    """The ceiling: this scene's physics and render with MuJoCo Warp alone (module docstring)."""
    import mujoco_warp as mjw
    import warp as wp

    from rlbench_vec.backends.mjwarp.profile import PhaseTimer
    from rlbench_vec.backends.mjwarp.simulation import BatchedSimulation

    sim = BatchedSimulation(config, num_worlds, device)  # builds the scene's model, data and render context
    sim.reset(seeds=list(range(num_worlds)))
    sim.observe()  # the episode starts on the device
    m, d, rc, stream = sim.m, sim.d, sim.observer.context, sim.stream
    rng = np.random.default_rng(0)
    setpoints = np.repeat(d.ctrl.numpy()[None], ACTION_SETS, axis=0)
    servos = sim.arm.position_actuators.numpy()
    setpoints[..., servos] += rng.uniform(-SETPOINT_RANGE, SETPOINT_RANGE, (ACTION_SETS, num_worlds, len(servos)))
    controls = [wp.array(batch, dtype=wp.float32, device=sim.device) for batch in setpoints]

    def physics() -> None:
        for _ in range(sim.substeps):
            mjw.step(m, d)

    def render() -> None:
        if rc is not None:
            mjw.refit_bvh(m, d, rc)
            mjw.render(m, d, rc)

    graphs = {}
    for name, launches in (("physics", physics), ("render", render)):
        launches()  # kernels loaded before capture
        with wp.ScopedCapture(device=sim.device, stream=stream, force_module_load=False) as capture:
            launches()
        graphs[name] = capture.graph
    timer = PhaseTimer(sim.device)

    def env_step(i: int) -> None:
        wp.copy(d.ctrl, controls[i % ACTION_SETS], stream=stream)
        for name, graph in graphs.items():
            with timer.on_stream(name, stream):
                wp.capture_launch(graph, stream=stream)

    for i in range(3):  # warm-up
        env_step(i)
    wp.synchronize_device(sim.device)
    timer.take()
    start = time.perf_counter()
    for i in range(rounds):
        env_step(i)
    wp.synchronize_device(sim.device)
    total_s = time.perf_counter() - start
    phases = timer.take()
    row = {
        "layer": "mujoco_warp", "num_worlds": num_worlds, "rounds": rounds, "substeps": sim.substeps,
        "cameras": list(config.cameras), "modalities": list(config.modalities),
        "env_steps_per_s": round(num_worlds * rounds / total_s, 1),
        "physics_ms": round(phases["physics"] / rounds * 1e3, 3),
        "render_ms": round(phases["render"] / rounds * 1e3, 3),
        "nan_worlds": int(np.isnan(d.qpos.numpy()).any(axis=1).sum()),
    }
    sim.close()  # the rest goes with this frame
    return row


def main() -> None:
    parser = ArgumentParser(description=__doc__)
    parser.add_argument("--num_worlds", type=int, nargs="+", default=[16, 64, 256, 1024, 4096])
    parser.add_argument("--arm_modes", nargs="+", default=["joint_velocity", "ik"])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--task", default="pick_and_lift")
    parser.add_argument("--layers", nargs="+", default=["simulation"], choices=("simulation", "mujoco_warp"))
    parser.add_argument("--cameras", nargs="+", default=list(CAMERAS), choices=CAMERAS)
    parser.add_argument("--modalities", nargs="+", default=["rgb", "depth", "mask"], choices=MODALITIES)
    parser.add_argument("--image_size", type=positive, nargs=2, default=[128, 128], metavar=("WIDTH", "HEIGHT"))
    parser.add_argument("--action_timing", default="rlbench", choices=ACTION_TIMINGS,
                        help="the simulation layer's (joint_velocity: one control step either way)")
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--json", default=None, help="write the results here")
    args = parser.parse_args()
    import warp as wp

    wp.init()
    if args.device.startswith("cuda"):
        wp.set_mempool_release_threshold(args.device, 0)  # freed worlds go back to the device between sizes
    report = {
        "command": "python " + " ".join(sys.argv),
        "what": __doc__.split("\n\n")[1].replace("\n", " "),
        "device": torch.cuda.get_device_name(0) if args.device.startswith("cuda") else platform.processor(),
        "machine": platform.platform(), "cpu_count": os.cpu_count(),
        "versions": {name: version(name) for name in ("warp-lang", "mujoco-warp", "mujoco", "torch")},
        "results": [],
    }
    measure(scene(args, args.arm_modes[0]), 1, 1, args.device)  # load every kernel first: not counted per world
    runs = [(measure_mujoco_warp, scene(args, "joint_velocity"), n) for n in args.num_worlds
            if "mujoco_warp" in args.layers]
    runs += [(measure, scene(args, arm_mode), n) for arm_mode in args.arm_modes for n in args.num_worlds
             if "simulation" in args.layers]
    for run, config, num_worlds in runs:
        row = run(config, num_worlds, args.rounds, args.device)
        report["results"].append(row)
        print(json.dumps(row), flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(report, f, indent=1)
    print(f"{'layer':>11} {'arm_mode':>15} {'worlds':>6} {'env-steps/s':>12} {'step/physics ms':>15} "
          f"{'obs/render ms':>13}")
    for r in report["results"]:
        step, observe = (r["step_ms"], r["observe_ms"]) if "step_ms" in r else (r["physics_ms"], r["render_ms"])
        print(f"{r['layer']:>11} {r.get('arm_mode', '-'):>15} {r['num_worlds']:>6} {r['env_steps_per_s']:>12,.0f} "
              f"{step:>15} {observe:>13}")


if __name__ == "__main__":
    run_main(main, "python benchmarks/mjwarp_core.py")
