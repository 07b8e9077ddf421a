"""benchmarks/ceiling.py in seconds: every mode of both layouts measures something, the JSON keeps the
command and the observation's size, and no worker process or shared-memory segment outlives the run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psutil

from rlbench_vec.wire.shm import PREFIX, SHM_DIR

REPO = Path(__file__).resolve().parents[1]
MODES = ["free", "pipes", "pipes_bare", "bell", "bell_bare", "spin"]


def segments() -> set[str]:
    return {name for name in os.listdir(SHM_DIR) if name.startswith(PREFIX)}


def leaked(before: set[str]) -> set[str]:
    """Segments made since `before` whose maker (the pid in the name) is gone: another run's live processes on
    a shared machine may hold theirs."""
    return {name for name in segments() - before if not psutil.pid_exists(int(name.split("_")[1]))}


def spawned_processes() -> set[int]:
    """Processes started by multiprocessing's spawn (their command line says so)."""
    return {p.pid for p in psutil.process_iter(["cmdline"]) if "--multiprocessing-fork" in (p.info["cmdline"] or [])}


def test_every_mode_measures_and_leaves_nothing_behind(tmp_path):
    before, spawned = segments(), spawned_processes()
    out = tmp_path / "ceiling.json"
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    command = ["benchmarks/ceiling.py", "--num_envs", "2", "--envs_per_worker", "1", "2", "--modes", *MODES,
               "--steps", "20", "--seconds", "0.2", "--repeats", "1", "--json", str(out)]
    done = subprocess.run([sys.executable, *command], cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(out.read_text())
    assert report["command"].startswith("python benchmarks/ceiling.py --num_envs 2")
    # RLBench's default: 5 cameras of 128x128 rgb (uint8), depth and mask (float32), 34 low-dim float64s
    assert report["slot_bytes"] == 5 * 128 * 128 * (3 + 4 + 4) + 34 * 8
    measured = {(r["envs_per_worker"], r["mode"]): r["env_steps_per_s"] for r in report["results"]}
    assert set(measured) == {(per, mode) for per in (1, 2) for mode in MODES}
    assert all(rate > 0 for rate in measured.values()), measured
    assert not leaked(before)
    assert spawned_processes() <= spawned
