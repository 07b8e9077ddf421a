"""Where a step of backend="mjwarp" goes, phase by phase, beside the ceiling (issue 42).

For each run SIZE:CAMERAS (default 1024:five 4096:five 1024:one; five: the five cameras rgb + depth +
mask, one: the front camera's rgb; 128x128), pick_and_lift, joint_velocity, action_timing "fixed",
observations as CUDA tensors in the main process (--as_torch --device cuda):

  bench    `python -m rlbench_vec.bench --backend mjwarp ...`: the engine's throughput
  profile  the same with --profile: device time per env-step of each phase (physics, controllers,
           forward kinematics, conditions, the render, each camera's conversions, the low-dim state,
           the writes into the result pages, resets) and the rest of the step (host, launches,
           engine, IPC); each phase is then a graph of its own, so its throughput is not the figure
  resets   the profile again, --reset_steps actions per env in episodes of half that (every env resets
           twice, all at once): the cost of one reset, host draw (episode randomisation, settling,
           reachability checks) and device upload and kernels
  core     benchmarks/mjwarp_core.py --layers mujoco_warp simulation in a subprocess: the same
           scene's physics and render with MuJoCo Warp alone in process (the ceiling), and the
           batched simulator (BatchedSimulation) in process, no engine

Results go into one JSON (rewritten after every run); the table for docs/mjwarp.md is printed at the
end, or from JSON files of several calls with --from (merged in order):

    python benchmarks/mjwarp_phases.py --json docs/mjwarp_phases_h200.json
    python benchmarks/mjwarp_phases.py --from a.json b.json --json docs/mjwarp_phases_h200.json
    python benchmarks/mjwarp_phases.py --device cpu --runs 2:five 2:one --image_size 16 16 --steps 3 --rounds 3 \\
        --json docs/mjwarp_phases_cpu2.json    # warp's CPU device: a smoke check of the whole path
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
from typing import Any

from mjwarp_engine import HERE, Report, bench, versions

from rlbench_vec.backends.mjwarp.profile import RESET_DEVICE, RESET_DRAW
from rlbench_vec.cli import ArgumentParser, positive, run_main
from rlbench_vec.config import CAMERAS

CAMERA_SETS = {"five": (CAMERAS, ("rgb", "depth", "mask")), "one": (("front",), ("rgb",))}
PARTS = ("bench", "profile", "resets", "core")


def run_key(text: str) -> tuple[int, str]:
    size, _, cameras = text.partition(":")
    if not size.isdigit() or int(size) < 1 or cameras not in CAMERA_SETS:
        raise ValueError(f"a run is SIZE:CAMERAS with CAMERAS one of {', '.join(CAMERA_SETS)}, e.g. 1024:five")
    return int(size), cameras


def scene_flags(args: Any, cameras: str) -> list[str]:
    names, modalities = CAMERA_SETS[cameras]
    return ["--cameras", *names, "--modalities", *modalities, "--image_size", *map(str, args.image_size)]


def bench_argv(args: Any, size: int, cameras: str, part: str) -> list[str]:
    on_device = ["--as_torch", "--device", "cuda"] if args.device == "cuda" else \
        ["--backend_options", json.dumps({"device": "cpu"})]
    steps = ["--steps", str(args.steps)]
    if part == "resets":
        steps = ["--steps", str(args.reset_steps), "--max_episode_steps", str(max(1, args.reset_steps // 2))]
    return ["--backend", "mjwarp", "--num_envs", str(size), "--task", "pick_and_lift", "--arm_mode", "joint_velocity",
            "--action_timing", "fixed", *scene_flags(args, cameras), *steps, *on_device, "--quiet",
            *(["--profile"] if part != "bench" else [])]


def run_core(report: Report, args: Any, size: int, cameras: str) -> None:
    """mjwarp_core.py's mujoco_warp and simulation layers in a subprocess; a failure is recorded."""
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "core.json")
        command = [sys.executable, "benchmarks/mjwarp_core.py", "--layers", "mujoco_warp", "simulation",
                   "--num_worlds", str(size), "--arm_modes", "joint_velocity", "--action_timing", "fixed",
                   *scene_flags(args, cameras), "--rounds", str(args.rounds),
                   "--device", "cuda:0" if args.device == "cuda" else "cpu", "--json", out]
        done = subprocess.run(command, capture_output=True, text=True, cwd=os.path.dirname(HERE))
        print(done.stdout[-2000:], done.stderr[-2000:], flush=True)
        if done.returncode != 0 or not os.path.exists(out):
            report.add("core", {"size": size, "camera_set": cameras, "command": " ".join(command),
                                "error": done.stderr[-2000:]})
            return
        with open(out) as file:
            core = json.load(file)
    for row in core["results"]:
        report.add("core", {**row, "size": size, "camera_set": cameras, "command": core["command"]})


def device_name(device: str) -> str:
    if device == "cuda":
        import torch

        return torch.cuda.get_device_name(0)
    return f"warp's CPU device ({platform.processor() or platform.machine()})"


def measure(report: Report, args: Any) -> None:
    for size, cameras in args.runs:
        for part in args.parts:
            if part == "core":
                run_core(report, args, size, cameras)
            else:
                bench(report, part, bench_argv(args, size, cameras, part), size=size, camera_set=cameras)


def table(runs: list[dict[str, Any]]) -> str:
    """docs/mjwarp.md's table: ms per env-step by phase, then env-steps/s per layer, one column per run."""
    columns = list(dict.fromkeys((r["size"], r["camera_set"]) for r in runs))
    by = {(r["size"], r["camera_set"], r["part"], r.get("layer")): r for r in runs if "error" not in r}

    def row(part: str, layer: str | None = None):
        return [by.get((size, cameras, part, layer)) for size, cameras in columns]

    def line(label: str, values: list[float | None], form: str) -> str:
        return f"| {label} | " + " | ".join("" if v is None else format(v, form) for v in values) + " |"

    profiled, engine, resets = row("profile"), row("bench"), row("resets")
    alone, simulation = row("core", "mujoco_warp"), row("core", "simulation")
    names = list(dict.fromkeys(name for r in profiled if r for name in r["phases_ms"]))
    lines = ["| ms per env-step | " + " | ".join(f"{size} envs, {cameras}" for size, cameras in columns) + " |",
             "| --- |" + " ---: |" * len(columns)]
    lines += [line(name, [r["phases_ms"].get(name) if r else None for r in profiled], ".4f") for name in names]
    lines.append(line("rest: host, launches, engine, IPC", [r and r["unprofiled_ms"] for r in profiled], ".4f"))
    lines.append(line("**step, profiled** (1 / env-steps/s)", [r and r["step_ms"] for r in profiled], ".4f"))
    for name in (RESET_DRAW, RESET_DEVICE):
        per_reset = [r and r["resets"] and r["phases_ms"].get(name, 0.0) * r["env_steps"] / r["resets"] for r in resets]
        lines.append(line(f"per reset (not per env-step): {name.removeprefix('reset: ')}", per_reset, ".3f"))
    lines.append(line("MuJoCo Warp alone: physics", [r and r["physics_ms"] / r["num_worlds"] for r in alone], ".4f"))
    lines.append(line("MuJoCo Warp alone: render", [r and r["render_ms"] / r["num_worlds"] for r in alone], ".4f"))
    lines.append(line("**env-steps/s: engine** (bench, not profiled)", [r and r["sps"] for r in engine], ",.0f"))
    lines.append(line("env-steps/s: engine, profiled", [r and r["sps"] for r in profiled], ",.0f"))
    lines.append(line("env-steps/s: engine, profiled, two resets per env", [r and r["sps"] for r in resets], ",.0f"))
    lines.append(line("env-steps/s: BatchedSimulation in process", [r and r["env_steps_per_s"] for r in simulation],
                      ",.0f"))
    lines.append(line("**env-steps/s: MuJoCo Warp alone** (ceiling)", [r and r["env_steps_per_s"] for r in alone],
                      ",.0f"))
    shares = [e["sps"] / a["env_steps_per_s"] if e and a else None for e, a in zip(engine, alone)]
    lines.append(line("engine / ceiling", shares, ".2f"))
    return "\n".join(lines)


def main() -> None:
    parser = ArgumentParser(description=__doc__)
    parser.add_argument("--runs", nargs="+", default=["1024:five", "4096:five", "1024:one"],
                        help="SIZE:CAMERAS, CAMERAS five (rgb+depth+mask) or one (front rgb)")
    parser.add_argument("--parts", nargs="+", default=list(PARTS), choices=PARTS)
    parser.add_argument("--steps", type=positive, default=100, help="the bench's timed actions per env")
    parser.add_argument("--reset_steps", type=positive, default=20,
                        help="the resets part's timed actions per env (episodes of half that)")
    parser.add_argument("--rounds", type=positive, default=50, help="the core's timed steps")
    parser.add_argument("--image_size", type=positive, nargs=2, default=[128, 128], metavar=("WIDTH", "HEIGHT"))
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--from", dest="sources", nargs="+", default=None, metavar="JSON",
                        help="measure nothing: merge these results and print their table")
    parser.add_argument("--json", default=None, help="write the results here")
    args = parser.parse_args()
    try:
        args.runs = [run_key(text) for text in args.runs]
    except ValueError as error:
        parser.error(str(error))
    report = Report(args.json or os.path.join(tempfile.mkdtemp(), "phases.json"))
    if args.sources:
        report.data["runs"] = []
        for source in args.sources:
            with open(source) as file:
                report.data["runs"] += json.load(file)["runs"]
    else:
        report.data.update(command="python " + " ".join(sys.argv), device=device_name(args.device),
                           machine=platform.platform(), cpu_count=os.cpu_count(), versions=versions())
        measure(report, args)
    report.data["what"] = __doc__.split("\n\n")[1].replace("\n", " ")
    report.save()
    print(table(report.data["runs"]))


if __name__ == "__main__":
    run_main(main, "python benchmarks/mjwarp_phases.py")
