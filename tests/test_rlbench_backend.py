"""The RLBench backend against a test double of rlbench/pyrep (tests/rlbench_double), through real
worker processes, each with its own Xvfb. CoppeliaSim itself is not involved anywhere here.

The double records what the backend asked of it (RLBENCH_DOUBLE_LOG) and enforces what the real one
enforces by crashing: an X display (without one it aborts like Qt), and every simulator call on the
thread that launched it. Stored demos are written by the double's copy of RLBench's dataset generator
in upstream's on-disk layout and read back through upstream's reader.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import psutil
import pytest
from test_display import wait_dead

from rlbench_vec import RLBenchVectorEnv
from rlbench_vec.backends.rlbench.demos import demo_actions, pose_delta, pose_in_frame
from rlbench_vec.config import EnvConfig, VectorConfig
from rlbench_vec.engine.plan import make_plan
from rlbench_vec.errors import BackendUnavailableError, ConfigError, WorkerError
from rlbench_vec.spec import action_size, low_dim_fields, observation_spec

REPO = Path(__file__).resolve().parents[1]
DOUBLE = Path(__file__).resolve().parent / "rlbench_double"
IDENTITY = [0.0, 1.0, 0.0, 0.0]  # the double's start orientation (x, y, z, w)
FRONT = 4  # the front camera's index in the double's image stamps (10 * step + index)
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


# RLBench's dataset generator (the double's copy: same arguments, same layout), on its own Xvfb.
GENERATOR_SCRIPT = textwrap.dedent(
    """
    import os, sys
    from rlbench_vec.display import open_display

    display = open_display(None, True, 0)
    os.environ["DISPLAY"] = display.name
    from rlbench.dataset_generator import main
    sys.argv = ["rlbench-generate-dataset", *sys.argv[1:]]
    main()
    display.close()
    """
)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    """reach_target, variations 0 and 1, two episodes each, 16x12 images."""
    root = tmp_path_factory.mktemp("rlbench_data")
    args = ["--save_path", str(root), "--tasks", "reach_target", "--image_size", "16", "12",
            "--episodes_per_task", "2", "--variations", "2"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(DOUBLE), str(REPO)])}
    env.pop("RLBENCH_DOUBLE_LOG", None)
    result = subprocess.run([sys.executable, "-c", GENERATOR_SCRIPT, *args], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert (root / "reach_target" / "variation1" / "episodes" / "episode1" / "low_dim_obs.pkl").is_file()
    return root


def xvfb_children(pid: int) -> list[int]:
    return [child.pid for child in psutil.Process(pid).children() if child.name() == "Xvfb"]


def pose_actions(num_envs: int) -> np.ndarray:
    actions = np.zeros((num_envs, 8), np.float32)
    actions[:, :3] = [0.3, 0.0, 1.2]
    actions[:, 3:7] = IDENTITY
    actions[:, 7] = 1.0
    return actions


def back_project(depth_m: np.ndarray, extrinsics: np.ndarray, intrinsics: np.ndarray) -> np.ndarray:
    """World points of a metric depth image: pixel (column, row, 1) * depth through K^-1, then camera-to-world."""
    rows, columns = np.mgrid[:depth_m.shape[0], :depth_m.shape[1]]
    pixels = np.stack([columns, rows, np.ones_like(rows)], axis=-1) * depth_m[..., None]
    return np.einsum("ij,hwj->hwi", extrinsics[:3, :3] @ np.linalg.inv(intrinsics), pixels) + extrinsics[:3, 3]


def quaternion_matrix(q: np.ndarray) -> np.ndarray:
    x, y, z, w = q
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


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
    assert arm["absolute_mode"] and not arm["collision_checking"] and arm["frame"] == "WORLD"

    actions = pose_actions(2)
    obs, reward, terminated, _, _ = env.step(actions)
    assert reward.dtype == np.float64 and np.all(reward < 0)  # shaped: minus the distance to the target
    before = {k: v.copy() for k, v in obs.items()}
    bad = actions.copy()
    bad[0, 3:7] = [0.5, 0.5, 0.0, 0.0]  # not a unit quaternion
    bad[1, 0] = -0.0111  # the double raises a raw pyrep IKError
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


def test_misc_delivers_each_cameras_calibration(double, rlbench_env):
    """misc=True: RLBench's Observation.misc calibration of every observed camera, consistent with its
    point clouds, per step and in demos."""
    env = rlbench_env(num_envs=1, cameras=("front", "wrist"), modalities=("depth", "point_cloud"), misc=True,
                      image_size=(20, 12), depth_in_meters=True, low_dim=("gripper_pose",))
    obs, _ = env.reset(seed=0)
    for camera in ("front", "wrist"):
        extrinsics, intrinsics = obs[f"{camera}_camera_extrinsics"][0], obs[f"{camera}_camera_intrinsics"][0]
        near, far = obs[f"{camera}_camera_near"][0], obs[f"{camera}_camera_far"][0]
        assert extrinsics.shape == (4, 4) and intrinsics.shape == (3, 3) and near.shape == far.shape == ()
        assert obs[f"{camera}_camera_extrinsics"].dtype == np.float64 and 0 < near < far
        np.testing.assert_allclose(extrinsics[3], [0, 0, 0, 1])
        np.testing.assert_allclose(intrinsics[:2, 2], [10, 6])  # principal point: (width / 2, height / 2)
        np.testing.assert_allclose(obs[f"{camera}_point_cloud"][0],
                                   back_project(obs[f"{camera}_depth"][0].astype(np.float64), extrinsics, intrinsics),
                                   atol=1e-5, err_msg=camera)
    wrist_before = obs["wrist_camera_extrinsics"][0].copy()
    np.testing.assert_allclose(wrist_before[:3, 3], obs["gripper_pose"][0, :3])  # the wrist camera rides on the hand
    obs, *_ = env.step(pose_actions(1))
    assert not np.allclose(obs["wrist_camera_extrinsics"][0], wrist_before)
    np.testing.assert_allclose(obs["wrist_camera_extrinsics"][0, :3, 3], obs["gripper_pose"][0, :3])
    [demo] = env.get_demos(1, seed=0)
    steps = len(demo.actions) + 1
    assert demo.observations["front_camera_intrinsics"].shape == (steps, 3, 3)
    assert demo.observations["wrist_camera_near"].shape == (steps,)

    # a camera observed through its mask alone keeps its sensor (point_cloud on, nothing rendered), or
    # RLBench would drop it and its calibration
    masked = rlbench_env(num_envs=1, cameras=("overhead",), modalities=("mask",), misc=True, low_dim=("gripper_open",))
    obs, _ = masked.reset(seed=0)
    assert obs["overhead_camera_intrinsics"].shape == (1, 3, 3) and obs["overhead_camera_far"][0] > 0
    overhead = double("environment")[-1]["obs_config"]["overhead_camera"]
    assert (overhead["rgb"], overhead["depth"], overhead["point_cloud"], overhead["mask"]) == (False, False, True, True)


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


def test_a_worker_without_display_aborts_like_qt_and_start_fails_fast(double, rlbench_env):
    """Real Qt writes its message to stderr and aborts the process when it cannot reach the display
    (RLBench #139, #287): no Python exception. The double does the same."""
    free = next(n for n in range(4000, 4100) if not os.path.exists(f"/tmp/.X11-unix/X{n}"))
    expected = rf'(?s)qt\.qpa\.xcb: could not connect to display :{free}\b.*Could not load the Qt platform plugin "xcb"'
    direct = subprocess.run([sys.executable, "-c", "from pyrep import PyRep; PyRep().launch('', headless=True)"],
                            env={**os.environ, "DISPLAY": f":{free}"}, capture_output=True, text=True, timeout=30,
                            check=False)
    assert direct.returncode == -signal.SIGABRT and direct.stdout == ""
    assert re.search(expected, direct.stderr), direct.stderr

    from rlbench_vec.errors import WorkerStartError  # comes with the engine rewrite

    started = time.monotonic()
    with pytest.raises(WorkerStartError, match=expected):
        rlbench_env(num_envs=1, low_dim=("gripper_open",), display=f":{free}")
    assert time.monotonic() - started < 30, "a worker that died at start should fail the constructor at once"


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


@pytest.mark.parametrize("arm_mode, absolute_mode, frame", [
    ("ik", False, "world"), ("ik", False, "ee"), ("joint_position", True, "world"), ("joint_position", False, "world"),
])
def test_demos_are_converted_and_replay_in_the_env_action_mode(double, rlbench_env, arm_mode, absolute_mode, frame):
    env = rlbench_env(modalities=("rgb", "depth"), arm_mode=arm_mode, absolute_mode=absolute_mode,
                      low_dim=("gripper_pose", "joint_positions", "gripper_open"), backend_options={"frame": frame})
    demos = env.get_demos(3, seed=5)
    assert len(demos) == 3 and len(double("get_demos")) == 3
    assert double("environment")[0]["action_mode"]["arm_action_mode"].get("frame", "WORLD") == frame.upper()
    size = action_size(env.env_config)
    for demo in demos:
        steps = len(demo.observations["front_rgb"])
        assert demo.actions.shape == (steps - 1, size) and demo.actions.dtype == np.float32
        assert demo.observations["front_depth"].shape == (steps, 12, 16) and demo.success
        _, info = env.reset(options={"variation": demo.variation_index})
        assert demo.descriptions == info["descriptions"][0]
    demo = demos[0]
    if arm_mode == "joint_position":
        # the joint targets RLBench's planner commanded, not the positions reached one step later (the arm lags)
        joints = demo.observations["joint_positions"]
        reached = joints[1:] if absolute_mode else np.diff(joints, axis=0)
        assert not np.allclose(demo.actions[:, :7], reached, atol=1e-3)
    # replaying a demo's actions retraces its states
    env.reset(seed=1)
    arm_state = "gripper_pose" if arm_mode == "ik" else "joint_positions"
    for t, action in enumerate(demo.actions):
        obs, *_ = env.step(np.repeat(action[None], 2, axis=0))
        for key in (arm_state, "gripper_open"):
            np.testing.assert_allclose(obs[key][0], demo.observations[key][t + 1], atol=1e-5, err_msg=key)


def test_demos_of_a_chosen_variation_and_the_variation_count(double, rlbench_env, dataset):
    """get_demos(variation=v) sets v before RLBench's get_demos, live or stored, over the fixed variation; one out of
    range is a ConfigError naming the task's count; get_attr("variation_count") reads the started task's count. The
    reset that learns a new variation's descriptions leaves the seeded generators as they were."""
    env = rlbench_env(num_envs=1, modalities=("rgb",), low_dim=("gripper_open", "task_low_dim_state"),
                      backend_options={"variation": 4})
    assert env.get_attr("variation_count") == (20,)
    [demos] = env.call("get_demos", 2, 0, variation=7, ends_episode=True)  # the backend's own seed
    assert [demo.variation_index for demo in demos] == [7, 7] and "cyan" in demos[0].descriptions[0]
    [[again]] = env.call("get_demos", 1, 0, variation=7, ends_episode=True)  # variation 7 known now: no extra reset
    np.testing.assert_array_equal(again.observations["task_low_dim_state"], demos[0].observations["task_low_dim_state"])
    assert [call["variation"] for call in double("get_demos")] == [7, 7, 7]
    with pytest.raises(WorkerError, match=r"ConfigError: variation 20 does not exist: task 'reach_target' has 20 "):
        env.get_demos(1, seed=0, variation=20)
    assert env.get_demos(1, seed=0)[0].variation_index == 4  # the fixed one again

    stored = rlbench_env(num_envs=1, modalities=("rgb",), low_dim=("gripper_open",),
                         backend_options={"dataset_root": str(dataset)})
    assert {demo.variation_index for demo in stored.get_demos(2, seed=0, variation=1)} == {1}
    assert double("get_demos")[-1]["variation"] == 1


def test_stored_demos_and_resets_to_them(double, rlbench_env, dataset):
    """dataset_root: get_demos reads RLBench's stored episodes; reset(options={"demo": i, "variation": v})
    is RLBench's reset_to_demo, the episode's exact initial scene, from which its recorded actions
    replay it."""
    env = rlbench_env(num_envs=1, arm_mode="joint_position", modalities=("rgb", "depth"),
                      low_dim=("joint_positions", "gripper_open", "task_low_dim_state"),
                      backend_options={"dataset_root": str(dataset), "variation": 1})
    demos = env.get_demos(2, seed=0)
    [call] = double("get_demos")
    assert (call["live_demos"], call["random_selection"], call["amount"], call["variation"]) == (False, True, 2, 1)
    for demo in demos:
        assert demo.variation_index == 1 and demo.descriptions[0] == "reach the maroon target"
        stamps = (10 * np.arange(len(demo.actions) + 1) + FRONT) % 256  # the double's frames, read back from PNG
        np.testing.assert_array_equal(demo.observations["front_rgb"], np.broadcast_to(
            stamps[:, None, None, None], demo.observations["front_rgb"].shape))
        np.testing.assert_allclose(demo.observations["front_depth"][:, 0, 0], (100 + stamps) / 400, atol=1e-6)
    starts = {tuple(demo.observations["task_low_dim_state"][0]) for demo in demos}
    assert len(starts) == 2, "two different stored episodes"

    for episode in (0, 1):
        obs, info = env.reset(seed=7, options={"demo": episode, "variation": 1})
        call = double("get_demos")[-1]
        assert (call["live_demos"], call["image_paths"], call["random_selection"], call["from_episode_number"]) == (
            False, True, False, episode)
        assert double("reset")[-1]["demo"] and info["variation_index"][0] == 1
        assert info["descriptions"][0][0] == "reach the maroon target"
        start = tuple(obs["task_low_dim_state"][0])
        assert start in starts, "reset_to_demo should restore the stored episode's scene"
        [demo] = [d for d in demos if tuple(d.observations["task_low_dim_state"][0]) == start]
        for t, action in enumerate(demo.actions):
            obs, reward, terminated, *_ = env.step(action[None])
            np.testing.assert_allclose(obs["joint_positions"][0], demo.observations["joint_positions"][t + 1],
                                       atol=1e-6)
        assert terminated[0] and reward[0] == 1.0

    with pytest.raises(WorkerError, match="holds no episode 5 of variation 1"):
        env.reset(options={"demo": 5, "variation": 1})
    env.reset(seed=0)  # the env is usable again

    # without a fixed variation, stored demos come from the variations the dataset holds
    sampled = rlbench_env(num_envs=1, modalities=("rgb",), low_dim=("gripper_open",),
                          backend_options={"dataset_root": str(dataset)})
    assert {demo.variation_index for demo in sampled.get_demos(2, seed=1)} <= {0, 1}


@pytest.mark.skipif(np.lib.NumpyVersion(np.__version__) < "2.0.0", reason="the reader's mask bug needs NumPy >= 2")
def test_stored_masks_fail_with_the_reason(double, rlbench_env, dataset):
    env = rlbench_env(num_envs=1, modalities=("mask",), low_dim=("gripper_open",),
                      backend_options={"dataset_root": str(dataset)})
    with pytest.raises(WorkerError, match=r"uint8 arithmetic that NumPy >= 2 rejects"):
        env.get_demos(1, seed=0)


def test_per_env_resets_to_stored_demos(double, rlbench_env, dataset):
    """Needs the engine's per-env reset options (options["env_options"])."""
    env = rlbench_env(low_dim=("task_low_dim_state",), backend_options={"dataset_root": str(dataset)})
    starts = {}
    for variation, episode in ((1, 0), (0, 1)):
        obs, _ = env.reset(options={"demo": episode, "variation": variation})
        starts[variation, episode] = obs["task_low_dim_state"][0].copy()
        np.testing.assert_array_equal(obs["task_low_dim_state"][1], starts[variation, episode])
    obs, info = env.reset(options={"env_options": [{"demo": 0, "variation": 1}, {"demo": 1, "variation": 0}]})
    assert list(info["variation_index"]) == [1, 0]
    np.testing.assert_array_equal(obs["task_low_dim_state"][0], starts[1, 0])
    np.testing.assert_array_equal(obs["task_low_dim_state"][1], starts[0, 1])


def test_unknown_task_and_options_fail_in_the_main_process(double, rlbench_env, tmp_path):
    with pytest.raises(ConfigError, match=r"unknown RLBench task 'reach_targt'\. Did you mean 'reach_target'"):
        rlbench_env(task="reach_targt")
    with pytest.raises(ConfigError, match=r"Did you mean 'open_drawer'"):
        rlbench_env(task="OpenDrawers")
    with pytest.raises(ConfigError, match=r"unknown rlbench backend_options \['colour'\]; allowed: .*robot_setup"):
        rlbench_env(backend_options={"colour": "red"})
    with pytest.raises(ConfigError, match=r"Pass backend_options=\{'task_state_size': N\}"):
        rlbench_env(task="open_drawer", low_dim=("gripper_open", "task_low_dim_state"))
    # by default a task whose state length is unknown up front is observed without it
    assert "task_low_dim_state" not in low_dim_fields(EnvConfig(task="open_drawer", backend="rlbench").validated())
    assert "task_low_dim_state" in low_dim_fields(EnvConfig(task="reach_target", backend="rlbench").validated())
    with pytest.raises(ConfigError, match="defines no reward.*reach_target"):
        rlbench_env(task="open_drawer", low_dim=("gripper_open",), backend_options={"shaped_rewards": True})
    with pytest.raises(ConfigError, match="7 arm joints"):
        rlbench_env(backend_options={"robot_setup": "ur5"})
    # randomization: upstream has only the visual kind, and one setting for VARIATION / TRANSITION
    textures = tmp_path / "textures"
    textures.mkdir()
    visual = {"image_directory": str(textures)}
    with pytest.raises(ConfigError, match=r"(?s)NotImplementedError.*Only visual randomization exists upstream"):
        rlbench_env(backend_options={"randomize_every": "episode", "dynamics_randomization_config": {}})
    with pytest.raises(ConfigError, match="go together"):
        rlbench_env(backend_options={"randomize_every": "episode"})
    with pytest.raises(ConfigError, match=r"holds no \*\.jpg or \*\.png texture"):
        rlbench_env(backend_options={"randomize_every": "episode", "visual_randomization_config": visual})
    (textures / "wood.png").write_bytes(b"")
    with pytest.raises(ConfigError, match="same setting as 'transition'"):
        rlbench_env(backend_options={"randomize_every": "variation", "visual_randomization_config": visual})
    with pytest.raises(ConfigError, match="frame='ee'.*absolute_mode=False"):
        rlbench_env(arm_mode="ik", absolute_mode=True, backend_options={"frame": "ee"})
    with pytest.raises(ConfigError, match="frame='ee'"):
        rlbench_env(arm_mode="joint_position", absolute_mode=False, backend_options={"frame": "ee"})
    with pytest.raises(ConfigError, match=r"live_demos=False reads stored demos from dataset_root"):
        rlbench_env(backend_options={"live_demos": False})
    with pytest.raises(ConfigError, match=r"one CoppeliaSim per worker process .*envs_per_worker=2 would launch 2"):
        rlbench_env(envs_per_worker=2)
    assert double() == [], "no worker should have started"


def test_more_envs_than_cores_still_get_one_coppeliasim_per_worker(double):
    """The default grouping spreads envs over the cores, but PyRep runs one CoppeliaSim per process."""
    num_envs = 2 * len(os.sched_getaffinity(0)) + 1
    plan = make_plan(EnvConfig(task="reach_target", backend="rlbench", cameras=("front",), image_size=(16, 12)),
                     VectorConfig(num_envs=num_envs))
    assert plan.envs_per_worker == 1 and plan.workers == num_envs


def test_visual_randomization_reaches_rlbench_once_per_setting(double, rlbench_env, tmp_path):
    """'transition' is RandomizeEvery.VARIATION (= TRANSITION): new textures every `frequency` steps."""
    (tmp_path / "wood.png").write_bytes(b"")
    visual = {"image_directory": str(tmp_path)}
    env = rlbench_env(num_envs=1, low_dim=("gripper_open",), backend_options={
        "randomize_every": "transition", "frequency": 2, "visual_randomization_config": visual})
    env.reset(seed=0)
    for _ in range(4):
        env.step(pose_actions(1))
    [environment] = double("environment")
    assert environment["randomize_every"] == "VARIATION" and environment["frequency"] == 2
    assert environment["visual_randomization_config"]["image_directory"] == str(tmp_path)
    assert [e["count"] for e in double("randomize")] == [0, 2]  # at steps 1 and 3, none at the reset


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
    from rlbench_vec.backends.rlbench.backend import RLBenchBackend
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
    (images / "wood.jpg").write_bytes(b"")
    cases = [
        dict(arm_mode="ik", absolute_mode=False, gripper_mode="joint_position",
             backend_options={"collision_checking": True, "attach_grasped_objects": False, "frame": "ee"}),
        dict(arm_mode="planning", absolute_mode=True, renderer="opengl"),
        dict(arm_mode="joint_velocity", backend_options={"robot_setup": "sawyer", "frequency": 2}),
        dict(arm_mode="joint_position", absolute_mode=False, backend_options={
            "randomize_every": "episode", "visual_randomization_config": {"image_directory": str(images)},
            "dataset_root": str(tmp_path), "arm_max_acceleration": 2.0}),
    ]
    result = subprocess.run([sys.executable, "-c", MAPPING_SCRIPT, json.dumps(cases)], cwd=REPO,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    recorded = double("environment")
    modes = [(e["action_mode"]["arm_action_mode"], e["action_mode"]["gripper_action_mode"]) for e in recorded]
    assert [(arm["class"], arm.get("absolute_mode"), arm.get("collision_checking"), arm.get("frame"))
            for arm, _ in modes] == [
        ("EndEffectorPoseViaIK", False, True, "EE"), ("EndEffectorPoseViaPlanning", True, False, "WORLD"),
        ("JointVelocity", None, None, None), ("JointPosition", False, None, None)]
    assert [(g["class"], g["attach_grasped_objects"], g.get("absolute_mode")) for _, g in modes] == [
        ("GripperJointPosition", False, True), ("Discrete", True, None), ("Discrete", True, None),
        ("Discrete", True, None)]
    assert recorded[0]["attach_grasped_objects"] is False
    assert recorded[1]["obs_config"]["front_camera"]["render_mode"] == "OPENGL"
    assert (recorded[2]["robot_setup"], recorded[2]["frequency"]) == ("sawyer", 2)
    last = recorded[3]
    assert last["randomize_every"] == "EPISODE" and last["arm_max_acceleration"] == 2.0
    assert last["visual_randomization_config"]["class"] == "VisualRandomizationConfig"
    assert last["dynamics_randomization_config"] is None
    assert last["dataset_root"] == str(tmp_path)
    assert len(double("shutdown")) == len(cases)


def test_point_cloud_alone_is_delivered(double, rlbench_env):
    """RLBench makes a camera's point cloud only while its rgb or depth is on: depth is switched on too."""
    env = rlbench_env(num_envs=1, modalities=("point_cloud",), low_dim=("gripper_open",))
    obs, _ = env.reset(seed=0)
    assert obs["front_point_cloud"].shape == (1, 12, 16, 3) and obs["front_point_cloud"].std() > 0
    front = double("environment")[0]["obs_config"]["front_camera"]
    assert (front["point_cloud"], front["depth"], front["rgb"]) == (True, True, False)


class Step:
    """A recorded observation with only what demo_actions reads."""

    def __init__(self, misc: dict, **fields):
        self.misc = misc
        vars(self).update(fields)


def test_demo_actions_prefer_recorded_commands_and_invert_rlbench_delta_poses():
    """pose_delta inverts RLBench's calculate_delta_pose (pyquaternion's w-first product); pose_in_frame
    inverts IK relative to the tip (RelativeFrame.EE); misc["joint_position_action"] is used where present."""
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
    for current, relative, target in zip(poses[:-1], pose_in_frame(poses[:-1], poses[1:]), poses[1:]):
        np.testing.assert_allclose(quaternion_matrix(current[3:]) @ relative[:3] + current[:3], target[:3], atol=1e-12)
        np.testing.assert_allclose(quaternion_matrix(current[3:]) @ quaternion_matrix(relative[3:]),
                                   quaternion_matrix(target[3:]), atol=1e-12)

    joints = [np.full(7, float(t)) for t in range(3)]
    commands = [None, np.append(np.full(7, 1.5), 1.0), np.append(np.full(7, 2.5), 0.0)]
    steps = [Step({} if c is None else {"joint_position_action": c}, joint_positions=q, joint_velocities=q,
                  gripper_open=1.0, gripper_joint_positions=np.array([0.01 * t, 0.03 * t]))
             for t, (q, c) in enumerate(zip(joints, commands))]
    absolute = EnvConfig(arm_mode="joint_position").validated()
    np.testing.assert_allclose(demo_actions(steps, absolute), [[1.5] * 7 + [1.0], [2.5] * 7 + [0.0]])
    delta = EnvConfig(arm_mode="joint_position", absolute_mode=False, gripper_mode="joint_position").validated()
    np.testing.assert_allclose(demo_actions(steps, delta), [[1.5] * 7 + [0.02], [1.5] * 7 + [0.04]])
    for step in steps:
        step.misc = {}  # a demo recorded without commands: derived from the next state
    np.testing.assert_allclose(demo_actions(steps, absolute), [[1] * 7 + [1.0], [2] * 7 + [1.0]])
    velocity = EnvConfig(arm_mode="joint_velocity", gripper_mode="joint_position").validated()
    np.testing.assert_allclose(demo_actions(steps, velocity), [[1] * 7 + [0.02], [2] * 7 + [0.04]])


def test_a_task_per_env_and_a_task_changed_at_reset(double, rlbench_env):
    """One TaskEnvironment per env, each of its own task; task_low_dim_state padded to the longest (reach_target
    has 3 values, pick_and_lift 6); a reset loads another task into the env's running CoppeliaSim."""
    env = rlbench_env(num_envs=2, task=["reach_target", "pick_and_lift"])
    obs, info = env.reset(seed=0)
    assert env.get_attr("task") == ("reach_target", "pick_and_lift")
    assert obs["task_low_dim_state"].shape == (2, 6) and info["task_low_dim_size"].tolist() == [3, 6]
    assert not obs["task_low_dim_state"][0, 3:].any()
    assert sorted(e["task"] for e in double("get_task")) == ["pick_and_lift", "reach_target"]
    _, info = env.reset(options={"env_options": [{"task": "pick_and_lift"}, None]})
    assert env.get_attr("task") == ("pick_and_lift", "pick_and_lift") and info["task_low_dim_size"].tolist() == [6, 6]
    assert sorted(e["task"] for e in double("get_task")) == ["pick_and_lift", "pick_and_lift", "reach_target"]
    with pytest.raises(ConfigError, match="depends on its scene"):  # its length is unknown: it may not fit
        env.reset(options={"task": "open_drawer"})


@pytest.mark.parametrize("arm_mode, absolute_mode, frame", [
    ("planning", True, "world"), ("planning", False, "world"), ("ik", False, "ee")])
def test_the_oracle_acts_the_tasks_waypoints_with_their_gripper_abilities_and_repeats(
        double, rlbench_env, arm_mode, absolute_mode, frame):
    """The double's empty_container: two items carried one at a time (tests/rlbench_double/rlbench/tasks): its
    grasp waypoint is moved onto the next item by a start ability, a predefined path carries it, an end ability
    counts the pass so that the first waypoint is skipped on the second, and the waypoints repeat until no item
    is left. Only an oracle that does all of it, in the env's action mode, empties the container."""
    env = rlbench_env(num_envs=1, task="empty_container", cameras=(), arm_mode=arm_mode, absolute_mode=absolute_mode,
                      low_dim=("gripper_pose", "gripper_open"), backend_options={"oracle": True, "frame": frame})
    env.reset(seed=3)
    poses, gripper = [], []
    ignored = np.zeros((1, 8), np.float32)  # the oracle acts in place of the action given
    for _ in range(100):
        obs, reward, terminated, truncated, info = env.step(ignored)
        poses.append(obs["gripper_pose"][0].copy())  # obs is a view of shared memory the next step rewrites
        gripper.append(obs["gripper_open"][0])
        if terminated[0] or truncated[0]:
            break
    assert reward[0] == 1.0 and terminated[0] and not info.get("invalid_action", [False])[0]
    closes = [t for t in range(1, len(gripper)) if gripper[t - 1] == 1.0 and gripper[t] == 0.0]
    opens = [t for t in range(1, len(gripper)) if gripper[t - 1] == 0.0 and gripper[t] == 1.0]
    assert len(closes) == 2 and len(opens) == 2 and gripper[-1] == 1.0
    np.testing.assert_allclose(poses[-1], [0.4, 0.25, 0.9, *IDENTITY], atol=1e-6)  # the drop waypoint
    if arm_mode == "planning":
        # a pose per waypoint: above, grasp (closes), five along the path, drop (opens); again without `above`
        assert len(poses) == 15 and closes == [1, 8] and opens == [7, 14]
        np.testing.assert_allclose(poses[0], [0.2, 0.0, 1.1, *IDENTITY], atol=1e-6)
    else:
        steps = np.linalg.norm(np.diff(np.array(poses)[:, :3], axis=0), axis=1)
        assert len(poses) > 15 and steps.max() <= 0.03 + 1e-6, "ik mode moves in short straight pieces"


def test_the_oracle_needs_a_pose_arm_mode(double, rlbench_env):
    with pytest.raises(ConfigError, match="arm_mode 'planning'"):
        rlbench_env(num_envs=1, task="empty_container", arm_mode="joint_velocity", backend_options={"oracle": True})


@pytest.mark.parametrize("fork", [True, False], ids=["peract_fork", "stepjam_master"])
def test_ignore_collisions_reaches_rlbench_as_the_installed_one_reads_it(double, monkeypatch, rlbench_env, fork):
    """PerAct's fork reads bool(action[8:9]) (an 8-number action would raise ValueError under NumPy 2): it gets 9
    numbers; stepjam's master gets 8 and the arm mode's collision_checking set per move."""
    if fork:
        monkeypatch.setenv("RLBENCH_DOUBLE_PERACT_FORK", "1")
    plain = rlbench_env(num_envs=1, arm_mode="planning", modalities=("rgb",),
                        backend_options={"collision_checking": True})
    plain.reset(seed=0)
    _, _, terminated, _, info = plain.step(pose_actions(1))
    assert not terminated[0], info.get("error")
    plain.close()
    flagged = rlbench_env(num_envs=1, arm_mode="planning", modalities=("rgb",), ignore_collisions_flag=True)
    assert flagged.single_action_space.shape == (9,)
    flagged.reset(seed=0)
    for ignore in (1.0, 0.0):
        _, _, terminated, _, info = flagged.step(np.append(pose_actions(1), [[ignore]], axis=1))
        assert not terminated[0], info.get("error")
    moves = [(m["ignore_collisions"], m["collision_checking"]) for m in double("arm_move")]
    if fork:  # the fork decides by its 9th number alone: the option's "checking on" arrives as ignore False
        assert moves == [(False, True), (True, False), (False, False)]
    else:
        assert moves == [(None, True), (None, False), (None, True)]
