"""How well each embedded task's oracle solves it: seeded demos on the mujoco backend, first attempt.

For every task: --demos episodes (seeds 0..N-1, each variation as the seed draws it), each solved by
the task's oracle in --arm_mode without retries (get_demos would retry a failed episode), observed by
the front camera (rgb, --image_size) and the default low-dim fields. Per task it writes
{out}/{task}.json (variations, success rate, steps and CPU time per demo, failed seeds, the command)
and {out}/{task}.png (the front camera at the start, middle and end of the first successful demo), and
prints the task's row of docs/tasks.md's table.

    python benchmarks/task_oracles.py --tasks all --demos 100
    python benchmarks/task_oracles.py --tasks push_buttons --demos 100
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path

import imageio.v2 as imageio
import numpy as np

from rlbench_vec import list_tasks
from rlbench_vec.backends.mujoco import BACKEND
from rlbench_vec.backends.mujoco.backend import task_class
from rlbench_vec.cli import ArgumentParser, run_main
from rlbench_vec.config import ARM_MODES, EnvConfig
from rlbench_vec.spec import observation_spec


def measure(task: str, demos: int, arm_mode: str, image_size: int) -> tuple[dict, np.ndarray | None]:
    config = EnvConfig(task=task, backend="mujoco", arm_mode=arm_mode, cameras=("front",), modalities=("rgb",),
                       image_size=(image_size, image_size), backend_options={"variation": "random"}).validated()
    BACKEND.validate(config)
    backend = BACKEND(config, 0)
    spec = observation_spec(config)
    successes, steps, cpu, failed, montage = 0, [], [], [], None
    try:
        for seed in range(demos):
            start = time.process_time()
            demo = backend.record_demo(seed, spec, None)
            cpu.append(time.process_time() - start)
            steps.append(len(demo.actions))
            successes += demo.success
            if not demo.success:
                failed.append(seed)
            elif montage is None:
                frames = demo.observations["front_rgb"]
                montage = np.concatenate([frames[0], frames[len(frames) // 2], frames[-1]], axis=1)
    finally:
        backend.close()
    report = {
        "task": task, "variations": task_class(config).variation_count, "demos": demos,
        "successes": successes, "success_rate": successes / demos, "mean_steps": float(np.mean(steps)),
        "cpu_s_per_demo": float(np.mean(cpu)), "failed_seeds": failed, "arm_mode": arm_mode,
        "observation": f"front rgb {image_size}x{image_size} + default low-dim",
        "command": " ".join(["python", *sys.argv]), "machine": f"{platform.node()}, {os.cpu_count()} cores",
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }
    return report, montage


def table_row(report: dict, out: Path) -> str:
    return (f"| `{report['task']}` | {report['variations']} | {report['successes']}/{report['demos']} | "
            f"{report['mean_steps']:.1f} | {report['cpu_s_per_demo']:.2f} s | "
            f"[json]({out.name}/{report['task']}.json), [montage]({out.name}/{report['task']}.png) |")


def main() -> None:
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", default=["all"],
                        help="task names, or all: " + " ".join(list_tasks("mujoco")))
    parser.add_argument("--demos", type=int, default=100, help="seeded demos per task")
    parser.add_argument("--arm_mode", default="ik", choices=ARM_MODES)
    parser.add_argument("--image_size", type=int, default=128, help="front camera side, pixels")
    parser.add_argument("--out", type=Path, default=Path("docs/tasks"), help="folder for {task}.json and .png")
    args = parser.parse_args()
    tasks = list_tasks("mujoco") if args.tasks == ["all"] else args.tasks
    args.out.mkdir(parents=True, exist_ok=True)
    for task in tasks:
        report, montage = measure(task, args.demos, args.arm_mode, args.image_size)
        (args.out / f"{task}.json").write_text(json.dumps(report, indent=1) + "\n")
        if montage is not None:
            imageio.imwrite(args.out / f"{task}.png", montage)
        print(table_row(report, args.out), flush=True)


if __name__ == "__main__":
    run_main(main, "python benchmarks/task_oracles.py")
