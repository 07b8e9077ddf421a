"""benchmarks/soak.py in seconds: the crash soak and the recycling soak run, report, and pass their
own checks (nothing leaked; no episode lost but to a kill; step counts continue across recycles)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def soak(tmp_path: Path, *options: str) -> tuple[int, dict, str]:
    out = tmp_path / "soak.json"
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run([sys.executable, "benchmarks/soak.py", *options, "--json", str(out)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=240)
    return done.returncode, json.loads(out.read_text()), done.stdout + done.stderr


def test_crash_soak_loses_only_killed_episodes_and_leaks_nothing(tmp_path):
    code, result, output = soak(tmp_path, "--num_envs", "2", "--steps", "120", "--kill_every", "40",
                                "--episode_length", "10")
    assert code == 0, output
    run = result["runs"]["soak"]
    assert run["kills"] == run["restarts"] == run["restarted_steps_flagged"] == 3
    assert run["episodes_lost"] <= 3 and run["step_count_breaks"] == 0 and run["episodes_completed"] > 0
    assert not result["leaked_processes"] and not result["leaked_segments"]


def test_recycling_soak_keeps_every_episode_and_compares_throughput(tmp_path):
    # 4.2 s of stepping per run, in alternating blocks of 1.5 s (three blocks each), memory sampled every 0.5 s
    code, result, output = soak(tmp_path, "--num_envs", "2", "--minutes", "0.07", "--recycle_after_episodes", "1",
                                "--compare", "--block_s", "1.5", "--sample_s", "0.5", "--kill_every", "0",
                                "--episode_length", "10", "--step_cost_s", "0.002")
    assert code == 0, output
    recycling, baseline = result["runs"]["recycling"], result["runs"]["no_recycling"]
    assert recycling["recycles"] > 0 and recycling["recycle_flag_mismatches"] == 0
    assert recycling["recycled_autoresets_flagged"] + recycling["recycles_awaiting_autoreset"] == recycling["recycles"]
    assert recycling["episodes_lost"] == recycling["step_count_breaks"] == recycling["restarts"] == 0
    assert baseline["recycles"] == 0 and baseline["stepping_s"] >= 4.2
    assert result["throughput_vs_no_recycling"] > 0 and len(recycling["samples"]) >= 5
    assert result["processes_alive_max"] <= result["processes_alive_bound"]
    assert not result["leaked_processes"] and not result["leaked_segments"] and not result["leaked_xvfb_sockets"]
