"""Action timing on the batched GPU backend: each world on its own clock, fixed timing, partial completion.

Every configuration is pick_and_lift with the five cameras, rgb + depth + mask at 128x128 and the
default low-dim fields (the bench's). Parts (--parts; results merge into one JSON, rewritten after each):

  fingers  a close command under both timings, backend="mujoco" and "mjwarp" (any device): the finger
           opening after each env-step and when it was in simulated time (--plot draws it)
  engine   `python -m rlbench_vec.bench --backend mjwarp --as_torch --device cuda` with the bench's actions
           (the gripper switches with probability 0.05 per env and step): action_timing fixed and rlbench
           (sync step, and --async --min_envs N/2) at 1024 and 4096 envs, joint_velocity and ik
  group    partial completion one level down, in this process: MjwarpGroup.start/advance(min_done=N/2)
           against start/advance(None) (sync), the observations of the returned worlds written into
           CUDA pages as a worker does; the engine does not drive start/advance yet
  clock    on the GPU: whether a world's trajectory stays bit-for-bit its own when the other worlds
           act differently, with MuJoCo Warp's deterministic mode off and on, and what that mode costs
  close    a bench run's stderr (workers included) checked for torch's CUDA IPC producer warning

    python benchmarks/mjwarp_timing.py --parts fingers --json docs/mjwarp_timing_fingers.json --device cpu
    python benchmarks/mjwarp_timing.py --plot docs/mjwarp_timing_fingers.json --png docs/mjwarp_timing_fingers.png
    python benchmarks/mjwarp_timing.py --parts close clock group engine --json docs/mjwarp_timing_h100.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import replace

import numpy as np

from rlbench_vec.config import CAMERAS, EnvConfig

BENCH = ["--backend", "mjwarp", "--task", "pick_and_lift", "--as_torch", "--device", "cuda", "--quiet"]
CAMERA_CONFIG = {"task": "pick_and_lift", "cameras": CAMERAS, "image_size": (128, 128),
                 "modalities": ("rgb", "depth", "mask")}
SWITCH = 0.05  # the bench's gripper switch probability


class Report:
    def __init__(self, path: str | None):
        self.path, self.data = path, {"command": "python " + " ".join(sys.argv)}
        if path and os.path.exists(path):
            with open(path) as f:
                self.data.update({k: v for k, v in json.load(f).items() if k != "command"})

    def add(self, part: str, value) -> None:
        self.data[part] = value
        print(part, json.dumps(value)[:2000], flush=True)
        if self.path:
            with open(self.path, "w") as f:
                json.dump(self.data, f, indent=1)


def fingers(device: str, steps: int = 16) -> dict:
    """Finger opening after each env-step of a close command (joint 2 moving at 0.2 rad/s meanwhile)."""
    from rlbench_vec.backends.mujoco.backend import choose_variation, task_class, use_renderer

    base = EnvConfig(task="pick_and_lift", backend="mujoco", arm_mode="joint_velocity", cameras=(),
                     modalities=()).validated()
    use_renderer(base)
    from rlbench_vec.backends.mjwarp.simulation import BatchedSimulation
    from rlbench_vec.backends.mujoco.robot import CONTROL_DT
    from rlbench_vec.backends.mujoco.simulation import Simulation

    close = np.array([0, 0.2, 0, 0, 0, 0, 0, 0], np.float32)
    out = {}
    for timing in ("rlbench", "fixed"):
        cfg = replace(base, action_timing=timing)
        host = Simulation(cfg)
        rng = np.random.default_rng(3)
        host.reset(choose_variation(task_class(cfg), cfg, None, rng), rng)
        sim = BatchedSimulation(cfg, 1, device)
        sim.reset(seeds=[3])
        adr = host.panda.finger_qpos_adr
        rows = {"mujoco": [float(host.panda.finger_qpos.mean())], "mjwarp": [float(host.panda.finger_qpos.mean())],
                "seconds": [0.0], "gripper_moving": [False]}
        for _ in range(steps):
            info = host.act(close).info
            result = sim.step(close[None])
            rows["mujoco"].append(float(host.panda.finger_qpos.mean()))
            rows["mjwarp"].append(float(sim.d.qpos.numpy()[0, adr].mean()))
            rows["seconds"].append(round(rows["seconds"][-1] + int(result.control_steps[0]) * CONTROL_DT, 3))
            rows["gripper_moving"].append(bool(info.get("gripper_moving", False)))
        out[timing] = rows
        sim.close()
    return out


def bench_runs(sizes: list[int], out_dir: str) -> list[dict]:
    """The bench in subprocesses (a fresh worker each), its JSON kept."""
    runs = []
    for arm_mode in ("joint_velocity", "ik"):
        for n in sizes if arm_mode == "joint_velocity" else sizes[:1]:
            settings = [("fixed", []), ("rlbench", []), ("rlbench", ["--async", "--min_envs", str(n // 2)])]
            for timing, extra in settings:
                steps = {"fixed": 60, "rlbench": 20}[timing] if n <= 1024 else {"fixed": 30, "rlbench": 8}[timing]
                path = os.path.join(out_dir, f"bench_{arm_mode}_{n}_{timing}{'_async' if extra else ''}.json")
                argv = [*BENCH, "--num_envs", str(n), "--arm_mode", arm_mode, "--action_timing", timing,
                        "--steps", str(steps), *extra, "--json", path]
                subprocess.run([sys.executable, "-m", "rlbench_vec.bench", *argv], check=True, timeout=300)
                with open(path) as f:
                    result = json.load(f)
                runs.append({key: result[key] for key in ("command", "num_envs", "arm_mode", "action_timing", "async",
                                                          "min_envs", "sps", "env_steps", "elapsed_s", "exec_ms",
                                                          "ipc_ms", "gpu_memory_mb", "invalid_actions")})
                print(f"{arm_mode} {n} {timing}{' async' if extra else ''}: {result['sps']:,.0f} env-steps/s",
                      flush=True)
    return runs


def actions_for(sim, gripper: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The bench's kind of actions (small joint velocities or 1 cm pose deltas), gripper switching."""
    a = np.zeros((sim.num_worlds, sim.action_size), np.float32)
    if sim.config.arm_mode == "ik":
        a[:, :3] = rng.normal(0, 0.01, (sim.num_worlds, 3))
        a[:, 6] = 1.0
    else:
        a[:, :7] = rng.normal(0, 0.05, (sim.num_worlds, 7))
    gripper ^= rng.random(sim.num_worlds) < SWITCH
    a[:, -1] = gripper
    return a


def group_partial(n: int, arm_mode: str, rounds: int) -> list[dict]:
    """Env-steps/s of MjwarpGroup driven as a worker would: sync (advance(None)) and partial
    (advance(n // 2), the returned worlds restarted at once), observations written into CUDA pages."""
    import torch

    from rlbench_vec.backends.mjwarp.group import MjwarpGroup
    from rlbench_vec.spec import observation_spec

    cfg = EnvConfig(**CAMERA_CONFIG, backend="mjwarp", arm_mode=arm_mode, absolute_mode=False).validated()
    group = MjwarpGroup(cfg, range(n))
    spec = observation_spec(cfg)
    pages = group.device_pages(spec, n, 1, False) or [  # warp's CPU device: host pages, as the shared block
        {"obs": {key: np.zeros((n, *s.shape), s.dtype) for key, s in spec.items()}} for _ in range(2)]
    synchronize = torch.cuda.synchronize if group.device.type == "cuda" else lambda: None
    rows = []
    for min_done in (None, n // 2):
        group.reset(np.arange(n), list(range(n)), [None] * n)
        rng, gripper = np.random.default_rng(0), np.ones(n, bool)
        group.start(np.arange(n), actions_for(group.sim, gripper, rng))
        done, _ = group.advance(min_done)  # warm-up
        synchronize()
        start, steps, control = time.perf_counter(), 0, 0
        for r in range(rounds):
            group.observe(done, pages[r % 2]["obs"], np.arange(len(done)))
            steps += len(done)
            group.start(done, actions_for(group.sim, gripper, rng)[done])
            done, _ = group.advance(min_done)
            control += int(group.sim.output.control_steps.max())
        elapsed = time.perf_counter() - start
        rows.append({"num_envs": n, "arm_mode": arm_mode, "min_done": min_done, "rounds": rounds,
                     "env_steps": steps, "env_steps_per_s": round(steps / elapsed), "seconds": round(elapsed, 2)})
        print(rows[-1], flush=True)
    group.close()
    return rows


def clock(n: int, steps: int, device: str) -> dict:
    """Worlds 1..n-1 act the same in two runs; world 0 holds still in one and acts in the other."""
    import torch

    from rlbench_vec.backends.mjwarp.simulation import BatchedSimulation

    cfg = EnvConfig(**CAMERA_CONFIG, backend="mujoco", arm_mode="joint_velocity").validated()
    out = {}
    for deterministic in (False, True):
        sim = BatchedSimulation(cfg, n, device, deterministic=deterministic)
        states = []
        for busy in (False, True, False):
            sim.reset(seeds=list(range(n)))
            rng, gripper = np.random.default_rng(1), np.ones(n, bool)
            for _ in range(steps):
                a = actions_for(sim, gripper, rng)
                if not busy:
                    a[0, :7], a[0, -1] = 0.0, 1.0
                sim.step(a)
            states.append(np.concatenate([sim.d.qpos.numpy()[1:], sim.d.qvel.numpy()[1:]], axis=1))
        synchronize = torch.cuda.synchronize if device.startswith("cuda") else lambda: None
        synchronize()
        hold = np.zeros((n, sim.action_size), np.float32)
        hold[:, -1] = 1.0
        start = time.perf_counter()
        for _ in range(20):
            sim.step(hold)
            sim.observe()
        synchronize()
        out[f"deterministic={deterministic}"] = {
            "same_run_twice_bit_identical": bool(np.array_equal(states[0], states[2])),
            "other_worlds_bit_identical": bool(np.array_equal(states[0], states[1])),
            "other_worlds_max_abs_diff": float(np.abs(states[0] - states[1]).max()),
            "env_steps_per_s_joint_velocity_held": round(20 * n / (time.perf_counter() - start))}
        sim.close()
    return {"num_worlds": n, "steps": steps, **out}


def close_check(out_dir: str) -> dict:
    path = os.path.join(out_dir, "close_check.json")
    done = subprocess.run([sys.executable, "-m", "rlbench_vec.bench", *BENCH, "--num_envs", "64", "--steps", "5",
                           "--json", path], capture_output=True, text=True, timeout=300)
    return {"command": "python -m rlbench_vec.bench " + " ".join(BENCH) + " --num_envs 64 --steps 5",
            "returncode": done.returncode, "producer_warning": "Producer process" in done.stderr,
            "stderr_tail": done.stderr[-600:]}


def plot(path: str, png: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with open(path) as f:
        data = json.load(f)["fingers"]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for timing, color in (("rlbench", "C0"), ("fixed", "C1")):
        rows = data[timing]
        mm = lambda values: [1000 * v for v in values]  # noqa: E731
        for ax, x, line in ((axes[0], range(len(rows["seconds"])), "-"), (axes[1], rows["seconds"], ":")):
            ax.plot(x, mm(rows["mujoco"]), "o" + line, color=color, label=f'action_timing="{timing}", mujoco')
            ax.plot(x, mm(rows["mjwarp"]), "x", color=color, ms=8, label=f'action_timing="{timing}", mjwarp')
    axes[0].set(xlabel="env-step (what the policy sees)", ylabel="finger opening (mm, each finger)",
                title="a close command, repeated every step")
    axes[1].set(xlabel="simulated seconds", title="the same observations in simulated time")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(png, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", nargs="+", default=[], choices=("fingers", "engine", "group", "clock", "close"))
    parser.add_argument("--num_envs", type=int, nargs="+", default=[1024, 4096], help="engine sizes")
    parser.add_argument("--device", default="cuda:0", help="the mjwarp device (fingers, clock)")
    parser.add_argument("--group_envs", type=int, default=1024)
    parser.add_argument("--clock_worlds", type=int, default=256)
    parser.add_argument("--json", default=None)
    parser.add_argument("--out_dir", default=os.environ.get("OUT", "."), help="the bench runs' own JSON files")
    parser.add_argument("--plot", default=None, metavar="JSON")
    parser.add_argument("--png", default=None)
    args = parser.parse_args()
    if args.plot:
        plot(args.plot, args.png)
        return
    report = Report(args.json)
    for part in args.parts:
        if part == "fingers":
            report.add("fingers", fingers(args.device))
        elif part == "close":
            report.add("close", close_check(args.out_dir))
        elif part == "clock":
            report.add("clock", clock(args.clock_worlds, 12, args.device))
        elif part == "group":
            n = args.group_envs
            report.add("group", group_partial(n, "joint_velocity", 30) + group_partial(n, "ik", 15))
        elif part == "engine":
            report.add("engine", bench_runs(args.num_envs, args.out_dir))


if __name__ == "__main__":
    main()
