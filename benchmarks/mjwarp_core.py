"""Throughput and GPU memory of the batched MuJoCo Warp core (rlbench_vec.backends.mjwarp) alone.

For each arm mode and world count: one BatchedSimulation of pick_and_lift with the five cameras,
rgb + depth + mask at 128x128 and the default low-dim fields; then timed rounds of step(actions) +
observe(), the observations staying on the GPU as torch tensors. An env-step is one action of one
world plus its observation. Actions: joint_velocity draws joint velocities uniformly in +-1 rad/s;
ik draws end-effector deltas of +-1 cm with the orientation kept (absolute_mode=False); the gripper
stays open. Memory: the device's used memory after building and running the simulation, minus
before, per world.

    python benchmarks/mjwarp_core.py --json docs/mjwarp_core_h100.json
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

from rlbench_vec.cli import ArgumentParser, run_main
from rlbench_vec.config import CAMERAS, EnvConfig

ACTION_SETS = 8  # distinct random action batches, cycled


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


def measure(arm_mode: str, num_worlds: int, rounds: int, device: str, task: str) -> dict:
    from rlbench_vec.backends.mjwarp.simulation import BatchedSimulation

    config = EnvConfig(task=task, backend="mujoco", cameras=CAMERAS, image_size=(128, 128),
                       modalities=("rgb", "depth", "mask"), arm_mode=arm_mode, absolute_mode=False)
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
        "arm_mode": arm_mode, "num_worlds": num_worlds, "rounds": rounds,
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


def main() -> None:
    parser = ArgumentParser(description=__doc__)
    parser.add_argument("--num_worlds", type=int, nargs="+", default=[16, 64, 256, 1024, 4096])
    parser.add_argument("--arm_modes", nargs="+", default=["joint_velocity", "ik"])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--task", default="pick_and_lift")
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
    measure(args.arm_modes[0], 1, 1, args.device, args.task)  # load every kernel first: not counted per world
    for arm_mode in args.arm_modes:
        for num_worlds in args.num_worlds:
            row = measure(arm_mode, num_worlds, args.rounds, args.device, args.task)
            report["results"].append(row)
            print(json.dumps(row), flush=True)
            if args.json:
                with open(args.json, "w") as f:
                    json.dump(report, f, indent=1)
    print(f"{'arm_mode':>15} {'worlds':>6} {'env-steps/s':>12} {'step ms':>8} {'obs ms':>7} {'MB/world':>8}")
    for r in report["results"]:
        print(f"{r['arm_mode']:>15} {r['num_worlds']:>6} {r['env_steps_per_s']:>12,.0f} {r['step_ms']:>8} "
              f"{r['observe_ms']:>7} {r['gpu_memory_mb_per_world']:>8}")


if __name__ == "__main__":
    run_main(main, "python benchmarks/mjwarp_core.py")
