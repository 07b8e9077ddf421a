"""benchmarks/ceiling.py in seconds: every mode of both layouts measures something, the JSON keeps the
command and the observation's size, and no worker process or shared-memory segment outlives the run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import psutil

from rlbench_vec.wire.shm import PREFIX, SHM_DIR

REPO = Path(__file__).resolve().parents[1]
MODES = ["free", "pipes", "pipes_bare", "bell", "bell_bare", "spin"]


RUN_MARK = "RLBV_TEST_RUN"  # set in a benchmark's environment: its workers inherit it, no other process has it


def run_benchmark(command: list[str], timeout: float) -> tuple[subprocess.CompletedProcess, list[str]]:
    """Run a benchmark script and list what it left behind: its own processes (those carrying this run's mark
    in their environment) still alive, and the shared-memory segments named after its pid. Other programs on
    the machine (a second copy of the suite, say) hold their own and are not counted."""
    mark = uuid.uuid4().hex
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", RUN_MARK: mark}
    process = subprocess.Popen([sys.executable, *command], cwd=REPO, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    finally:
        process.kill()
    done = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
    segments = [name for name in os.listdir(SHM_DIR) if name.startswith(f"{PREFIX}_{process.pid}_")]
    return done, segments + [f"process {pid}" for pid in marked_processes(mark)]


def marked_processes(mark: str) -> list[int]:
    """Live processes whose environment carries `mark` (a process of another user cannot be read: not ours)."""
    found = []
    for process in psutil.process_iter():
        try:
            if process.environ().get(RUN_MARK) == mark and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process.pid)
        except psutil.Error:
            pass
    return found


def test_every_mode_measures_and_leaves_nothing_behind(tmp_path):
    out = tmp_path / "ceiling.json"
    command = ["benchmarks/ceiling.py", "--num_envs", "2", "--envs_per_worker", "1", "2", "--modes", *MODES,
               "--steps", "20", "--seconds", "0.2", "--repeats", "1", "--json", str(out)]
    done, left = run_benchmark(command, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(out.read_text())
    assert report["command"].startswith("python benchmarks/ceiling.py --num_envs 2")
    # RLBench's default: 5 cameras of 128x128 rgb (uint8), depth and mask (float32), 34 low-dim float64s
    assert report["slot_bytes"] == 5 * 128 * 128 * (3 + 4 + 4) + 34 * 8
    measured = {(r["envs_per_worker"], r["mode"]): r["env_steps_per_s"] for r in report["results"]}
    assert set(measured) == {(per, mode) for per in (1, 2) for mode in MODES}
    assert all(rate > 0 for rate in measured.values()), measured
    assert not left, f"outlived the run: {left}"
