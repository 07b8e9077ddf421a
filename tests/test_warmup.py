"""`python -m rlbench_vec.warmup` through the real command: a task's first start compiles (and says so) and leaves
the marker later starts read; bad input in one line before anything starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import needs

from rlbench_vec.config import EnvConfig

ROOT = Path(__file__).resolve().parents[1]
WARMUP = [sys.executable, "-m", "rlbench_vec.warmup", "--backend", "mjwarp", "--device", "cpu"]


def test_unknown_tasks_are_said_in_one_line_before_anything_starts():
    done = subprocess.run([*WARMUP, "--tasks", "reach_target", "open_jar"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert done.stderr.count("\n") == 1 and "unknown to the mjwarp backend: open_jar; it runs" in done.stderr


@needs("gpu", "warp", "mujoco_warp", "torch")
def test_warmup_starts_each_task_once_announcing_a_first_start():
    from rlbench_vec.backends.mjwarp.first_start import marker  # imports warp

    config = EnvConfig(task="reach_target", backend="mjwarp", cameras=(), modalities=("rgb",)).validated()
    path = marker(config, "cpu")
    path.unlink(missing_ok=True)  # this machine's start of it is then a first one: announced, and marked after
    done = subprocess.run([*WARMUP, "--tasks", "ReachTarget", "--cameras", "--modalities", "rgb"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:2] == ["[1/1] reach_target: starting", lines[1]] and lines[1].startswith("[1/1] reach_target: ready")
    assert "compiling mjwarp kernels for reach_target (first start on this machine" in done.stderr
    assert path.exists()
