"""rlbench_vec.evaluate: the function and the command end to end on real backends at tiny image sizes: episodes'
assignment independent of num_envs and of the backend (mjwarp: two tasks in one vector env), the oracle's success,
videos of the first episodes, a policy from a file (invalid actions counted), resume, bad input in one line with
nothing written."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import imageio.v2 as imageio
import pytest
from conftest import needs

from rlbench_vec.cli.evaluate_config import EpisodeQueue, Planned
from rlbench_vec.evaluate import EvaluateConfig, evaluate

ROOT = Path(__file__).resolve().parent.parent
SMALL = {"cameras": ("front",), "image_size": (16, 16), "modalities": ("rgb",), "progress": False}
AGENT = textwrap.dedent("""
    import numpy as np

    def make_agent(env):
        size = env.single_action_space.shape[0]

        class Agent:
            resets = 0

            def __call__(self, obs, info):
                actions = np.zeros((len(info["env_id"]), size), np.float32)
                actions[[task == "open_drawer" for task in info["task"]]] = np.nan  # ends those as invalid
                return actions

            def reset(self, env_ids):
                Agent.resets += len(env_ids)

        return Agent()
""")


def lines(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]


def outcome(out: Path) -> list[tuple]:
    return sorted((e["task"], e["episode"], e["variation"], e["seed"], e["success"], e["steps"]) for e in lines(out))


def command(*args: str) -> subprocess.CompletedProcess:
    environ = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "rlbench_vec.evaluate", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env=environ)


def test_the_oracle_scores_the_same_episodes_at_one_env_and_at_three(tmp_path):
    # push_button's task_low_dim_state is shorter than reach_target's: one env runs both, in this order
    config = EvaluateConfig(policy="oracle", tasks=("push_button", "reach_target"), episodes=3, backend="mujoco",
                            **SMALL)
    one = evaluate(EvaluateConfig(**{**config.__dict__, "num_envs": 1, "out": str(tmp_path / "one")}))
    three = evaluate(EvaluateConfig(**{**config.__dict__, "num_envs": 3, "out": str(tmp_path / "three")}))
    assert outcome(tmp_path / "one") == outcome(tmp_path / "three")
    assert [e["variation"] for e in lines(tmp_path / "one") if e["task"] == "push_button"] == [0, 1, 2]
    for result in (one, three):
        assert result["tasks"]["reach_target"]["success_rate"] == result["tasks"]["push_button"]["success_rate"] == 1
        assert result["mean_success"] == 1 and result["finished"]
    low, high = one["tasks"]["push_button"]["ci95"]
    assert 0.4 < low < 0.5 and high == 1.0  # Wilson's interval of 3 out of 3
    assert "| push_button | 100.0 |" in (tmp_path / "one" / "results.md").read_text()


def test_envs_keep_to_one_task_while_it_has_episodes_then_take_the_longest_queue():
    episodes = [Planned(task, k, 0, k) for task, count in (("a", 3), ("b", 1), ("c", 2)) for k in range(count)]
    queue = EpisodeQueue(episodes)
    # an env per task, the fourth to the task with the most episodes per env
    assert [(p.task, p.episode) for p in queue.first(4)] == [("a", 0), ("a", 1), ("b", 0), ("c", 0)]
    assert (queue.next("c").task, queue.next("b").task, len(queue)) == ("c", "a", 0)  # b is done: a has most left
    assert queue.next("a") is None
    pinned = EpisodeQueue(episodes, pinned=True)  # envs that cannot change task (mjwarp)
    pinned.first(2)
    assert pinned.next("b") is None and pinned.next("a").task == "a"


def test_video_keeps_the_first_episode_of_each_task_as_a_readable_mp4(tmp_path):
    out = tmp_path / "out"
    evaluate(EvaluateConfig(policy="oracle", tasks=("reach_target",), episodes=2, backend="mujoco", video=1,
                            out=str(out), **SMALL))
    assert sorted(os.listdir(out / "videos")) == ["reach_target_ep000.mp4"]  # the scratch folder is gone
    first = next(e for e in lines(out) if e["episode"] == 0)
    with imageio.get_reader(str(out / "videos" / "reach_target_ep000.mp4")) as reader:
        frames = [frame for frame in reader]
    assert len(frames) == first["steps"] + 1 and frames[0].shape == (16, 16, 3)  # the start, then each action


@needs("gpu", "warp", "mujoco_warp", "torch")
def test_the_oracle_on_mjwarp_scores_two_tasks_in_one_vector_env_as_on_mujoco(tmp_path):
    """mjwarp's worlds act the mujoco backend's oracle (planned on the host from each world's state): the same
    episodes (task, number, variation, seed, hence description) as the mujoco backend's run, all solved."""
    config = {"policy": "oracle", "tasks": ("reach_target", "pick_and_lift"), "episodes": 2, "num_envs": 2,
              "max_steps": 40, **SMALL}
    mjwarp = evaluate(EvaluateConfig(backend="mjwarp", backend_options={"device": "cpu"}, out=str(tmp_path / "w"),
                                     **config))
    evaluate(EvaluateConfig(backend="mujoco", out=str(tmp_path / "m"), **config))
    assert json.loads((tmp_path / "w" / "results.json").read_text())["finished"] and mjwarp["backend"] == "mjwarp"
    assert {task: (score["episodes"], score["success_rate"]) for task, score in mjwarp["tasks"].items()} == {
        "reach_target": (2, 1), "pick_and_lift": (2, 1)}

    def assignment(out: Path) -> list[tuple]:
        return sorted((e["task"], e["episode"], e["variation"], e["seed"], e["description"], e["success"])
                      for e in lines(out))

    assert assignment(tmp_path / "w") == assignment(tmp_path / "m")


@pytest.mark.skipif(shutil.which("Xvfb") is None, reason="the RLBench double needs Xvfb (apt-get install xvfb)")
def test_the_oracle_on_the_rlbench_backend_acts_rlbenchs_own_waypoints(monkeypatch, tmp_path):
    """The rlbench backend through its test double (CoppeliaSim cannot run here): the double's empty_container only
    succeeds for an oracle that follows its waypoints' gripper, abilities and repeats (tests/test_rlbench_backend.py);
    two envs share its episodes, each episode the double's 15 planned poses."""
    double = ROOT / "tests" / "rlbench_double"
    monkeypatch.syspath_prepend(str(double))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(double), str(ROOT)]))
    config = EvaluateConfig(policy="oracle", tasks=("empty_container",), episodes=3, backend="rlbench", num_envs=2,
                            arm_mode="planning", out=str(tmp_path / "out"), **SMALL)
    result = evaluate(config)
    assert result["tasks"]["empty_container"]["success_rate"] == 1 and result["backend"] == "rlbench"
    assert [(e["episode"], e["steps"]) for e in sorted(lines(tmp_path / "out"), key=lambda e: e["episode"])] == [
        (0, 15), (1, 15), (2, 15)]


def test_a_policy_from_a_file_with_invalid_actions_counted_and_a_resume(tmp_path):
    (tmp_path / "agent.py").write_text(AGENT)
    out = tmp_path / "out"
    args = ["--policy", f"{tmp_path / 'agent.py'}:make_agent", "--tasks", "reach_target", "open_drawer",
            "--episodes", "4", "--num_envs", "2", "--backend", "synthetic", "--cameras", "front",
            "--image_size", "16", "16", "--backend_options", '{"episode_length": 2}', "--max_steps", "5",
            "--out", str(out)]  # progress as whole lines (stderr is no terminal)
    done = command(*args)
    assert done.returncode == 0, done.stderr
    assert "| reach_target | 100.0 |" in done.stdout and "| open_drawer | 0.0 |" in done.stdout
    assert "4 episodes ended as invalid actions" in done.stdout
    result = json.loads((out / "results.json").read_text())
    assert result["invalid_actions"] == 4 and result["policy"].endswith("agent.py:make_agent")
    nan = "the policy returned NaN or inf"
    assert all(e["invalid_action"] == nan for e in lines(out) if e["task"] == "open_drawer")
    # a run stopped after 5 episodes, its last line cut: the rerun runs the 3 others and no episode twice
    kept = (out / "episodes.jsonl").read_text().splitlines()[:5]
    (out / "episodes.jsonl").write_text("\n".join(kept) + '\n{"task": "reach')
    again = command(*args)
    assert again.returncode == 0, again.stderr
    assert "5 of 8 episodes are already there" in again.stderr
    assert sorted((e["task"], e["episode"]) for e in lines(out)) == sorted(
        (task, k) for task in ("reach_target", "open_drawer") for k in range(4))
    changed = command(*[a if a != "4" else "5" for a in args])
    assert changed.returncode == 2 and "other arguments" in changed.stderr


@pytest.mark.parametrize("args, message", [
    (["--tasks", "reach_targte"], "unknown task 'reach_targte'.*'reach_target'"),
    (["--policy", "missing_module_xyz:make"], "does not load: ModuleNotFoundError"),
    (["--policy", "oracle", "--backend", "synthetic"], "oracle"),
    (["--backend_options", '{"shaped_rewards": true}'], "leave shaped_rewards unset"),
    (["--backend_options", '{"dense_rewards": true}'], "leave dense_rewards unset"),
])
def test_bad_input_says_what_in_one_line_and_writes_nothing(tmp_path, args, message):
    import re

    done = command("--out", str(tmp_path / "out"), "--backend", "mujoco", *args)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert re.search(message, done.stderr), done.stderr
    assert not (tmp_path / "out").exists()
