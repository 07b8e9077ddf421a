"""benchmarks/evaluate_bound.py: its plain processes run the evaluation's own episodes (the same steps and successes
as `rlbench_vec.evaluate` scores), with or without a round trip to the main process per step, so its wall time
bounds the evaluation's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from rlbench_vec.evaluate import EvaluateConfig, evaluate

REPO = Path(__file__).resolve().parents[1]
SMALL = ["--cameras", "front", "--modalities", "rgb", "--image_size", "16", "16"]


def test_the_bound_runs_the_evaluations_episodes(tmp_path):
    processes = 2
    tasks = ("push_button", "reach_target")
    command = [sys.executable, "benchmarks/evaluate_bound.py", "--tasks", *tasks, "--episodes", "2", "--num_envs",
               str(processes), "--round_trip", "0", "1", *SMALL, "--json", str(tmp_path / "bound.json")]
    done = subprocess.run(command, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True,
                          text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    alone, with_round_trips = json.loads((tmp_path / "bound.json").read_text())["runs"]
    scored = evaluate(EvaluateConfig(policy="oracle", tasks=tasks, episodes=2, backend="mujoco", num_envs=processes,
                                     cameras=("front",), modalities=("rgb",), image_size=(16, 16), progress=False,
                                     out=str(tmp_path / "evaluation")))
    records = [json.loads(line) for line in (tmp_path / "evaluation" / "log.jsonl").read_text().splitlines()]
    episodes = [record for record in records if record["record"] == "episode"]
    assert scored["mean_success"] == 1
    assert (alone["round_trip"], with_round_trips["round_trip"]) == (False, True)
    for run in alone, with_round_trips:
        assert run["num_envs"] == processes and run["episodes"] == len(episodes) == 4
        assert run["steps"] == sum(e["steps"] for e in episodes)
        assert run["successes"] == sum(e["success"] for e in episodes) == 4
        phases = run["reset_seconds_summed"] + run["act_seconds_summed"] + run["write_seconds_summed"]
        rounding = 0.002  # each of the four sums is rounded to the millisecond
        assert 0 < phases <= run["episode_seconds_summed"] + rounding
