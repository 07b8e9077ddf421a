"""Ctrl-C and SIGTERM at random moments of the bench's life, start-up included: how each run ended.

    python benchmarks/signal_stress.py --runs 150 --low_s 0.2 --high_s 3 --json PATH

Each run starts `python -m rlbench_vec.bench` on the synthetic backend (4 envs, 2 per worker, 1 ms steps),
waits a random time in [low_s, high_s], sends SIGINT or SIGTERM, and waits up to --timeout_s for it to end.
Outcomes: "one line" (status 130 or 143, the command's one line last), "at import" (the signal came before
the command's code ran: Python's own traceback or death by the signal), "other", or "hang" (still running:
its stacks are dumped with SIGABRT and kept in the JSON, then it and its children are killed).
"""

from __future__ import annotations

import collections
import json
import os
import random
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from rlbench_vec.cli import ArgumentParser, positive, run_main

REPO = Path(__file__).resolve().parents[1]
BENCH = [sys.executable, "-m", "rlbench_vec.bench", "--backend", "synthetic", "--num_envs", "4", "--envs_per_worker",
         "2", "--steps", "10000000", "--backend_options", '{"step_cost_s": 0.001}']
ONE_LINE = {signal.SIGINT: (130, "python -m rlbench_vec.bench: interrupted."),
            signal.SIGTERM: (143, "python -m rlbench_vec.bench: terminated.")}


def outcome(stop: signal.Signals, status: int, stderr: str) -> str:
    expected_status, line = ONE_LINE[stop]
    if status == expected_status and stderr.strip().splitlines()[-1:] == [line]:
        return "one line"
    if status == -stop or "<frozen runpy>" in stderr and "bench.py\", line 9" not in stderr:
        return "at import"
    return "other"


def thread_masks(pid: int) -> dict[str, dict[str, str]]:
    """Each thread's pending, blocked and caught signal masks (hex, from /proc): where a lost signal went."""
    masks = {}
    for task in sorted(Path(f"/proc/{pid}/task").iterdir()):
        fields = dict(line.split(":\t", 1) for line in (task / "status").read_text().splitlines() if ":\t" in line)
        masks[task.name] = {key: fields[key].strip() for key in ("Name", "SigPnd", "ShdPnd", "SigBlk", "SigCgt")}
    return masks


def main() -> None:
    parser = ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=positive, default=50)
    parser.add_argument("--low_s", type=float, default=0.2)
    parser.add_argument("--high_s", type=float, default=3.0)
    parser.add_argument("--timeout_s", type=float, default=40.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, metavar="PATH")
    args = parser.parse_args()
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # a background job ignores SIGINT, and its children would too
    rng = random.Random(args.seed)
    runs = []
    for index in range(args.runs):
        process = subprocess.Popen(BENCH, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   env={**os.environ, "PYTHONFAULTHANDLER": "1"})
        delay, stop = rng.uniform(args.low_s, args.high_s), rng.choice([signal.SIGINT, signal.SIGTERM])
        time.sleep(delay)
        process.send_signal(stop)
        try:
            _, stderr = process.communicate(timeout=args.timeout_s)
            run = {"delay_s": round(delay, 2), "signal": stop.name, "status": process.returncode,
                   "outcome": outcome(stop, process.returncode, stderr)}
            if run["outcome"] == "other":
                run["stderr"] = stderr[-4000:]
        except subprocess.TimeoutExpired:
            children = psutil.Process(process.pid).children(recursive=True)
            masks = thread_masks(process.pid)
            process.send_signal(signal.SIGABRT)
            _, stderr = process.communicate(timeout=20)
            for child in children:
                child.kill()
            run = {"delay_s": round(delay, 2), "signal": stop.name, "outcome": "hang", "masks": masks,
                   "stderr": stderr[-8000:]}
        runs.append(run)
        print(index, {k: v for k, v in run.items() if k != "stderr"}, flush=True)
    counts = collections.Counter(f"{run['signal']} {run['outcome']}" for run in runs)
    print(dict(counts))
    if args.json:
        with open(args.json, "w") as file:
            json.dump({"command": shlex.join(["python", *sys.argv]), "counts": counts, "runs": runs}, file, indent=2)


if __name__ == "__main__":
    run_main(main, "python benchmarks/signal_stress.py")
