"""benchmarks/partial_gain.py: its model agrees with the arithmetic where the arithmetic is plain, and
partial batches gain only where steps vary."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_the_model_matches_hand_arithmetic_and_gains_only_with_varying_steps(tmp_path):
    out = tmp_path / "partial_gain.json"
    command = ["benchmarks/partial_gain.py", "--num_envs", "4", "16", "--cores", "2", "16", "--actions", "20000",
               "--json", str(out)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, *command], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(out.read_text())
    assert report["command"].startswith("python benchmarks/partial_gain.py --num_envs 4 16")
    figures = {(r["setting"], r["num_envs"]): r for r in report["results"]}
    assert set(figures) == {(s, n) for s in ("10 ms", "heavy-tailed") for n in (4, 16)}
    for n in (4, 16):
        constant, heavy = figures["10 ms", n], figures["heavy-tailed", n]
        # 10 ms each, resets free: n actions every 10 ms in both loops, nothing to gain
        assert constant["step"] == pytest.approx(n / 0.01) and constant["recv"] == pytest.approx(n / 0.01)
        # heavy-tailed: 10 ms mean steps plus a 50 ms reset every 10 steps is 15 ms of CPU per action
        assert heavy["cpu_limit"] == {"2": pytest.approx(2 / 0.015), "16": pytest.approx(16 / 0.015)}
        # an env works 15 ms per action on average, whatever the loop; a lockstep waits for the slowest
        assert heavy["step"] < heavy["recv"] < n / 0.015
    assert figures["heavy-tailed", 16]["gain"] > figures["heavy-tailed", 4]["gain"] > 1.0
