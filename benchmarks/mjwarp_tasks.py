"""The bench's throughput on mjwarp for every embedded task, one bench run per task, into one JSON:

    python benchmarks/mjwarp_tasks.py --num_envs 1024 --json PATH [--tasks ...] [--budget_s S]

Each run: `python -m rlbench_vec.bench --backend mjwarp --num_envs N --task TASK --arm_mode joint_velocity
--as_torch --device cuda --action_timing fixed --steps S --quiet` (the five cameras rgb + depth + mask at 128x128,
the bench's actions). A task's first run on a host also compiles MuJoCo Warp's kernels for its model: `wall_s`
includes that, `startup_s` and `sps` come from the bench's own JSON. The file is rewritten after every task, so a
run cut short keeps what finished; tasks left when --budget_s is spent are listed as not run.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rlbench_vec import list_tasks
from rlbench_vec.cli import ArgumentParser, positive, run_main

REPO = Path(__file__).resolve().parents[1]


def bench(task: str, num_envs: int, steps: int, timeout_s: float) -> dict:
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "bench.json"
        command = [sys.executable, "-m", "rlbench_vec.bench", "--backend", "mjwarp", "--num_envs", str(num_envs),
                   "--task", task, "--arm_mode", "joint_velocity", "--as_torch", "--device", "cuda",
                   "--action_timing", "fixed", "--steps", str(steps), "--quiet", "--json", str(out)]
        started = time.monotonic()
        try:
            done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=timeout_s,
                                  env={**os.environ, "MUJOCO_GL": "disable"})
        except subprocess.TimeoutExpired:
            return {"task": task, "error": f"not done within {timeout_s:.0f} s"}
        row = {"task": task, "wall_s": round(time.monotonic() - started, 1)}
        if done.returncode != 0 or not out.exists():
            return {**row, "error": done.stderr[-2000:]}
        result = json.loads(out.read_text())
        return {**row, "sps": round(result["sps"]), "startup_s": round(result["startup_s"], 1),
                "command": shlex.join(["python", *command[1:-2]])}


def main() -> None:
    parser = ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", nargs="+", default=list_tasks("mujoco"), metavar="TASK")
    parser.add_argument("--num_envs", type=positive, default=1024)
    parser.add_argument("--steps", type=positive, default=50)
    parser.add_argument("--budget_s", type=positive, default=540, help="stop starting tasks after this")
    parser.add_argument("--json", required=True, metavar="PATH")
    args = parser.parse_args()
    started, rows = time.monotonic(), []
    for task in args.tasks:
        left = args.budget_s - (time.monotonic() - started)
        row = bench(task, args.num_envs, args.steps, left) if left > 20 else {"task": task, "error": "not run"}
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "command"}), flush=True)
        Path(args.json).write_text(json.dumps({"command": shlex.join(["python", *sys.argv]), "tasks": rows},
                                              indent=1))


if __name__ == "__main__":
    run_main(main, "python benchmarks/mjwarp_tasks.py")
