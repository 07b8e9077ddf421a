"""Smoke tests of the examples with tiny budgets (seconds): they run end to end and write their
results. The full runs and their numbers are in docs/ecosystem.md."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import needs

REPO = Path(__file__).resolve().parents[1]
pytestmark = needs("examples", "torch", "matplotlib")
TINY_PPO = ["--num_envs", "1", "--num_steps", "16", "--total_steps", "32", "--update_epochs", "1",
            "--eval_episodes", "1", "--max_episode_steps", "5"]


def run(command: list[str], timeout_s: float = 120) -> str:
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout_s)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_ppo_gpu_runs_its_loop_on_cpus_and_saves_its_curve(tmp_path):
    """examples/ppo_gpu.py's loop (pixels and state into one policy, fixed timing, evaluation on fresh
    episodes) on the mujoco backend and CPU tensors: what it runs on a GPU with backend mjwarp."""
    out = tmp_path / "ppo_gpu"
    stdout = run([sys.executable, "examples/ppo_gpu.py", "--backend", "mujoco", "--device", "cpu", "--num_envs", "2",
                  "--num_steps", "8", "--total_steps", "32", "--update_epochs", "1", "--image_size", "32",
                  "--max_episode_steps", "5", "--out", str(out)], timeout_s=240)
    assert "success rate: trained" in stdout
    result = json.loads(out.with_suffix(".json").read_text())
    assert result["env_steps"] >= 32 and result["eval_episodes"] == 2
    assert set(result["eval_success_rate"]) == {"trained_policy", "random_policy"}
    assert (tmp_path / "ppo_gpu_curve.png").stat().st_size > 0


def check_ppo_reach(out: Path, stdout: str, mode: str, world: int, total_steps: int) -> None:
    """ppo_reach.py's result, run with TINY_PPO but --total_steps: two updates, every rank's steps counted."""
    assert "success rate: trained" in stdout
    result = json.loads(out.with_suffix(".json").read_text())
    assert result["world_size"] == world and result["args"]["autoreset_mode"] == mode
    assert [point["env_steps"] for point in result["curve"]] == [total_steps // 2, total_steps]
    # episodes end at the 5-step limit or sooner (success); next-step autoresets take a step of their own
    assert sum(point["episodes"] for point in result["curve"]) >= total_steps // 6
    assert set(result["eval_success_rate"]) == {"trained_policy", "random_policy"}
    assert (out.parent / f"{out.name}_curve.png").stat().st_size > 0


@pytest.mark.parametrize("mode", ["same_step", "disabled"])  # next_step: test_ppo_reach_under_torchrun
def test_ppo_reach_runs_and_saves_its_curve_in_each_autoreset_mode(tmp_path, mode):
    out = tmp_path / "ppo"
    stdout = run([sys.executable, "examples/ppo_reach.py", *TINY_PPO, "--autoreset_mode", mode, "--out", str(out)])
    check_ppo_reach(out, stdout, mode, world=1, total_steps=32)


def test_ppo_reach_under_torchrun(tmp_path):
    """Two ranks in next_step mode (the two other modes run on one rank above): the gradients all-reduced, both
    ranks' steps count towards the budget and their episodes towards the curve."""
    out = tmp_path / "ppo"
    stdout = run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                  "examples/ppo_reach.py", *TINY_PPO, "--total_steps", "64", "--autoreset_mode", "next_step",
                  "--out", str(out)])
    check_ppo_reach(out, stdout, "next_step", world=2, total_steps=64)
    assert json.loads(out.with_suffix(".json").read_text())["command"].startswith("torchrun --nproc_per_node 2")


@needs("ecosystem", "stable_baselines3")
def test_sb3_ppo_reach_runs_and_saves_its_curve(tmp_path):
    out = tmp_path / "sb3"
    stdout = run([sys.executable, "examples/sb3_ppo_reach.py", "--num_envs", "2", "--num_steps", "16",
                  "--total_steps", "64", "--update_epochs", "1", "--batch_size", "32", "--eval_episodes", "2",
                  "--max_episode_steps", "5", "--out", str(out)])
    assert "success rate: trained" in stdout
    result = json.loads(out.with_suffix(".json").read_text())
    assert [point["env_steps"] for point in result["curve"]] == [32, 64]
    assert sum(point["episodes"] for point in result["curve"]) >= 2 * (32 // 5)  # 5 steps at most each
    assert (tmp_path / "sb3_curve.png").stat().st_size > 0


def test_bc_from_demos_runs_and_saves_its_result(tmp_path):
    out = tmp_path / "bc.json"
    stdout = run([sys.executable, "examples/bc_from_demos.py", "--num_envs", "1", "--demos", "2", "--epochs", "2",
                  "--eval_episodes", "1", "--out", str(out)])
    assert "success rate: behaviour cloning" in stdout
    result = json.loads(out.read_text())
    assert result["demos"]["collected"] == 2
    assert set(result["eval_success_rate"]) == {"behaviour_cloning", "random_policy"}


def test_an_example_without_its_extra_says_what_to_install():
    """stable-baselines3 made unimportable: the example stops with the pip command of its extras."""
    hide_sb3 = ("import runpy, sys; sys.modules['stable_baselines3'] = None; sys.path.insert(0, 'examples'); "
                "sys.argv = ['examples/sb3_ppo_reach.py']; runpy.run_path(sys.argv[0], run_name='__main__')")
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run([sys.executable, "-c", hide_sb3], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "needs 'stable_baselines3', which is not installed: pip install -e \".[examples,ecosystem]\"" in done.stderr
