"""GPU figures of backend="mjwarp" through the engine, beside the in-process core and the mujoco backend.

Every configuration is pick_and_lift with the five cameras, rgb + depth + mask at 128x128 and the
default low-dim fields. Parts (--parts; results merge into one JSON, written after every run):

  core    the in-process core alone (benchmarks/mjwarp_core.py in a subprocess; it compiles the
          kernels on a first run): no worker, no pages, the gripper held open
  check   the engine on the GPU: the observations returned with as_torch=True, device="cuda" are the
          worker's two CUDA pages themselves (the same memory every other step), numpy delivery
          returns the same values, and a worker killed with SIGKILL is replaced with new pages
  engine  `python -m rlbench_vec.bench --backend mjwarp --as_torch --device cuda` at each size:
          joint_velocity with the bench's actions (the gripper switches with probability 0.05 per env
          and step) and with the gripper held (--gripper_switch 0: the core's actions), ik at the two
          largest sizes, and numpy delivery at 1024 (the cost of copying every observation to the host)
  mujoco  `python -m rlbench_vec.bench --backend mujoco --renderer egl` at each size (workers spread
          over the cores), the bench's actions

    python benchmarks/mjwarp_engine.py --parts core check engine mujoco --json docs/mjwarp_vs_mujoco_h100.json
    python benchmarks/mjwarp_engine.py --plot docs/mjwarp_vs_mujoco_h100.json --png docs/mjwarp_vs_mujoco_h100.png

Each bench run goes through bench.main in this process; its exact command is recorded with its result.
"""

from __future__ import annotations

import json
import os
import platform
import signal
import subprocess
import sys
import time
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import numpy as np

from rlbench_vec.cli import ArgumentParser, run_main

SIZES = (16, 64, 256, 1024, 4096)
STEPS = {16: 100, 64: 100, 256: 60, 1024: 40, 4096: 20}  # timed actions per env: ~2-10 s per run
MUJOCO_STEPS = {16: 100, 64: 50, 256: 20, 1024: 8, 4096: 3}  # ~1,300 env-steps/s whatever the size
CONFIG = {"task": "pick_and_lift", "image_size": (128, 128), "modalities": ("rgb", "depth", "mask")}
HERE = os.path.dirname(os.path.abspath(__file__))


def versions() -> dict[str, str | None]:
    out = {}
    for name in ("warp-lang", "mujoco-warp", "mujoco", "torch", "numpy"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


class Report:
    """The JSON file, rewritten after every result so a run cut short keeps what it measured."""

    def __init__(self, path: str):
        self.path = path
        self.data: dict[str, Any] = {}
        if os.path.exists(path):
            with open(path) as file:
                self.data = json.load(file)
        self.data.setdefault("what", __doc__.split("\n\n")[1].replace("\n", " "))
        self.data.setdefault("runs", [])

    def add(self, part: str, row: dict[str, Any]) -> None:
        row = {"part": part, **row}
        print(json.dumps(row), flush=True)
        self.data["runs"].append(row)
        self.save()

    def save(self) -> None:
        with open(self.path, "w") as file:
            json.dump(self.data, file, indent=1)


def bench(report: Report, part: str, argv: list[str], **extra: Any) -> None:
    """One `python -m rlbench_vec.bench` run in this process; a failure is recorded, not raised."""
    from rlbench_vec import bench as bench_module

    started = time.perf_counter()
    try:
        result = bench_module.main(argv)
    except Exception as error:  # one failed size must not lose the others
        result = {"command": " ".join(["python -m rlbench_vec.bench", *argv]),
                  "error": f"{type(error).__name__}: {error}"}
    result["wall_s"] = round(time.perf_counter() - started, 1)
    report.add(part, {**extra, **result})


def run_core(report: Report, sizes: list[int], device: str) -> None:
    out = os.path.join(os.path.dirname(os.path.abspath(report.path)), "mjwarp_core_rows.json")
    jobs = [("joint_velocity", sizes), ("ik", [n for n in sizes if n >= 1024])]
    for arm_mode, worlds in jobs:
        if not worlds:
            continue
        command = [sys.executable, os.path.join(HERE, "mjwarp_core.py"), "--arm_modes", arm_mode, "--device", device,
                   "--num_worlds", *map(str, worlds), "--json", out]
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True)
        print(done.stdout[-3000:], done.stderr[-3000:], flush=True)
        if done.returncode != 0 or not os.path.exists(out):
            report.add("core", {"command": " ".join(command), "error": done.stderr[-2000:]})
            continue
        with open(out) as file:
            core = json.load(file)
        os.unlink(out)
        for row in core["results"]:
            report.add("core", {"command": core["command"], **row})
        print(f"core {arm_mode}: {time.perf_counter() - started:.0f} s (a first run compiles every kernel)", flush=True)


def run_check(report: Report) -> None:
    """The engine's CUDA path, end to end, with the benchmark's configuration."""
    import torch

    from rlbench_vec import RLBenchVectorEnv

    options = dict(CONFIG, backend="mjwarp", arm_mode="joint_velocity", max_episode_steps=3, start_timeout_s=900.0)
    actions = np.zeros((8, 8), np.float32)
    actions[:, 0], actions[:, -1] = 0.5, 1.0
    facts: dict[str, Any] = {}
    started = time.perf_counter()
    try:
        with RLBenchVectorEnv(num_envs=8, as_torch=True, device="cuda", **options) as env:
            facts["start_s"] = round(env.start_time_s, 1)
            first, _ = env.reset(seed=0)
            reset_rgb = first["front_rgb"].clone()
            pointers = [{key: tensor.data_ptr() for key, tensor in first.items()}]
            for _ in range(3):
                obs, reward, terminated, truncated, info = env.step(actions)
                pointers.append({key: tensor.data_ptr() for key, tensor in obs.items()})
            facts["device"] = str(obs["front_rgb"].device)
            facts["alternate_between_two_pages"] = pointers[0] == pointers[2] and pointers[1] == pointers[3] and all(
                pointers[0][key] != pointers[1][key] for key in pointers[0])
            facts["truncated_at_max_episode_steps"] = bool(truncated.all().item())
            facts["front_rgb_mean"] = float(reset_rgb.float().mean())
            pid = env.worker_pids[0]
            os.kill(pid, signal.SIGKILL)
            obs, _, _, truncated, info = env.step(actions)
            facts["restart_reported"] = bool(truncated.all().item()) and bool(info["restarted"].all())
            obs, _, _, _, info = env.step(actions)
            facts["after_restart_new_pages_rgb_mean"] = float(obs["front_rgb"].float().mean())
            facts["after_restart_new_worker"] = env.worker_pids[0] != pid
        with RLBenchVectorEnv(num_envs=8, **options) as env:  # numpy delivery: the same first observation
            host, _ = env.reset(seed=0)
            difference = np.abs(host["front_rgb"].astype(np.int16) - reset_rgb.cpu().numpy()).mean()
            facts["numpy_vs_cuda_front_rgb_mean_abs_difference"] = float(difference)
    except Exception as error:
        facts["error"] = f"{type(error).__name__}: {error}"
    facts["wall_s"] = round(time.perf_counter() - started, 1)
    torch.cuda.synchronize()
    report.add("check", facts)


def mjwarp_argv(size: int, arm_mode: str, gripper_switch: float | None, as_torch: bool = True,
                steps: int | None = None) -> list[str]:
    argv = ["--backend", "mjwarp", "--num_envs", str(size), "--task", CONFIG["task"], "--arm_mode", arm_mode,
            "--steps", str(steps or STEPS.get(size, 20)), "--quiet"]
    if as_torch:
        argv += ["--as_torch", "--device", "cuda"]
    if gripper_switch is not None:
        argv += ["--gripper_switch", str(gripper_switch)]
    return argv


def run_engine(report: Report, sizes: list[int]) -> None:
    for size in sizes:
        bench(report, "engine", mjwarp_argv(size, "joint_velocity", None), series="joint_velocity")
    for size in sizes:
        bench(report, "engine", mjwarp_argv(size, "joint_velocity", 0.0), series="joint_velocity_gripper_held")
    for size in [n for n in sizes if n >= 1024]:
        bench(report, "engine", mjwarp_argv(size, "ik", None), series="ik")
    if 1024 in sizes:  # every observation copied to the host: ~0.9 GB a step, so fewer steps
        bench(report, "engine", mjwarp_argv(1024, "joint_velocity", None, as_torch=False, steps=10),
              series="joint_velocity_numpy")
        bench(report, "engine", mjwarp_argv(1024, "joint_velocity", 0.0, as_torch=False, steps=10),
              series="joint_velocity_gripper_held_numpy")


def run_mujoco(report: Report, sizes: list[int]) -> None:
    for size in sizes:
        argv = ["--backend", "mujoco", "--renderer", "egl", "--num_envs", str(size), "--task", CONFIG["task"],
                "--arm_mode", "joint_velocity", "--steps", str(MUJOCO_STEPS.get(size, 3)), "--quiet"]
        bench(report, "mujoco", argv, series="joint_velocity")
    best = max((r for r in report.data["runs"] if r["part"] == "mujoco" and "sps" in r), key=lambda r: r["sps"],
               default=None)
    if best is not None:  # the gripper held too, at mujoco's best size: the like-for-like ratio
        argv = ["--backend", "mujoco", "--renderer", "egl", "--num_envs", str(best["num_envs"]), "--task",
                CONFIG["task"], "--arm_mode", "joint_velocity", "--steps", str(MUJOCO_STEPS.get(best["num_envs"], 3)),
                "--gripper_switch", "0.0", "--quiet"]
        bench(report, "mujoco", argv, series="joint_velocity_gripper_held")


def summarize(data: dict[str, Any]) -> dict[str, Any]:
    """The figures the docs quote, from the runs."""
    runs = [r for r in data["runs"] if "error" not in r]

    def sps(part: str, series: str, size: int) -> float | None:
        for r in runs:
            if r["part"] == part and r.get("series") == series and r["num_envs"] == size:
                return r["sps"]
        return None

    def best(part: str, series: str) -> dict[str, Any] | None:
        rows = [r for r in runs if r["part"] == part and r.get("series") == series]
        return max(rows, key=lambda r: r["sps"], default=None)

    out: dict[str, Any] = {}
    mujoco, mujoco_held = best("mujoco", "joint_velocity"), best("mujoco", "joint_velocity_gripper_held")
    for series in ("joint_velocity", "joint_velocity_gripper_held", "ik"):
        value = sps("engine", series, 1024)
        out[f"mjwarp_1024_{series}_sps"] = value
    if mujoco:
        out["mujoco_best"] = {"sps": mujoco["sps"], "num_envs": mujoco["num_envs"]}
        if out["mjwarp_1024_joint_velocity_sps"]:
            out["ratio_1024_vs_mujoco_best"] = out["mjwarp_1024_joint_velocity_sps"] / mujoco["sps"]
    if mujoco_held and out["mjwarp_1024_joint_velocity_gripper_held_sps"]:
        out["mujoco_best_gripper_held"] = {"sps": mujoco_held["sps"], "num_envs": mujoco_held["num_envs"]}
        out["ratio_1024_gripper_held_vs_mujoco_gripper_held"] = (
            out["mjwarp_1024_joint_velocity_gripper_held_sps"] / mujoco_held["sps"])
    for series in ("joint_velocity", "joint_velocity_gripper_held"):  # what the host copy of every observation costs
        torch_sps, numpy_sps = sps("engine", series, 1024), sps("engine", f"{series}_numpy", 1024)
        if torch_sps and numpy_sps:
            out[f"numpy_copy_ms_per_step_1024_{series}"] = 1e3 * 1024 * (1 / numpy_sps - 1 / torch_sps)
    core = {r["num_worlds"]: r["env_steps_per_s"] for r in runs
            if r["part"] == "core" and r["arm_mode"] == "joint_velocity"}
    out["engine_over_core_gripper_held"] = {
        size: sps("engine", "joint_velocity_gripper_held", size) / value
        for size, value in sorted(core.items()) if sps("engine", "joint_velocity_gripper_held", size)}
    memory = {r["num_envs"]: r["gpu_memory_mb"] for r in runs
              if r["part"] == "engine" and r.get("series") == "joint_velocity_gripper_held" and r.get("gpu_memory_mb")}
    if memory:
        out["gpu_memory_mb"] = memory
        sizes = sorted(memory)
        if len(sizes) >= 2:  # the cost of one more world, without the fixed part (CUDA contexts, graphs)
            low, high = sizes[-2], sizes[-1]
            out["gpu_memory_mb_per_world_marginal"] = (memory[high] - memory[low]) / (high - low)
    return out


def plot(path: str, png: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with open(path) as file:
        data = json.load(file)
    runs = [r for r in data["runs"] if "error" not in r and "sps" in r]
    lines = [("engine", "joint_velocity", "mjwarp, joint_velocity (bench actions)", "C0", "-"),
             ("engine", "joint_velocity_gripper_held", "mjwarp, joint_velocity, gripper held", "C0", "--"),
             ("engine", "ik", "mjwarp, ik (bench actions)", "C2", "-"),
             ("mujoco", "joint_velocity", "mujoco EGL, processes, joint_velocity (bench actions)", "C3", "-")]
    figure, axes = plt.subplots(figsize=(7.5, 6.5))
    for part, series, label, colour, style in lines:
        rows = sorted((r for r in runs if r["part"] == part and r.get("series") == series), key=lambda r: r["num_envs"])
        if rows:
            axes.plot([r["num_envs"] for r in rows], [r["sps"] for r in rows], style, color=colour, marker="o",
                      label=label)
    core = sorted((r for r in data["runs"] if r["part"] == "core" and r.get("arm_mode") == "joint_velocity"
                   and "env_steps_per_s" in r), key=lambda r: r["num_worlds"])
    if core:
        axes.plot([r["num_worlds"] for r in core], [r["env_steps_per_s"] for r in core], ":", color="C1", marker="s",
                  label="mjwarp core alone, in-process (no engine), joint_velocity +-1 rad/s, gripper held")
    for point in data.get("reference_points", []):  # figures of earlier runs, named with their source
        axes.plot([point["num_envs"]], [point["sps"]], "D", color="C3", fillstyle="none", label=point["label"])
    axes.set_xscale("log", base=2)
    axes.set_yscale("log")
    axes.set_xlabel("num_envs")
    axes.set_ylabel("env-steps/s (one action + its observation)")
    axes.set_title(f"pick_and_lift, 5 cameras rgb+depth+mask 128x128, {data.get('device', 'GPU')}", fontsize=10)
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=7.5, loc="upper center", bbox_to_anchor=(0.5, -0.13))
    figure.tight_layout()
    figure.savefig(png, dpi=120)


def main() -> None:
    parser = ArgumentParser(description=__doc__)
    parser.add_argument("--parts", nargs="+", default=["core", "check", "engine", "mujoco"],
                        choices=["core", "check", "engine", "mujoco"])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--device", default="cuda:0", help="the core's device")
    parser.add_argument("--json", help="results go (merge) here")
    parser.add_argument("--plot", metavar="JSON", help="only draw the plot of this JSON into --png")
    parser.add_argument("--png")
    args = parser.parse_args()
    if args.plot:
        plot(args.plot, args.png)
        return
    report = Report(args.json)
    import torch

    report.data.update(device=torch.cuda.get_device_name(0), machine=platform.platform(), cpu_count=os.cpu_count(),
                       versions=versions())
    report.data.setdefault("commands", []).append("python " + " ".join(sys.argv))
    for part in args.parts:
        started = time.perf_counter()
        if part == "core":
            run_core(report, args.sizes, args.device)
        elif part == "check":
            run_check(report)
        elif part == "engine":
            run_engine(report, args.sizes)
        else:
            run_mujoco(report, args.sizes)
        print(f"part {part}: {time.perf_counter() - started:.0f} s", flush=True)
        report.data["summary"] = summarize(report.data)
        report.save()
    print(json.dumps(report.data["summary"], indent=1))


if __name__ == "__main__":
    run_main(main, "python benchmarks/mjwarp_engine.py")
