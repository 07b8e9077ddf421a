"""rlbench_vec.evaluate: the function and the command end to end on real backends at tiny image sizes: episodes'
assignment independent of num_envs and of the backend (mjwarp: two tasks in one vector env), the oracle's success,
videos of the first episodes, a policy from a file (invalid actions with their reasons), the run folder (a resume
after SIGKILL or a full disk, anything else refused, results rebuilt from the log), policies' programming errors
and backend errors, bad input in one line with nothing written."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path

import imageio.v2 as imageio
import numpy as np
import psutil
import pytest
from conftest import TORCHRUN, needs

from rlbench_vec.cli.evaluate import parse_args
from rlbench_vec.cli.evaluate_config import checked
from rlbench_vec.cli.evaluate_plan import EpisodeQueue, Planned
from rlbench_vec.cli.evaluate_report import repeat_scores
from rlbench_vec.cli.videos import whole_mp4
from rlbench_vec.datasets import read_episode
from rlbench_vec.datasets.stored_episodes import stored_task_episodes
from rlbench_vec.errors import ConfigError
from rlbench_vec.evaluate import EvaluateConfig, evaluate, rebuild
from rlbench_vec.spec import action_space

ROOT = Path(__file__).resolve().parent.parent
SMALL = {"cameras": ("front",), "image_size": (16, 16), "modalities": ("rgb",), "progress": False}
AGENT = textwrap.dedent("""
    import numpy as np

    def make_agent(env):
        space = env.single_action_space
        middle = (space.low + space.high) / 2  # inside the bounds in every arm mode
        kept = []  # what act() got in its last calls: it must not change after act() returned

        def act(obs, info):
            for given, copy in kept:
                for key, value in copy.items():
                    if not np.array_equal(given[key], value):
                        raise AssertionError(f"obs[{key!r}] changed after act() returned")
            kept[:] = [*kept[-3:], (obs, {key: np.array(value, copy=True) for key, value in obs.items()})]
            actions = np.tile(middle, (len(info["env_id"]), 1)).astype(np.float32)
            drawer = np.array([task == "open_drawer" for task in info["task"]])
            odd = np.array(info["episode"]) % 2 == 1
            actions[drawer & ~odd] = np.nan  # ends those as invalid
            actions[drawer & odd, 0] = 1e3  # outside the bounds: invalid too, never clipped
            return actions

        act.reset = lambda env_ids: None
        return act

    make_agent.identity = lambda: {"checkpoint": "step-600"}
""")


def records(out: Path) -> list[dict]:
    """The records of a run folder's log, and of its ranks' logs after it (a last line cut by a kill left out)."""
    return [json.loads(line) for path in (out / "log.jsonl", *sorted(out.glob("log.rank*.jsonl")))
            for line in path.read_text().split("\n")[:-1]]


def lines(out: Path) -> list[dict]:
    """The episode records of a run folder's log."""
    return [record for record in records(out) if record["record"] == "episode"]


def outcome(out: Path) -> list[tuple]:
    return sorted((e["task"], e["episode"], e["variation"], e["seed"], e["success"], e["steps"]) for e in lines(out))


def command(*args: str, launch: tuple[str, ...] = (sys.executable,)) -> subprocess.CompletedProcess:
    environ = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([*launch, "-m", "rlbench_vec.evaluate", *args], cwd=ROOT, capture_output=True,
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


def test_the_keyframe_policy_acts_each_episodes_own_demo_through_the_planner(tmp_path):
    """--policy keyframes: the episode's own oracle demo reduced to PerAct's keyframes, acted as 9-number planning
    actions (PerAct's ignore_collisions from the demo): pick_and_lift's approach, grasp, lift and target."""
    result = evaluate(EvaluateConfig(policy="keyframes", tasks=("pick_and_lift",), episodes=2, backend="mujoco",
                                     arm_mode="planning", ignore_collisions_flag=True, out=str(tmp_path), **SMALL))
    assert result["tasks"]["pick_and_lift"]["success_rate"] == 1
    assert all(3 <= e["steps"] <= 5 for e in lines(tmp_path)), [e["steps"] for e in lines(tmp_path)]
    with pytest.raises(ConfigError, match="--policy keyframes .* use --backend mujoco"):
        evaluate(EvaluateConfig(policy="keyframes", tasks=("reach_target",), backend="synthetic"))


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


def synthetic(tmp_path: Path, policy: str, episodes: int = 4, **options) -> list[str]:
    """The flags of a quick evaluation on the synthetic backend: two tasks, episodes of 2 steps."""
    return ["--policy", policy, "--tasks", "reach_target", "open_drawer", "--episodes", str(episodes),
            "--num_envs", "2", "--backend", "synthetic", "--cameras", "front", "--image_size", "16", "16",
            "--backend_options", json.dumps({"episode_length": 2, **options}), "--max_steps", "5",
            "--out", str(tmp_path / "out")]  # progress as whole lines (stderr is no terminal)


def x_bounds(args: list[str]) -> tuple[float, float]:
    """The bounds of the first action number of these flags' envs."""
    space = action_space(checked(parse_args(args)[0])[1])
    return float(space.low[0]), float(space.high[0])


def config_of(args: list[str], **changes) -> EvaluateConfig:
    config, _ = parse_args(args)
    return replace(config, progress=False, **changes)


def test_a_policy_file_killed_resumed_and_refused_for_anything_else(tmp_path):
    """A policy from a file whose NaN actions are invalid actions with a reason, that keeps what act() got (and
    would raise had it changed), killed with SIGKILL mid-run: a rerun with another seed, policy, episodes or an
    edited policy file is refused in one line naming what differs, nothing run; the same command resumes."""
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    out = tmp_path / "out"
    args = synthetic(tmp_path, f"{agent}:make_agent", episodes=8, step_cost_s=0.05)
    environ = {**os.environ, "PYTHONPATH": str(ROOT)}
    killed = subprocess.Popen([sys.executable, "-m", "rlbench_vec.evaluate", *args], cwd=ROOT, env=environ,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while killed.poll() is None and (not (out / "log.jsonl").exists() or len(lines(out)) < 3):
        time.sleep(0.05)
    killed.kill()
    killed.wait()
    before = (out / "log.jsonl").read_bytes()
    shutil.copytree(out, tmp_path / "killed")
    assert 3 <= len(lines(out)) < 16 and not (out / "results.json").exists()
    for change, said in [({"seed": 7}, "seed 0 then, 7 now"), ({"policy": "random"}, f'policy "{agent}:make_agent" '
                         'then, "random" now'), ({"episodes": 5}, "episodes 8 then, 5 now")]:
        with pytest.raises(ConfigError, match=re.escape(said)):
            evaluate(config_of(args, **change))
    agent.write_text(AGENT + "# fixed\n")
    refused = command(*args)
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert "the policy's sha256" in refused.stderr and "resume with the same command" in refused.stderr
    assert (out / "log.jsonl").read_bytes() == before  # nothing ran, nothing was written
    agent.write_text(AGENT)
    resumed = command(*args)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{len(lines(tmp_path / 'killed'))} of 16 episodes are already there" in resumed.stderr
    assert sorted((e["task"], e["episode"]) for e in lines(out)) == [
        (task, k) for task in ("open_drawer", "reach_target") for k in range(8)]
    assert "| reach_target | 100.0 |" in resumed.stdout and "| open_drawer | 0.0 |" in resumed.stdout
    assert "8 episodes ended as invalid actions" in resumed.stdout
    assert {e["invalid_action"] for e in lines(out) if e["task"] == "open_drawer"} == {
        "policy: NaN or inf in the action",
        "policy: action[0] = 1000 is outside the action space's bounds [{:.6g}, {:.6g}]".format(*x_bounds(args))}
    result = json.loads((out / "results.json").read_text())
    assert result["invalid_actions"] == 8 and result["finished"] and len(result["runs"]) == 2
    assert result["num_envs"] == 2 and result["policy_identity"]["factory"] == {"checkpoint": "step-600"}
    # a repeated and an out-of-plan record in the log: neither counts, and the results rebuild from the log alone
    episodes = lines(out)
    with (out / "log.jsonl").open("a") as log:
        for extra in ({**episodes[0], "success": not episodes[0]["success"]}, {**episodes[0], "episode": 8}):
            log.write(json.dumps({"record": "episode", **extra}) + "\n")
    (out / "results.json").unlink()
    assert rebuild(out) == json.loads((out / "results.json").read_text()) == {**result, "ignored_log_records": 2}
    assert resumed.stdout.startswith((out / "results.md").read_text())


@pytest.mark.parametrize("body, status, said", [
    ("return np.zeros((len(info['env_id']), 3))", 2, r"returned actions of shape \(\d, 3\); expected \(\d, 8\)"),
    ("calls.append(1)\n    if len(calls) > 6: raise ValueError('weights not loaded')\n"
     "    return np.zeros((len(info['env_id']), 8))", 1,
     "the policy's act.obs, info. raised ValueError: weights not loaded; finished episodes are kept; run the "
     "same command to resume"),
])
def test_a_policy_that_raises_or_returns_the_wrong_shape_stops_the_run_in_one_line(tmp_path, body, status, said):
    (tmp_path / "bad.py").write_text(f"import numpy as np\ncalls = []\n\ndef act(obs, info):\n    {body}\n\n"
                                     "def make():\n    return act\n")
    done = command(*synthetic(tmp_path, f"{tmp_path / 'bad.py'}:make"))
    assert done.returncode == status and "Traceback" not in done.stderr, done.stderr
    assert re.search(said, done.stderr.strip().splitlines()[-1]), done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("python -m rlbench_vec.evaluate: error: ")
    kept = lines(tmp_path / "out")  # the episodes before the error, none from a wrong shape
    assert (len(kept) > 0) == (status == 1)
    assert json.loads((tmp_path / "out" / "results.json").read_text())["finished"] is False


def test_a_backend_error_fails_its_episode_and_the_run_goes_on(tmp_path):
    result = evaluate(config_of(synthetic(tmp_path, "random", episodes=2, raise_at_step=1)))
    assert result["finished"] and result["backend_errors"] == 4 and result["mean_success"] == 0
    assert {e["backend_error"] for e in lines(tmp_path / "out")} == {"RuntimeError: synthetic failure at step 1"}


def test_a_full_disk_stops_in_one_line_and_the_rerun_scores_as_an_uninterrupted_run(small_disk, tmp_path):
    """Random actions (seeded from --seed, per episode) on a disk with room for a few episodes' videos and
    records: one line, exit 1, every file whole; with room again the same command completes with the same
    per-episode outcomes as an uninterrupted run at another number of envs."""
    args = ["--policy", "random", "--tasks", "reach_target", "--episodes", "12", "--backend", "mujoco",
            "--cameras", "front", "--image_size", "16", "16", "--modalities", "rgb", "--max_steps", "3",
            "--video", "12", "--num_envs", "1", "--out", str(small_disk / "out")]
    free = os.statvfs(small_disk)
    (small_disk / "filler").write_bytes(bytes(free.f_bavail * free.f_frsize - 12288))
    full = command(*args)
    assert full.returncode == 1, full.stderr
    last = full.stderr.strip().splitlines()[-1]
    assert "is full" in last and "run the same command again to resume" in last and "Traceback" not in full.stderr
    out = small_disk / "out"
    assert (out / "log.jsonl").read_bytes().endswith(b"\n") and 0 < len(lines(out)) < 12
    assert not [path.name for path in out.rglob("*") if path.name.endswith(".tmp")]
    (small_disk / "filler").unlink()
    assert command(*args).returncode == 0
    for video in (out / "videos").iterdir():
        assert video.stat().st_size > 0 and whole_mp4(video), video
    evaluate(config_of(args, out=str(tmp_path / "whole"), video=0, num_envs=2))
    assert outcome(out) == outcome(tmp_path / "whole") and len(lines(out)) == 12
    reasons = {e.get("invalid_action") for e in lines(out)} - {None}
    assert all(r.startswith("robot: ") for r in reasons), reasons  # random samples stay inside the bounds


@pytest.mark.parametrize("args, message", [
    (["--tasks", "reach_targte"], "unknown task 'reach_targte'.*'reach_target'"),
    (["--policy", "missing_module_xyz:make"], "does not load: ModuleNotFoundError"),
    (["--policy", "oracle", "--backend", "synthetic"], "oracle"),
    (["--backend_options", '{"shaped_rewards": true}'], "leave shaped_rewards unset"),
    (["--report_only"], "holds no evaluation's log"),
    (["--backend_options", '{"dense_rewards": true}'], "leave dense_rewards unset"),
    (["--episodes_from", "no_such_dataset"], "--episodes_from no_such_dataset: no such folder"),
])
def test_bad_input_says_what_in_one_line_and_writes_nothing(tmp_path, args, message):
    done = command("--out", str(tmp_path / "out"), "--backend", "mujoco", *args)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert re.search(message, done.stderr), done.stderr
    assert not (tmp_path / "out").exists()


@needs("torch", "torch")
def test_two_ranks_under_torchrun_score_each_episode_as_one_process_does(tmp_path):
    """torchrun, two ranks on the CPU, mujoco: the episodes dealt between the ranks, each appending to its own log,
    with the per-episode outcomes of one process; rank 0 alone shows the progress, prints and writes the results,
    of the whole job."""
    args = ["--policy", "oracle", "--tasks", "push_button", "reach_target", "--episodes", "3", "--backend", "mujoco",
            "--cameras", "front", "--image_size", "16", "16", "--modalities", "rgb", "--out", str(tmp_path / "two")]
    done = command(*args, launch=tuple(TORCHRUN))
    assert done.returncode == 0, done.stderr
    one = evaluate(config_of(args, out=str(tmp_path / "one"), num_envs=2))
    assert outcome(tmp_path / "two") == outcome(tmp_path / "one") and len(lines(tmp_path / "two")) == 6
    assert {e["rank"] for e in lines(tmp_path / "two")} == {0, 1}
    result = json.loads((tmp_path / "two" / "results.json").read_text())
    assert result["tasks"] == one["tasks"] and result["finished"] and result["num_envs"] == 2
    assert [(run["world_size"], run["num_envs"], run["episodes"]) for run in result["runs"]] == [(2, 2, 6)]
    table = (tmp_path / "two" / "results.md").read_text()
    assert done.stdout.count("| **mean** |") == 1 and done.stdout.startswith(table)
    assert "done: 6/6 episodes" in done.stderr and done.stderr.count("done: ") == 1  # rank 0's, of both ranks


SLOW_RANK = textwrap.dedent("""
    import os
    import time

    import numpy as np

    def make_agent(env):
        size = env.single_action_space.shape[0]

        def act(obs, info):
            if os.environ.get("RANK") == "1":
                time.sleep(0.2)  # rank 1 of a torchrun job: slow enough to be killed mid-job
            return np.zeros((len(info["env_id"]), size), np.float32)

        act.reset = lambda env_ids: None
        return act
""")


@needs("torch", "torch")
def test_a_rank_killed_mid_job_fails_the_job_and_one_process_resumes_it(tmp_path):
    """SIGKILL to rank 1 of a torchrun evaluation: the job fails naming the rank; one process (at another number of
    envs) runs only the episodes no log holds, with the per-episode outcomes of an uninterrupted run."""
    agent = tmp_path / "agent.py"
    agent.write_text(SLOW_RANK)
    args = synthetic(tmp_path, f"{agent}:make_agent", episodes=6)
    args[args.index("--num_envs") + 1] = "1"  # per rank
    out = tmp_path / "out"
    job = subprocess.Popen([*TORCHRUN, "-m", "rlbench_vec.evaluate", *args], cwd=ROOT, text=True,
                           env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    rank_log = out / "log.rank1.jsonl"
    while job.poll() is None and (not rank_log.exists() or '"episode"' not in rank_log.read_text()):
        time.sleep(0.05)
    ranks = [p for p in psutil.Process(job.pid).children(recursive=True) if p.environ().get("RANK") == "1"]
    next(p for p in ranks if p.parent().pid not in {r.pid for r in ranks}).kill()  # the rank, not its workers
    _, stderr = job.communicate(timeout=120)
    assert job.returncode != 0 and "rank: 1" in stderr and "[rank0]: Traceback" not in stderr, stderr
    left = 12 - len(lines(out))
    assert 0 < left <= 11 and json.loads((out / "results.json").read_text())["finished"] is False  # by rank 0
    resumed = evaluate(config_of(args, num_envs=3))
    whole = evaluate(config_of(args, out=str(tmp_path / "whole"), num_envs=2))
    assert outcome(out) == outcome(tmp_path / "whole") and resumed["finished"] and resumed["ignored_log_records"] == 0
    assert [run["world_size"] for run in resumed["runs"]] == [2, 1] and resumed["runs"][1]["episodes"] == left
    assert resumed["tasks"] == whole["tasks"]


FIRST_OBSERVATIONS = textwrap.dedent("""
    import json
    import numpy as np

    def make_policy(env, record):
        size = env.single_action_space.shape[0]
        firsts = {}

        def act(obs, info):
            for row, step in enumerate(info["step"]):
                if step == 0:
                    firsts[f"{info['task'][row]} {info['episode'][row]} {info['repeat'][row]}"] = {
                        "joint_positions": obs["joint_positions"][row].tolist(),
                        "task_low_dim_state": obs["task_low_dim_state"][row].tolist(),
                        "variation_index": info["variation_index"][row], "descriptions": info["descriptions"][row],
                        "extrinsics": obs["front_camera_extrinsics"][row].shape}
            with open(record, "w") as file:
                json.dump(firsts, file)
            return np.full((len(info["env_id"]), size), np.nan, np.float32)  # each episode ends at its first action

        return act
""")


def test_stored_episodes_start_as_their_demos_did_in_each_repeat_and_results_rebuild(stored_dataset, tmp_path):
    """--episodes_from on mujoco: episode k of a task is its k-th stored one (--episodes caps them), with its
    variation and descriptions, its first observation the stored first frame (joint positions, task state); two
    repeats, each scored and summed up as mean and spread; the log alone rebuilds results.json, and a changed
    dataset is refused."""
    dataset = tmp_path / "test"
    shutil.copytree(stored_dataset, dataset)
    (tmp_path / "first.py").write_text(FIRST_OBSERVATIONS)
    record, out = tmp_path / "first.json", tmp_path / "out"
    config = EvaluateConfig(policy=f"{tmp_path / 'first.py'}:make_policy", policy_args={"record": str(record)},
                            tasks=("reach_target", "push_button"), episodes=2, episodes_from=str(dataset), repeats=2,
                            num_envs=2, backend="mujoco", out=str(out), **SMALL)
    result = evaluate(config)
    firsts = json.loads(record.read_text())
    assert len(firsts) == len(lines(out)) == 8 and result["finished"] and result["episodes_per_task"] == 2
    for task in config.tasks:
        for k, stored in enumerate(stored_task_episodes(dataset, task)[:2]):
            demo = read_episode(stored.path)
            for repeat in (0, 1):
                first = firsts[f"{task} {k} {repeat}"]
                assert first["variation_index"] == stored.variation == demo.variation_index
                assert first["descriptions"] == demo.descriptions and first["extrinsics"] == [4, 4]
                np.testing.assert_allclose(first["joint_positions"], demo.observations["joint_positions"][0],
                                           atol=1e-6)
                state = demo.observations["task_low_dim_state"][0]
                np.testing.assert_allclose(first["task_low_dim_state"][:len(state)], state, atol=1e-6)
    assert sorted((e["task"], e["episode"], e["repeat"]) for e in lines(out)) == sorted(
        (task, k, r) for task in config.tasks for k in range(2) for r in range(2))
    assert [row["repeat"] for row in result["repeats"]] == [0, 1] and result["repeat_mean"] == {"mean": 0, "std": 0}
    assert result["dataset"]["episodes_from"] == str(dataset) and len(result["dataset"]["sha256"]) == 64
    assert "| reach_target | 0.0 | 0.0 | 0.0 | 0.0 |" in (out / "results.md").read_text()
    (out / "results.json").unlink()
    assert rebuild(out) == result
    pickled = dataset / "push_button" / "all_variations" / "episodes" / "episode1" / "variation_descriptions.pkl"
    pickled.write_bytes(pickled.read_bytes().replace(b"push", b"poke"))
    with pytest.raises(ConfigError, match="the dataset's sha256 .* then, .* now"):
        evaluate(config)


def test_repeats_mean_and_spread():
    def episodes(repeat: int, wins: int) -> list[dict]:
        return [{"task": "t", "repeat": repeat, "success": k < wins} for k in range(4)]

    spread = repeat_scores(["t"], 2, episodes(0, 2) + episodes(1, 4))
    assert [row["tasks"]["t"] for row in spread["repeats"]] == [0.5, 1.0]
    assert spread["repeat_mean"] == spread["repeat_tasks"]["t"] == {"mean": 0.75, "std": 0.3536}


@pytest.mark.skipif(shutil.which("Xvfb") is None, reason="the RLBench double needs Xvfb (apt-get install xvfb)")
def test_stored_episodes_on_the_rlbench_backend_reset_to_demo_i(stored_dataset, monkeypatch, tmp_path):
    """The rlbench backend through its test double: episode i is stored demo i of all_variations, asked for as
    YARR does (set_variation(-1), from_episode_number=i) and started by reset_to_demo, in its variation."""
    double = ROOT / "tests" / "rlbench_double"
    monkeypatch.syspath_prepend(str(double))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(double), str(ROOT)]))
    monkeypatch.setenv("RLBENCH_DOUBLE_LOG", str(tmp_path / "double.jsonl"))
    out = tmp_path / "out"
    evaluate(EvaluateConfig(policy="random", tasks=("reach_target",), episodes=3, backend="rlbench", num_envs=2,
                            arm_mode="planning", max_steps=1, episodes_from=str(stored_dataset), out=str(out),
                            **SMALL))
    calls = [json.loads(line) for line in (tmp_path / "double.jsonl").read_text().splitlines()]
    asked = sorted((c["from_episode_number"], c["variation"], c["random_selection"]) for c in calls
                   if c["event"] == "get_demos")
    assert asked == [(0, -1, False), (1, -1, False), (2, -1, False)]
    stored = stored_task_episodes(stored_dataset, "reach_target")
    assert sorted((e["episode"], e["variation"]) for e in lines(out)) == [
        (k, episode.variation) for k, episode in enumerate(stored)]
    assert sum(c["event"] == "reset" and c.get("demo") for c in calls) == 3


def test_the_peract_protocol_sets_its_flags_and_given_flags_win():
    config, _ = parse_args(["--protocol", "peract", "--out", "o", "--episodes", "5", "--policy_args", '{"a": 1}'])
    assert (config.tasks, config.episodes, config.max_steps, config.arm_mode, config.image_size) == (
        ("peract18",), 5, 25, "planning", (128, 128))
    assert config.cameras == ("front", "left_shoulder", "right_shoulder", "wrist") and config.ignore_collisions_flag
    assert config.modalities == ("rgb", "point_cloud") and config.policy_args == {"a": 1}
    assert EvaluateConfig.of_protocol("peract", episodes=5, out="o", policy_args={"a": 1}) == config
