"""The RLBench backend against a test double of rlbench/pyrep (tests/rlbench_double), through real
worker processes, each with its own Xvfb. CoppeliaSim itself is not involved anywhere here.

The double records what the backend asked of it (RLBENCH_DOUBLE_LOG) and enforces what the real one
enforces by crashing: an X display, and every simulator call on the thread that launched it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import psutil
import pytest

from rlbench_vec import RLBenchVectorEnv
from rlbench_vec.backends.rlbench import demo_actions, pose_delta
from rlbench_vec.config import EnvConfig
from rlbench_vec.errors import BackendUnavailableError, ConfigError, WorkerError
from rlbench_vec.spec import action_size, observation_spec
from test_display import wait_dead

REPO = Path(__file__).resolve().parents[1]
DOUBLE = Path(__file__).resolve().parent / "rlbench_double"
IDENTITY = [0.0, 1.0, 0.0, 0.0]  # the double's start orientation (x, y, z, w)
pytestmark = pytest.mark.skipif(shutil.which("Xvfb") is None, reason="needs Xvfb (apt-get install xvfb)")


@pytest.fixture
def double(monkeypatch, tmp_path):
    """Make the double importable for this test (its workers too) and return a reader of its log."""
    log = tmp_path / "double.jsonl"
    monkeypatch.syspath_prepend(str(DOUBLE))  # spawned workers start with the parent's sys.path...
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(DOUBLE), str(REPO)]))  # ...plain subprocesses with this
    monkeypatch.setenv("RLBENCH_DOUBLE_LOG", str(log))
    monkeypatch.delenv("RLBENCH_PER_PROCESS_XVFB", raising=False)

    def events(kind: str | None = None) -> list[dict]:
        records = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        return [r for r in records if kind is None or r["event"] == kind]

    yield events
    assert "rlbench" not in sys.modules and "pyrep" not in sys.modules, "the main process imported the simulator"


@pytest.fixture
def rlbench_env(make_env):
    """conftest's make_env (closed after the test, leak-checked) with small RLBench defaults."""
    def factory(**kwargs) -> RLBenchVectorEnv:
        settings = dict(num_envs=2, task="reach_target", backend="rlbench", cameras=("front",), image_size=(16, 12))
        return make_env(**{**settings, **kwargs})

    return factory


def xvfb_children(pid: int) -> list[int]:
    return [child.pid for child in psutil.Process(pid).children() if child.name() == "Xvfb"]


def pose_actions(num_envs: int) -> np.ndarray:
    actions = np.zeros((num_envs, 8), np.float32)
    actions[:, :3] = [0.3, 0.0, 1.2]
    actions[:, 3:7] = IDENTITY
    actions[:, 7] = 1.0
    return actions


def test_observations_config_mapping_and_episode_flow(double, rlbench_env):
    env = rlbench_env(
        cameras=("front", "wrist"), modalities=("rgb", "depth", "mask", "point_cloud"), image_size=(20, 12),
        low_dim=("joint_positions", "gripper_open", "gripper_matrix", "task_low_dim_state"), depth_in_meters=True,
        backend_options={"arm_max_velocity": 0.5, "static_positions": True, "shaped_rewards": True},
    )
    obs, info = env.reset(seed=3)
    # layout: RLBench's dtypes and (height, width) shapes, filled in place
    for key, spec in observation_spec(env.env_config).items():
        assert obs[key].shape == (2, *spec.shape) and obs[key].dtype == spec.dtype, key
    assert obs["front_rgb"].shape == (2, 12, 20, 3) and obs["front_rgb"].dtype == np.uint8
    assert obs["wrist_mask"].shape == (2, 12, 20) and obs["wrist_mask"].dtype == np.float32
    assert obs["front_point_cloud"].dtype == np.float64 and obs["task_low_dim_state"].shape == (2, 3)
    assert np.all(obs["front_depth"] > 1.0)  # depth_in_meters
    assert sorted(info["variation_index"]) == sorted(e["variation"] for e in double("reset"))
    assert all(d[0].startswith("reach the ") for d in info["descriptions"])

    launches, [environment, _], scenes = double("launch"), double("environment"), double("scene")
    assert len({e["display"] for e in launches}) == 2, "each worker should have its own Xvfb"
    assert all(e["headless"] and e["main_thread"] for e in launches)
    assert {tuple(e["removed_cameras"]) for e in scenes} == {("left_shoulder", "right_shoulder", "overhead")}
    obs_config = environment["obs_config"]
    front = obs_config["front_camera"]
    assert front == obs_config["wrist_camera"] and all(front[k] for k in ("rgb", "depth", "point_cloud", "mask"))
    assert front["image_size"] == [20, 12] and front["depth_in_meters"]
    assert front["masks_as_one_channel"] and front["render_mode"] == "OPENGL3"
    assert not any(obs_config["overhead_camera"][k] for k in ("rgb", "depth", "point_cloud", "mask"))
    # requested low-dim fields, plus the action sources of demos (gripper_pose for ik); nothing else
    flags = {k: obs_config[k] for k in ("joint_positions", "joint_velocities", "joint_forces", "gripper_open",
                                        "gripper_pose", "gripper_matrix", "gripper_joint_positions",
                                        "task_low_dim_state", "gripper_touch_forces")}
    assert flags == {"joint_positions": True, "joint_velocities": False, "joint_forces": False,
                     "gripper_open": True, "gripper_pose": True, "gripper_matrix": True,
                     "gripper_joint_positions": False, "task_low_dim_state": True, "gripper_touch_forces": False}
    assert environment["headless"] and environment["arm_max_velocity"] == 0.5 and environment["static_positions"]
    assert environment["shaped_rewards"] and environment["arm_max_acceleration"] == 4.0  # upstream default
    arm, gripper = environment["action_mode"]["arm_action_mode"], environment["action_mode"]["gripper_action_mode"]
    assert (environment["action_mode"]["class"], arm["class"], gripper["class"]) == (
        "MoveArmThenGripper", "EndEffectorPoseViaIK", "Discrete")
    assert arm["absolute_mode"] and not arm["collision_checking"]

    actions = pose_actions(2)
    _, reward, terminated, _, _ = env.step(actions)
    assert reward.dtype == np.float64 and np.all(reward < 0)  # shaped: minus the distance to the target
    before = {k: v.copy() for k, v in obs.items()}
    bad = actions.copy()
    bad[0, 3:7] = [0.5, 0.5, 0.0, 0.0]  # not a unit quaternion
    bad[1, 0] = 111  # the double raises a raw pyrep IKError
    obs, reward, terminated, truncated, info = env.step(bad)
    assert list(reward) == [0.0, 0.0] and list(terminated) == [True, True] and not truncated.any()
    assert info["error"][0].startswith("InvalidActionError: ") and info["error"][1].startswith("IKError: ")
    assert list(info["error_count"]) == [1, 1]
    for key in before:  # the observation before the failed action is kept
        np.testing.assert_array_equal(obs[key], before[key], err_msg=key)

    xvfbs = [pid for worker in env.worker_pids for pid in xvfb_children(worker)]
    assert len(xvfbs) == 2
    env.close()
    assert all(wait_dead(pid) for pid in xvfbs), "close() should stop every worker's Xvfb"


def test_recorded_cameras_keep_their_rgb_on_in_recording_workers_only(double, rlbench_env, tmp_path):
    from rlbench_vec.config import VideoConfig

    video = VideoConfig(directory=str(tmp_path), env_ids=(1,), cameras=("wrist",))
    env = rlbench_env(cameras=("front",), modalities=("depth",), low_dim=("gripper_open",), record=video)
    env.reset(seed=0)
    wrist_rgb = sorted(e["obs_config"]["wrist_camera"]["rgb"] for e in double("environment"))
    assert wrist_rgb == [False, True]  # env 0 does not record: its wrist camera stays off
    assert "wrist_rgb" not in env.single_observation_space.spaces


def test_a_killed_worker_takes_its_xvfb_along(double, rlbench_env):
    env = rlbench_env(num_envs=1, low_dim=("gripper_open",))
    env.reset(seed=0)
    [worker] = env.worker_pids
    [xvfb] = xvfb_children(worker)
    os.kill(worker, signal.SIGKILL)
    assert wait_dead(xvfb)
    _, _, _, truncated, info = env.step(pose_actions(1))  # the engine restarts the worker
    assert truncated[0] and info["restarted"][0]
    assert len(xvfb_children(env.worker_pids[0])) == 1


def test_episode_ends_with_success_and_variations(double, rlbench_env):
    env = rlbench_env(num_envs=1, modalities=("rgb",), low_dim=("gripper_pose",), backend_options={"variation": 4})
    _, info = env.reset(seed=0)
    assert info["variation_index"][0] == 4 and "blue" in info["descriptions"][0][0]
    for _ in range(4):
        _, reward, terminated, _, _ = env.step(pose_actions(1))
        assert reward[0] == 0.0 and not terminated[0]
    obs, reward, terminated, _, _ = env.step(pose_actions(1))  # the double's task succeeds at step 5
    assert reward[0] == 1.0 and terminated[0] and terminated.dtype == bool
    np.testing.assert_allclose(obs["gripper_pose"][0], [0.3, 0.0, 1.2, *IDENTITY])
    frames = env.render("front")
    assert frames.shape == (1, 12, 16, 3) and frames.dtype == np.uint8
    with pytest.raises(WorkerError, match="removes every camera that is off at launch"):
        env.render("overhead")
    _, info = env.reset(options={"variation": 7})
    assert info["variation_index"][0] == 7
    _, info = env.reset(seed=0)
    assert info["variation_index"][0] == 4  # the fixed variation again

    sampled = rlbench_env(num_envs=1, modalities=("rgb",), low_dim=("gripper_pose",))
    seen = {int(sampled.reset(seed=seed)[1]["variation_index"][0]) for seed in range(8)}
    assert len(seen) > 1, "variations should be sampled at every reset"
    again = {int(sampled.reset(seed=seed)[1]["variation_index"][0]) for seed in range(8)}
    assert again == seen, "a seed should give the same variation"


def test_reset_is_retried_after_task_environment_errors(double, monkeypatch, rlbench_env):
    monkeypatch.setenv("RLBENCH_DOUBLE_FAIL_RESETS", "2")  # the first two resets of each worker fail
    env = rlbench_env(num_envs=1, low_dim=("gripper_open",), backend_options={"reset_attempts": 2})
    with pytest.raises(WorkerError, match=r"(?s)TaskEnvironmentError.*failed 2 times in a row"):
        env.reset(seed=0)
    env.reset(seed=0)  # the third attempt succeeds
    assert [e["ok"] for e in double("reset")] == [False, False, True]


@pytest.mark.parametrize("arm_mode, absolute_mode", [("ik", False), ("joint_position", True)])
def test_demos_are_converted_and_replay_in_the_env_action_mode(double, rlbench_env, arm_mode, absolute_mode):
    env = rlbench_env(modalities=("rgb", "depth"), arm_mode=arm_mode, absolute_mode=absolute_mode,
                      low_dim=("gripper_pose", "joint_positions", "gripper_open"))
    demos = env.get_demos(3, seed=5)
    assert len(demos) == 3 and len(double("get_demos")) == 3
    size = action_size(env.env_config)
    for demo in demos:
        steps = len(demo.observations["front_rgb"])
        assert demo.actions.shape == (steps - 1, size) and demo.actions.dtype == np.float32
        assert demo.observations["front_depth"].shape == (steps, 12, 16) and demo.success
        _, info = env.reset(options={"variation": demo.variation_index})
        assert demo.descriptions == info["descriptions"][0]
    # replaying a demo's actions retraces its states
    demo = demos[0]
    env.reset(seed=1)
    arm_state = "gripper_pose" if arm_mode == "ik" else "joint_positions"
    for t, action in enumerate(demo.actions):
        obs, *_ = env.step(np.repeat(action[None], 2, axis=0))
        for key in (arm_state, "gripper_open"):
            np.testing.assert_allclose(obs[key][0], demo.observations[key][t + 1], atol=1e-5, err_msg=key)


def test_unknown_task_and_options_fail_in_the_main_process(double, rlbench_env):
    with pytest.raises(ConfigError, match=r"unknown RLBench task 'reach_targt'\. Did you mean 'reach_target'"):
        rlbench_env(task="reach_targt")
    with pytest.raises(ConfigError, match=r"Did you mean 'open_drawer'"):
        rlbench_env(task="OpenDrawers")
    with pytest.raises(ConfigError, match=r"unknown rlbench backend_options \['colour'\]; allowed: .*robot_setup"):
        rlbench_env(backend_options={"colour": "red"})
    with pytest.raises(ConfigError, match=r"Pass backend_options=\{'task_state_size': N\}"):
        rlbench_env(task="open_drawer", low_dim=("gripper_open", "task_low_dim_state"))
    # by default a task whose state length is unknown up front is observed without it
    assert "task_low_dim_state" not in EnvConfig(task="open_drawer", backend="rlbench").validated().low_dim
    assert "task_low_dim_state" in EnvConfig(task="reach_target", backend="rlbench").validated().low_dim
    with pytest.raises(ConfigError, match="defines no reward.*reach_target"):
        rlbench_env(task="open_drawer", low_dim=("gripper_open",), backend_options={"shaped_rewards": True})
    with pytest.raises(ConfigError, match="needs visual_randomization_config"):
        rlbench_env(backend_options={"randomize_every": "episode"})
    with pytest.raises(ConfigError, match="7 arm joints"):
        rlbench_env(backend_options={"robot_setup": "ur5"})
    assert double() == [], "no worker should have started"


def test_wrong_task_state_size_names_the_right_one(double, rlbench_env):
    env = rlbench_env(num_envs=1, task="OpenDrawer", low_dim=("task_low_dim_state",),
                      backend_options={"task_state_size": 5})
    assert env.single_observation_space["task_low_dim_state"].shape == (5,)
    with pytest.raises(WorkerError, match=r"length 17.*'task_state_size': 17"):
        env.reset(seed=0)


def test_missing_rlbench_is_reported_before_workers_start(monkeypatch, rlbench_env):
    monkeypatch.setattr(sys, "path", [p for p in sys.path if "rlbench_double" not in p])
    with pytest.raises(BackendUnavailableError, match="install_coppeliasim.sh"):
        rlbench_env()


# Every action and gripper mode, renderer and pass-through option, built directly in one subprocess
# (fast: one interpreter, one Xvfb) that prints what the double recorded for each.
MAPPING_SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    from rlbench_vec.backends.rlbench import RLBenchBackend
    from rlbench_vec.config import EnvConfig
    from rlbench_vec.display import open_display

    display = open_display(None, True, 0)
    os.environ["DISPLAY"] = display.name
    for case in json.loads(sys.argv[1]):
        config = EnvConfig(task="reach_target", backend="rlbench", cameras=("front",), low_dim=("gripper_open",),
                           **case).validated()
        RLBenchBackend.validate(config)
        backend = RLBenchBackend(config, 0)
        backend.close()
    display.close()
    """
)


def test_action_modes_renderer_and_environment_options_reach_rlbench(double, tmp_path):
    images = tmp_path / "textures"
    images.mkdir()
    cases = [
        dict(arm_mode="ik", absolute_mode=False, gripper_mode="joint_position",
             backend_options={"collision_checking": True, "attach_grasped_objects": False}),
        dict(arm_mode="planning", absolute_mode=True, renderer="opengl"),
        dict(arm_mode="joint_velocity", backend_options={"robot_setup": "sawyer", "frequency": 2}),
        dict(arm_mode="joint_position", absolute_mode=False, backend_options={
            "randomize_every": "episode", "visual_randomization_config": {"image_directory": str(images)},
            "dynamics_randomization_config": {"randomize_arm": False}, "dataset_root": str(tmp_path),
            "arm_max_acceleration": 2.0}),
    ]
    result = subprocess.run([sys.executable, "-c", MAPPING_SCRIPT, json.dumps(cases)], cwd=REPO,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    recorded = double("environment")
    modes = [(e["action_mode"]["arm_action_mode"], e["action_mode"]["gripper_action_mode"]) for e in recorded]
    assert [(arm["class"], arm.get("absolute_mode"), arm.get("collision_checking")) for arm, _ in modes] == [
        ("EndEffectorPoseViaIK", False, True), ("EndEffectorPoseViaPlanning", True, False),
        ("JointVelocity", None, None), ("JointPosition", False, None)]
    assert [(g["class"], g["attach_grasped_objects"], g.get("absolute_mode")) for _, g in modes] == [
        ("GripperJointPosition", False, True), ("Discrete", True, None), ("Discrete", True, None),
        ("Discrete", True, None)]
    assert recorded[0]["attach_grasped_objects"] is False
    assert recorded[1]["obs_config"]["front_camera"]["render_mode"] == "OPENGL"
    assert (recorded[2]["robot_setup"], recorded[2]["frequency"]) == ("sawyer", 2)
    last = recorded[3]
    assert last["randomize_every"] == "EPISODE" and last["arm_max_acceleration"] == 2.0
    assert last["visual_randomization_config"]["class"] == "VisualRandomizationConfig"
    assert last["dynamics_randomization_config"]["randomize_arm"] is False
    assert last["dataset_root"] == str(tmp_path)
    assert len(double("shutdown")) == len(cases)


def test_point_cloud_alone_is_delivered(double, rlbench_env):
    """RLBench makes a camera's point cloud only while its rgb or depth is on: depth is switched on too."""
    env = rlbench_env(num_envs=1, modalities=("point_cloud",), low_dim=("gripper_open",))
    obs, _ = env.reset(seed=0)
    assert obs["front_point_cloud"].shape == (1, 12, 16, 3) and np.all(obs["front_point_cloud"] > 0)
    front = double("environment")[0]["obs_config"]["front_camera"]
    assert (front["point_cloud"], front["depth"], front["rgb"]) == (True, True, False)


def test_demo_actions_invert_rlbench_delta_pose():
    """pose_delta is the inverse of RLBench's calculate_delta_pose (pyquaternion's w-first product)."""
    rng = np.random.default_rng(0)
    quats = rng.normal(size=(6, 4))
    quats /= np.linalg.norm(quats, axis=1, keepdims=True)
    poses = np.concatenate([rng.normal(size=(6, 3)), quats], axis=1)
    deltas = pose_delta(poses[:-1], poses[1:])
    for current, delta, target in zip(poses[:-1], deltas, poses[1:]):
        (aw, ax, ay, az), (bw, bx, by, bz) = np.roll(delta[3:], 1), np.roll(current[3:], 1)
        product = [aw * bx + ax * bw + ay * bz - az * by, aw * by - ax * bz + ay * bw + az * bx,
                   aw * bz + ax * by - ay * bx + az * bw, aw * bw - ax * bx - ay * by - az * bz]
        np.testing.assert_allclose(np.concatenate([delta[:3] + current[:3], product]), target, atol=1e-12)

    class Step:
        def __init__(self, joints, fingers):
            self.joint_velocities = joints
            self.gripper_joint_positions = fingers

    steps = [Step(np.full(7, t), np.array([0.01 * t, 0.03 * t])) for t in range(3)]
    config = EnvConfig(arm_mode="joint_velocity", gripper_mode="joint_position").validated()
    np.testing.assert_allclose(demo_actions(steps, config), [[1] * 7 + [0.02], [2] * 7 + [0.04]])
