"""benchmarks/peers.py in seconds: every peer steps the same env and counts the actions it executed (an
autoreset step that only resets is not counted), versions and skips are recorded. PufferLib runs when an
interpreter with pufferlib 2.0.2 is found ($RLBENCH_VEC_PUFFERLIB_PYTHON or /work/venvs/puffer)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import extra_reason

REPO = Path(__file__).resolve().parents[1]
PUFFERLIB_PYTHON = os.environ.get("RLBENCH_VEC_PUFFERLIB_PYTHON", "/work/venvs/puffer/bin/python")
PUFFERLIB = ["pufferlib sync", "pufferlib async", "pufferlib serial"]


def peers(out: Path, *options: str) -> tuple[int, dict, str]:
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run([sys.executable, "benchmarks/peers.py", "--tag", "test", "--out", str(out), *options],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    return done.returncode, json.loads((out / "peers_test.json").read_text()), done.stdout + done.stderr


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """2 envs, 16 timed actions each (the least), free steps and heavy-tailed ones (10-step episodes)."""
    pytest.importorskip("stable_baselines3", reason=extra_reason("bench", ["stable_baselines3"]))
    systems = ["gymnasium async", "sb3 subproc"]
    options = ["--pufferlib_python", PUFFERLIB_PYTHON] if Path(PUFFERLIB_PYTHON).exists() else []
    code, result, output = peers(tmp_path_factory.mktemp("peers"), "--num_envs", "2", "--scale", "0.01",
                                 "--settings", "0 ms", "heavy-tailed", "--systems", *systems, *PUFFERLIB, *options)
    assert code == 0, output
    return result


def env_steps(report: dict, system: str, setting: str) -> int:
    (found,) = [r["env_steps"] for r in report["results"] if r["system"] == system and r["setting"] == setting]
    return found


def test_every_peer_counts_the_actions_it_executed(report):
    ran = {r["system"] for r in report["results"]}
    assert {"gymnasium async", "sb3 subproc"} <= ran
    sent = 2 * 16
    for system in ran - {"pufferlib async"}:
        assert env_steps(report, system, "0 ms") == sent, system  # no episode ends: every action executes
    if "pufferlib async" in ran:  # its timing starts and ends with a half batch (1 env) in flight, which
        # PufferLib cannot drain (no recv without a send): exact up to that half batch
        assert sent - 1 <= env_steps(report, "pufferlib async", "0 ms") <= sent
    # episodes of 10 steps: gymnasium's next-step autoreset spends sends on resets, SB3 resets inside a step
    assert env_steps(report, "gymnasium async", "heavy-tailed") < sent
    assert env_steps(report, "sb3 subproc", "heavy-tailed") == sent
    for system in ran & {"pufferlib sync", "pufferlib serial"}:  # the same autoreset as gymnasium's
        assert env_steps(report, system, "heavy-tailed") == env_steps(report, "gymnasium async", "heavy-tailed")


def test_versions_and_command_are_recorded(report):
    versions = report["versions"]
    assert versions["gymnasium"] and versions["stable_baselines3"] and versions["rlbench_vec"]
    assert "'0 ms' heavy-tailed" in report["command"]  # shell-quoted: the command runs as written
    if any(r["system"] in PUFFERLIB for r in report["results"]):
        assert versions["pufferlib"]["pufferlib"] == "2.0.2" and not report["skipped"]
    else:
        assert set(report["skipped"]) == set(PUFFERLIB)


def test_pufferlib_without_its_interpreter_is_skipped_with_the_reason(tmp_path):
    code, result, output = peers(tmp_path, "--num_envs", "2", "--settings", "0 ms", "--systems", "pufferlib sync")
    assert code == 0, output
    assert "--pufferlib_python" in result["skipped"]["pufferlib sync"] and not result["results"]
    assert "pufferlib sync | skipped" in output and not (tmp_path / "peers_test.png").exists()
    if importlib.util.find_spec("pufferlib") is None:  # this interpreter lacks it: said so, not raised
        code, result, output = peers(tmp_path, "--num_envs", "2", "--settings", "0 ms", "--systems", "pufferlib sync",
                                     "--pufferlib_python", sys.executable)
        assert code == 0, output
        assert "not importable" in result["skipped"]["pufferlib sync"]


def test_repeats_report_the_median_run_and_keep_every_run(tmp_path):
    code, result, output = peers(tmp_path, "--num_envs", "2", "--scale", "0.01", "--settings", "0 ms",
                                 "--systems", "rlbench_vec sync", "--repeats", "3")
    assert code == 0, output
    (row,) = result["results"]
    assert len(row["runs_sps"]) == 3 and row["sps"] == sorted(row["runs_sps"])[1]


def test_repeats_below_one_are_refused(tmp_path):
    done = subprocess.run([sys.executable, "benchmarks/peers.py", "--tag", "test", "--out", str(tmp_path), "--repeats",
                           "0"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--repeats must be at least 1" in done.stderr
