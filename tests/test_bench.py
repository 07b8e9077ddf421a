"""python -m rlbench_vec.bench: flags, valid random actions, the JSON summary, recording."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import types

import numpy as np
import pytest
from conftest import communicate_or_explain, needs, with_faulthandler
from test_video import mujoco_available

from rlbench_vec.cli import bench, bench_actions, bench_report
from rlbench_vec.config import CAMERAS, EnvConfig
from rlbench_vec.distributed import RankInfo

SYNTHETIC = ["--backend", "synthetic", "--quiet"]


def test_defaults_are_the_original_tools():
    args = bench.parse_args([])
    assert args.backend == "auto" and args.task == "reach_target" and args.arm_mode == "ik"
    assert args.steps == 100 and args.action_chunk == 1 and args.copy_obs == 0 and not args.record
    assert list(args.image_size) == [128, 128] and args.cameras == list(CAMERAS) and not args.async_
    assert bench.parse_args(["--min_envs", "3"]).async_, "--min_envs implies --async"
    assert bench.default_num_envs(RankInfo(local_world_size=1)) == len(os.sched_getaffinity(0))


def fake_env(arm_mode: str, absolute_mode: bool = True, gripper_mode: str = "discrete"):
    config = EnvConfig(backend="synthetic", arm_mode=arm_mode, absolute_mode=absolute_mode,
                       gripper_mode=gripper_mode).validated()
    space = types.SimpleNamespace(shape=(8,))
    return types.SimpleNamespace(env_config=config, single_action_space=space)


def observation(m: int) -> dict[str, np.ndarray]:
    pose = np.tile([0.3, 0.0, 1.1, 0.0, 1.0, 0.0, 0.0], (m, 1))
    return {"gripper_pose": pose, "gripper_open": np.ones(m), "joint_positions": np.zeros((m, 7)),
            "gripper_joint_positions": np.full((m, 2), 0.04)}


@pytest.mark.parametrize("arm_mode", ["ik", "planning"])
def test_pose_actions_stay_near_the_gripper_with_unit_quaternions(arm_mode):
    actions = bench_actions.ActionSampler(fake_env(arm_mode), chunk=16, seed=0)(observation(5))
    assert actions.shape == (5, 16, 8) and actions.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(actions[..., 3:7], axis=-1), 1.0, atol=1e-5)
    assert np.abs(actions[..., :3] - [0.3, 0.0, 1.1]).max() < 0.2
    assert set(np.unique(actions[..., 7])) <= {0.0, 1.0}


def test_joint_and_delta_actions_are_small():
    for arm_mode, absolute in (("joint_velocity", True), ("joint_position", True), ("joint_position", False),
                               ("ik", False)):
        sample = bench_actions.ActionSampler(fake_env(arm_mode, absolute, "joint_position"), chunk=1, seed=0)
        actions = sample(observation(4))
        assert np.abs(actions[..., :3]).max() < 0.5, arm_mode
        assert ((actions[..., 7] >= 0) & (actions[..., 7] <= 0.04)).all()


def run_json(tmp_path, *flags: str) -> dict:
    path = tmp_path / "bench.json"
    bench.main([*flags, "--json", str(path)])
    return json.loads(path.read_text())


def test_sync_run_writes_throughput_and_time_split(tmp_path):
    result = run_json(tmp_path, *SYNTHETIC, "--num_envs", "2", "--steps", "30",
                      "--backend_options", '{"step_cost_s": 0.001}')
    assert result["num_envs"] == 2 and result["steps"] == 30 and result["world_size"] == 1
    assert result["env_steps"] == 60 and result["sps"] == pytest.approx(60 / result["elapsed_s"])
    assert result["exec_ms"] >= 1.0, "a 1 ms step cost shows as worker execution"
    parts = result["exec_ms"] + result["write_ms"] + result["ipc_ms"] + result["reset_ms"]
    assert parts <= 1000 * result["elapsed_s"] * result["num_envs"] / result["env_steps"], "shares of the wall time"
    assert 0 < result["startup_s"] < 60 and result["rss_worker_mb_max"] > 10 and result["workers"] == 2
    assert result["cpu_workers_cores"] > 0.1, "workers burning 1 ms per step use CPU"
    assert result["command"].startswith("python -m rlbench_vec.bench --backend synthetic")


def test_async_chunked_run_through_episode_ends(tmp_path):
    result = run_json(tmp_path, *SYNTHETIC, "--num_envs", "3", "--steps", "20", "--action_chunk", "4",
                      "--min_envs", "1", "--max_episode_steps", "7")
    assert result["async"] and result["min_envs"] == 1 and result["action_chunk"] == 4
    # 15 commands of 4 actions (+ those in flight at the end); per 7-step episode: 4 + 3 actions, then
    # a command that only autoresets
    assert 15 * 4 * 7 / 12 - 4 <= result["env_steps"] <= (15 + 3) * 4
    assert result["resets"] > 0


@needs("gpu", "warp", "mujoco_warp", "torch")
def test_an_mjwarp_profile_shows_each_phase_per_env_step_within_the_step(tmp_path, capsys):
    with pytest.raises(SystemExit):
        bench.parse_args(["--backend", "mujoco", "--profile"])  # the phases are the mjwarp simulator's
    # two cameras at 16x16; the first timed step ends its episode (max_episode_steps 2 after the warm-up
    # step), so a reset falls inside the timed window, and the last does not (no reset after it)
    result = run_json(tmp_path, "--backend", "mjwarp", "--backend_options", '{"device": "cpu"}', "--num_envs", "2",
                      "--steps", "2", "--max_episode_steps", "2", "--task", "pick_and_lift", "--arm_mode",
                      "joint_velocity", "--action_timing", "fixed", "--image_size", "16", "16", "--cameras", "front",
                      "wrist", "--modalities", "rgb", "depth", "mask", "--quiet", "--profile")
    conversions = [f"convert {camera} {kind}" for camera in ("front", "wrist") for kind in ("rgb", "depth", "mask")]
    expected = {"physics", "controllers and fault checks", "forward kinematics", "conditions", "render: bvh refit",
                "render: ray tracing (all cameras, one launch)", *conversions, "low-dim state",
                "write into the result pages", "reset: episode draw (host)", "reset: upload and kernels"}
    phases = result["phases_ms"]
    assert set(phases) == expected and all(ms > 0 for ms in phases.values()), phases
    assert result["resets"] == 2 and result["env_steps"] > 0
    assert result["step_ms"] == pytest.approx(1000 * result["elapsed_s"] / result["env_steps"])
    assert sum(phases.values()) <= result["step_ms"] and result["unprofiled_ms"] >= 0, "phases lie within the step"
    summary = capsys.readouterr().out
    assert all(name in summary for name in [*expected, "rest: host, launches, engine, IPC"]), summary


def test_cli_entry_point_prints_the_summary():
    out = subprocess.run([sys.executable, "-m", "rlbench_vec.bench", *SYNTHETIC, "--num_envs", "1", "--steps", "5"],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    assert "env-steps/s" in out and "IPC wait" in out and "startup" in out


@pytest.mark.skipif(not mujoco_available(), reason="the MuJoCo backend is not usable here")
def test_mujoco_survives_invalid_actions_and_records(tmp_path, monkeypatch):
    """Wild targets (1 m of noise) leave the workspace: episodes end with info["error"], the bench goes on."""
    monkeypatch.setattr(bench_actions, "POSITION_NOISE_M", 1.0)
    video_dir = tmp_path / "videos"
    result = run_json(tmp_path, "--backend", "mujoco", "--quiet", "--num_envs", "2", "--steps", "6",
                      "--cameras", "front", "wrist", "--image_size", "32", "32", "--record",
                      "--video_dir", str(video_dir), "--video_envs", "0")
    assert result["invalid_actions"] > 0 and result["resets"] > 0
    assert result["record"] and os.listdir(video_dir)
    assert all(name.startswith("env000_") for name in os.listdir(video_dir))


def spawned_workers(main) -> list:
    """The bench's worker processes (its resource tracker is a child too)."""
    return [child for child in main.children(recursive=True) if "spawn_main" in " ".join(child.cmdline())]


@pytest.mark.parametrize("stop, status, word", [(signal.SIGINT, 130, "interrupted"),
                                                 (signal.SIGTERM, 143, "terminated")])
def test_ctrl_c_or_sigterm_ends_the_bench_with_one_line_and_nothing_left(stop, status, word):
    import psutil

    bench_process = subprocess.Popen(
        [sys.executable, "-m", "rlbench_vec.bench", "--backend", "synthetic", "--num_envs", "4", "--envs_per_worker",
         "2", "--steps", "10000000", "--backend_options", '{"step_cost_s": 0.001}'],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=with_faulthandler())
    main = psutil.Process(bench_process.pid)
    deadline = time.monotonic() + 60
    while len(spawned_workers(main)) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(2.0)  # stepping by now
    workers = spawned_workers(main)
    assert len(workers) == 2
    bench_process.send_signal(stop)
    _, stderr = communicate_or_explain(bench_process, 60, workers)
    assert bench_process.returncode == status
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
    assert "leaked" not in stderr, "the shared memory was closed, so Python's resource tracker has nothing to say"
    assert stderr.strip().splitlines()[-1] == f"python -m rlbench_vec.bench: {word}."
    psutil.wait_procs(workers, timeout=10)
    assert not [w for w in workers if w.is_running() and w.status() != psutil.STATUS_ZOMBIE]


def test_the_progress_bar_counts_the_workers_that_start():
    updates = []
    assert bench_report.Progress(enabled=False).task("starting workers")(1, 2) is None  # a no-op, as reported to
    bar = bench_report.Progress(enabled=True)
    starting = bar.task("starting workers")
    assert bar.bar is None  # nothing drawn before the first report: a refused config's error stands alone
    bar.bar = types.SimpleNamespace(add_task=lambda description, total: 0,
                                    update=lambda task, **fields: updates.append(fields))
    starting(1, 2)
    bar.task("stepping", 8)(4)
    assert updates == [{"completed": 1, "total": 2}, {"completed": 4, "total": 8}]


def test_a_mujoco_summary_names_the_gpu_backend_where_it_can_run(tmp_path, monkeypatch, capsys):
    result = run_json(tmp_path, *SYNTHETIC, "--num_envs", "1", "--steps", "3", "--action_timing", "fixed")
    assert result["action_timing"] == "fixed"
    result["backend"] = "mujoco"
    for usable in (False, True):
        monkeypatch.setattr(bench_report.mjwarp, "usable_here", lambda usable=usable: usable)
        capsys.readouterr()
        bench_report.print_summary(result)
        assert ("--backend mjwarp is available" in capsys.readouterr().out) == usable
