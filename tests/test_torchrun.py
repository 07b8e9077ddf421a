"""torchrun: two ranks on this machine, each with its own vector env; rank 0 reports the sum."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from conftest import TORCHRUN, needs

pytestmark = needs("torch", "torch")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def torchrun(*args: str, timeout: float = 180) -> str:
    done = subprocess.run([*TORCHRUN, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_bench_sums_throughput_over_ranks(tmp_path):
    path = tmp_path / "bench.json"
    out = torchrun("-m", "rlbench_vec.bench", "--backend", "synthetic", "--num_envs", "2", "--steps", "20",
                   "--cpu_affinity", "--quiet", "--json", str(path))
    result = json.loads(path.read_text())
    ranks = result["ranks"]
    assert result["world_size"] == 2 and [r["rank"] for r in ranks] == [0, 1]
    assert result["num_envs"] == 4 and all(r["num_envs"] == 2 for r in ranks)
    assert result["env_steps"] == sum(r["env_steps"] for r in ranks) == 2 * 2 * 20
    assert result["sps"] == pytest.approx(sum(r["sps"] for r in ranks))
    assert out.count("rlbench_vec bench") == 1, "only rank 0 prints the summary"


def test_training_example_runs_on_two_ranks():
    out = torchrun("examples/torchrun_train.py", "--backend", "synthetic", "--num_envs", "1", "--iterations", "2",
                   "--steps", "4")
    assert "iteration 1:" in out and "over 2 rank(s)" in out
