"""benchmarks/machinery_bound.py in seconds: all four loops measure something on both layouts, with full and
half batches (the script fails where the bare workers did not serve their vector env), the JSON keeps the
command, and no worker process or shared-memory segment outlives the run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from test_ceiling import run_benchmark

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


def test_every_loop_measures_and_leaves_nothing_behind(tmp_path):
    out = tmp_path / "bound.json"
    command = ["benchmarks/machinery_bound.py", "--num_envs", "2", "--envs_per_worker", "1", "2", "--steps", "20",
               "--repeats", "2", "--json", str(out)]
    done, left = run_benchmark(command, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(out.read_text())
    assert report["command"].startswith("python benchmarks/machinery_bound.py --num_envs 2")
    measured = {(r["envs_per_worker"], r["batches"], r["workers"], r["main"]): r for r in report["results"]}
    loops = {(w, m) for w in ("engine", "bare") for m in ("engine", "bare")}
    assert set(measured) == {(per, batches, *loop) for per in (1, 2) for batches in ("full", "half") for loop in loops}
    for (_, batches, _, _), result in measured.items():
        assert len(result["runs_env_steps_per_s"]) == 2 and result["env_steps_per_s"] > 0, result
        # a half batch returns at least one of the two envs, and never more than both
        assert 1 <= result["env_steps_per_call"] <= 2 and (batches == "half" or result["env_steps_per_call"] == 2)
    assert "bare both" in done.stdout and not left, left


def test_zero_repeats_are_refused():
    done = subprocess.run([sys.executable, "benchmarks/machinery_bound.py", "--repeats", "0"], cwd=REPO, env=ENV,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--steps and --repeats must be at least 1" in done.stderr
