"""The embedded MuJoCo backend, with real physics and rendering (no mocks).

Most tests drive the backend in this process (small images where the test is about physics); the
last ones go through RLBenchVectorEnv's worker processes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest

from rlbench_vec import RLBenchVectorEnv
from rlbench_vec.backends.mujoco import BACKEND
from rlbench_vec.backends.mujoco.backend import loaded_renderer
from rlbench_vec.backends.mujoco.scene import CAMERA_FAR, CAMERA_NEAR, FINGER_MAX, HOME_QPOS, TABLE_TOP_Z
from rlbench_vec.backends.mujoco.tasks.base import COLORS
from rlbench_vec.config import CAMERAS, EnvConfig
from rlbench_vec.errors import BackendUnavailableError, ConfigError, WorkerError
from rlbench_vec.spec import low_dim_fields, observation_spec

ORACLE_EPISODES = 20
# The tasks whose oracles run in several action modes here (ORACLE_CASES); every task's own test (tests/tasks/)
# runs one mode.
SWEPT_TASKS = ("open_drawer", "pick_and_lift", "reach_target")


def make_config(**kwargs) -> EnvConfig:
    kwargs = {"task": "reach_target", "backend": "mujoco", "cameras": (), "low_dim": (
        "joint_positions", "gripper_open", "gripper_pose", "gripper_joint_positions", "task_low_dim_state"),
        **kwargs}
    config = EnvConfig(**kwargs).validated()
    BACKEND.validate(config)
    return config


@pytest.fixture
def backend_for():
    """Backends made by a test; closed after it."""
    made = []

    def factory(**kwargs):
        backend = BACKEND(make_config(**kwargs), 0)
        made.append(backend)
        return backend

    yield factory
    for backend in made:
        backend.close()


def observe(backend) -> dict[str, np.ndarray]:
    """The observation written in place into arrays of the layout; float slots start as NaN, so any
    slot the backend leaves unwritten fails here."""
    spec = observation_spec(backend.config)
    out = {key: np.full(s.shape, np.nan if s.dtype.kind == "f" else 0, s.dtype) for key, s in spec.items()}
    backend.write_observation(out)
    unwritten = [key for key, array in out.items() if array.dtype.kind == "f" and np.isnan(array).any()]
    assert not unwritten, f"write_observation left {unwritten} unwritten"
    return out


def run_oracle(backend, seed: int) -> bool:
    backend.reset(seed, None)
    for steps, action in enumerate(backend.sim.oracle_actions(), start=1):
        result = backend.step(action)
        if result.terminated or steps >= backend.config.max_episode_steps:
            return result.reward == 1.0 and "error" not in result.info
    return False


def pose_action(position, quat_xyzw, gripper: float = 1.0) -> np.ndarray:
    return np.array([*position, *quat_xyzw, gripper], np.float32)


# --- configuration --------------------------------------------------------------------------------


def test_validate_names_the_problem():
    with pytest.raises(ConfigError, match=r"unknown task 'reach_targets'.*reach_target.*Available: "):
        BACKEND.validate(replace(make_config(), task="reach_targets"))
    with pytest.raises(ConfigError, match="unknown mujoco backend_options"):
        BACKEND.validate(replace(make_config(), backend_options={"colour": 1}))
    with pytest.raises(ConfigError, match="variation must be an integer in 0..2"):
        BACKEND.validate(replace(make_config(task="open_drawer"), backend_options={"variation": 3}))
    with pytest.raises(ConfigError, match=r"task 'open_drawer' has no reward\(\) upstream.*Tasks with one: "
                                          r"reach_target, take_lid_off_saucepan;"):
        BACKEND.validate(replace(make_config(task="open_drawer"), backend_options={"shaped_rewards": True}))
    with pytest.raises(ConfigError, match="shaped_rewards'] must be True or False"):
        BACKEND.validate(replace(make_config(), backend_options={"shaped_rewards": "yes"}))
    with pytest.raises(ConfigError, match="renderer 'vulkan' is not supported"):
        BACKEND.validate(replace(make_config(), renderer="vulkan"))
    with pytest.raises(ConfigError, match="offscreen buffer"):
        BACKEND.validate(make_config(cameras=CAMERAS, image_size=(4096, 4096)))


def test_class_methods_need_no_simulator():
    assert {name: BACKEND.task_state_size(make_config(task=name)) for name in SWEPT_TASKS} == {
        "reach_target": 3, "open_drawer": 12, "pick_and_lift": 6}
    assert BACKEND.needs_display(make_config(renderer="glfw"))
    assert not BACKEND.needs_display(make_config(renderer="osmesa"))
    assert not BACKEND.needs_display(make_config(renderer="egl"))


def test_the_main_process_never_imports_mujoco():
    """The engine imports the backend for its class methods only; MuJoCo must wait for a worker."""
    code = (
        "import sys; from rlbench_vec.backends.mujoco import BACKEND; from rlbench_vec.config import EnvConfig; "
        "config = EnvConfig(backend='mujoco', task='open_drawer').validated(); BACKEND.validate(config); "
        "BACKEND.task_state_size(config); BACKEND.needs_display(config); assert 'mujoco' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_second_renderer_in_one_process_is_refused(backend_for):
    backend_for().close()  # MuJoCo is imported now, with the renderer of the first backend
    other = "egl" if loaded_renderer() != "egl" else "osmesa"
    with pytest.raises(BackendUnavailableError, match=f"cannot use '{other}'"):
        BACKEND(make_config(renderer=other), 0)


def headless_environ() -> dict[str, str]:
    """This process's environment without a display or a chosen GL backend, as on a bare server."""
    drop = ("MUJOCO_GL", "PYOPENGL_PLATFORM", "DISPLAY")
    return {key: value for key, value in os.environ.items() if key not in drop}


def test_workers_render_when_the_users_script_imported_mujoco_first(tmp_path):
    """A training script that imports a library which imports MuJoCo (torchrl.envs does) makes every
    spawned worker re-import it before the worker's code runs: the worker must still get the
    headless renderer, not MuJoCo's glfw default, which needs a display."""
    script = (
        "import mujoco\n"
        "from rlbench_vec import RLBenchVectorEnv\n"
        "if __name__ == '__main__':\n"
        "    env = RLBenchVectorEnv(2, 'reach_target', backend='mujoco', cameras=('front',), image_size=(32, 32),\n"
        "                           max_restarts_per_env=0)\n"
        "    obs, _ = env.reset(seed=0)\n"
        "    assert obs['front_rgb'].shape == (2, 32, 32, 3) and obs['front_rgb'].any()\n"
        "    env.close()\n"
    )
    path = tmp_path / "train.py"  # a file: spawn re-imports a main module only when it has one
    path.write_text(script)
    done = subprocess.run([sys.executable, str(path)], env=headless_environ(), capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


def test_an_in_process_mujoco_that_cannot_render_is_refused_with_the_fix_named():
    """MuJoCo imported with its glfw default and no display: a clear error naming MUJOCO_GL, not
    MuJoCo's fatal error about a missing OpenGL platform."""
    code = (
        "import mujoco\n"
        "from rlbench_vec.backends.mujoco import BACKEND\n"
        "from rlbench_vec.config import EnvConfig\n"
        "from rlbench_vec.errors import BackendUnavailableError\n"
        "config = EnvConfig(backend='mujoco', cameras=('front',), image_size=(32, 32)).validated()\n"
        "try:\n"
        "    BACKEND(config, 0)\n"
        "except BackendUnavailableError as error:\n"
        "    print(error)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], env=headless_environ(), capture_output=True, text=True,
                          timeout=120, check=True)
    assert "'glfw' renderer" in done.stdout and "set MUJOCO_GL=" in done.stdout, done.stdout + done.stderr


# --- episodes, variations, descriptions -----------------------------------------------------------


def test_reset_is_seeded_and_variations_follow_options(backend_for):
    """Variation 0 unless told otherwise (as an RLBench TaskEnvironment); backend_options' variation fixes
    one, "random" draws one per reset from its seed; reset options set one for that reset."""
    backend = backend_for(task="reach_target")
    assert {backend.reset(seed, None)["variation_index"] for seed in range(6)} == {0}
    drawn = backend_for(task="reach_target", backend_options={"variation": "random"})
    info = drawn.reset(5, None)
    first = observe(drawn)["task_low_dim_state"].copy()
    assert len({drawn.reset(seed, None)["variation_index"] for seed in range(6)}) > 1
    colour = COLORS[info["variation_index"]][0]
    assert info["descriptions"] and all(isinstance(d, str) and colour in d for d in info["descriptions"])
    assert drawn.reset(5, None) == info
    np.testing.assert_array_equal(observe(drawn)["task_low_dim_state"], first)
    assert drawn.reset(5, {"variation": 3})["variation_index"] == 3
    fixed = backend_for(task="open_drawer", backend_options={"variation": 2})
    assert {fixed.reset(seed, None)["variation_index"] for seed in range(4)} == {2}
    assert fixed.reset(0, None)["descriptions"][0] == "open the top drawer"
    with pytest.raises(ConfigError):
        fixed.reset(0, {"variation": 7})
    with pytest.raises(ConfigError, match=r"variation must be an integer in 0\.\.2 \(open_drawer has 3 variations\) "
                                          r"or 'random'"):
        make_config(task="open_drawer", backend_options={"variation": "any"})


# --- kinematics and actions -----------------------------------------------------------------------


@pytest.mark.parametrize("arm_mode", ["ik", "planning"])
def test_pose_actions_reach_commanded_poses(backend_for, arm_mode):
    backend = backend_for(arm_mode=arm_mode)
    backend.reset(0, None)
    rng = np.random.default_rng(1)
    for _ in range(4):
        position = [rng.uniform(0.05, 0.35), rng.uniform(-0.25, 0.25), TABLE_TOP_Z + rng.uniform(0.1, 0.35)]
        yaw = rng.uniform(-1.0, 1.0)
        quat = [np.cos(yaw / 2), np.sin(yaw / 2), 0.0, 0.0]  # xyzw: pointing down, turned by yaw
        result = backend.step(pose_action(position, quat))
        assert "error" not in result.info
        pose = observe(backend)["gripper_pose"]
        assert np.linalg.norm(pose[:3] - position) < 0.01
        assert abs(abs(np.dot(pose[3:], quat)) - 1.0) < 1e-3  # same rotation up to sign


def test_a_pose_action_ends_with_the_arm_at_rest(backend_for):
    """As RLBench's paths (PyRep's Reflexxes profile) and as PerAct's keypoint rule expects of a demo's
    waypoints: carrying the block, pick_and_lift's oracle ended moves at its targets with joints still turning
    at up to 0.08 rad/s."""
    backend = backend_for(task="pick_and_lift", arm_mode="ik", low_dim=("joint_velocities",), max_episode_steps=40,
                          backend_options={"variation": "random"})
    from rlbench_vec.backends.mujoco.robot import AT_REST_SPEED  # imports MuJoCo: after the renderer's choice

    for seed in range(5):
        backend.reset(seed, None)
        for action in backend.sim.oracle_actions():
            result = backend.step(action)
            speed = np.abs(observe(backend)["joint_velocities"]).max()
            assert speed < AT_REST_SPEED, (seed, speed)
            if result.terminated:
                break
        assert result.reward == 1.0


def test_delta_pose_and_joint_actions_move_as_commanded(backend_for):
    delta = backend_for(absolute_mode=False)
    delta.reset(0, None)
    start = observe(delta)["gripper_pose"].copy()
    delta.step(pose_action([0.05, -0.03, -0.08], [0, 0, 0, 1]))
    np.testing.assert_allclose(observe(delta)["gripper_pose"][:3], start[:3] + [0.05, -0.03, -0.08], atol=0.01)

    joints = backend_for(arm_mode="joint_position")
    joints.reset(0, None)
    target = HOME_QPOS + [0.04, -0.04, 0.03, 0.05, -0.03, 0.04, 0.05]
    for _ in range(6):
        joints.step(np.append(target, 1.0).astype(np.float32))
    np.testing.assert_allclose(observe(joints)["joint_positions"], target, atol=0.01)

    velocity = backend_for(arm_mode="joint_velocity")
    velocity.reset(0, None)
    for _ in range(10):
        velocity.step(np.array([0.5, 0, 0, 0, 0, 0, 0, 1], np.float32))
    assert 0.15 < observe(velocity)["joint_positions"][0] < 0.3  # 0.5 rad/s for 0.5 s, after an acceleration ramp


def test_gripper_modes(backend_for):
    discrete = backend_for()
    discrete.reset(0, None)
    assert observe(discrete)["gripper_open"] == 1.0
    pose = observe(discrete)["gripper_pose"]
    discrete.step(pose_action(pose[:3], pose[3:], gripper=0.0))
    closed = observe(discrete)
    assert closed["gripper_open"] == 0.0 and np.all(closed["gripper_joint_positions"] < 0.002)

    positional = backend_for(arm_mode="joint_position", gripper_mode="joint_position")
    positional.reset(0, None)
    positional.step(np.append(HOME_QPOS, 0.02).astype(np.float32))
    np.testing.assert_allclose(observe(positional)["gripper_joint_positions"], 0.02, atol=0.002)


@pytest.mark.parametrize("action, error", [
    (np.zeros(5, np.float32), "shape"),
    (np.full(8, np.nan, np.float32), "NaN"),
    (pose_action([0.2, 0.0, 1.0], [0.0, 0.5, 0.0, 0.5]), "non-unit quaternion"),
    (pose_action([3.0, 0.0, 1.0], [1.0, 0.0, 0.0, 0.0]), "outside the workspace"),
    (pose_action([0.75, 0.0, 0.78], [1.0, 0.0, 0.0, 0.0]), "IK found no joint configuration"),
])
def test_invalid_actions_end_the_episode(backend_for, action, error):
    backend = backend_for()
    backend.reset(0, None)
    before = observe(backend)["joint_positions"].copy()
    result = backend.step(action)
    assert (result.reward, result.terminated) == (0.0, True)
    assert result.info["error"].startswith("InvalidActionError: ") and error in result.info["error"]
    np.testing.assert_array_equal(observe(backend)["joint_positions"], before)  # nothing moved
    backend.reset(1, None)
    assert "error" not in backend.step(pose_action(*np.split(observe(backend)["gripper_pose"], [3]))).info


# --- oracles (each task solvable) -----------------------------------------------------------------


ACTION_MODES = [  # (arm_mode, absolute_mode, gripper_mode): every arm mode, both kinds of target and gripper
    ("ik", True, "discrete"), ("ik", False, "discrete"), ("planning", True, "discrete"),
    ("planning", False, "joint_position"), ("joint_position", True, "discrete"),
    ("joint_position", False, "joint_position"), ("joint_velocity", True, "joint_position"),
]
# reach_target (no grasp, cheap) in every mode; the grasping tasks share the modes out: every mode on one of
# them, each with absolute and delta targets and both gripper modes (each task's own test runs joint_velocity)
GRASPING_MODES = {
    "pick_and_lift": [ACTION_MODES[i] for i in (0, 3, 5)],
    "open_drawer": [ACTION_MODES[i] for i in (1, 2, 4, 6)],
}
ORACLE_CASES = [("reach_target", *mode) for mode in ACTION_MODES] + [
    (task, *mode) for task, modes in GRASPING_MODES.items() for mode in modes]


@pytest.mark.parametrize("task, arm_mode, absolute, gripper_mode", ORACLE_CASES)
def test_oracle_solves_task(backend_for, task, arm_mode, absolute, gripper_mode):
    backend = backend_for(task=task, arm_mode=arm_mode, absolute_mode=absolute, gripper_mode=gripper_mode,
                          backend_options={"variation": "random"})
    successes = sum(run_oracle(backend, seed) for seed in range(ORACLE_EPISODES))
    assert successes >= 0.9 * ORACLE_EPISODES, f"{task} in {arm_mode}: {successes}/{ORACLE_EPISODES}"


def test_get_demos_stack_observations_and_actions(backend_for):
    backend = backend_for(task="reach_target", cameras=("front",), modalities=("rgb",), image_size=(32, 24))
    demos = backend.get_demos(2, seed=0)
    assert len(demos) == 2
    for demo in demos:
        assert demo.success and demo.descriptions and 0 <= demo.variation_index < len(COLORS)
        steps = len(demo.actions)
        assert demo.actions.shape == (steps, 8) and steps >= 1
        assert demo.observations["front_rgb"].shape == (steps + 1, 24, 32, 3)
        assert demo.observations["task_low_dim_state"].shape == (steps + 1, 3)


# --- rendering ------------------------------------------------------------------------------------


def test_every_camera_sees_the_scene_and_the_wrist_view_moves(backend_for):
    backend = backend_for(cameras=CAMERAS, modalities=("rgb", "mask"), image_size=(64, 64))
    backend.reset(0, None)
    before = {key: value.copy() for key, value in observe(backend).items()}
    table = backend.sim.model.body("table").id
    robot = {backend.sim.model.body(f"panda_link{i}").id for i in range(8)} | {backend.sim.model.body("panda_hand").id}
    for camera in CAMERAS:
        assert before[f"{camera}_rgb"].std() > 10, camera
        seen = set(np.unique(before[f"{camera}_mask"]).astype(int))
        assert table in seen or seen & robot, camera
    backend.step(pose_action([0.3, 0.2, TABLE_TOP_Z + 0.15], [1.0, 0.0, 0.0, 0.0]))
    after = observe(backend)
    assert np.abs(after["wrist_rgb"].astype(int) - before["wrist_rgb"]).mean() > 5
    assert backend.render_rgb("front").shape == (64, 64, 3)


@pytest.mark.parametrize("depth_in_meters", [False, True])
def test_depth_and_point_cloud_agree_with_the_table_plane(backend_for, depth_in_meters):
    backend = backend_for(cameras=("overhead", "front"), modalities=("depth", "mask", "point_cloud"),
                          image_size=(48, 40), depth_in_meters=depth_in_meters)
    backend.reset(0, None)
    obs = observe(backend)
    table = backend.sim.model.body("table").id
    for camera in ("overhead", "front"):
        on_table = obs[f"{camera}_mask"] == table
        assert on_table.mean() > 0.2, camera
        cloud = obs[f"{camera}_point_cloud"][on_table]
        camera_pos = backend.sim.data.cam_xpos[backend.sim.model.cam(camera).id]
        rotation = backend.sim.data.cam_xmat[backend.sim.model.cam(camera).id].reshape(3, 3)
        axis = -rotation[:, 2]
        metric = (cloud - camera_pos) @ axis  # distance along the optical axis
        # PyRep puts pixel (u, v) at integer coordinates, half a pixel (right and up in the camera frame)
        # from the centre where the depth was rendered: the point moves off the plane by that much
        focal = (40 / 2) / np.tan(np.deg2rad(backend.sim.model.cam(camera).fovy[0]) / 2)
        shift = metric * (rotation[2, 0] * -0.5 + rotation[2, 1] * 0.5) / focal
        np.testing.assert_allclose(cloud[:, 2], TABLE_TOP_Z + shift, atol=0.005)
        depth = obs[f"{camera}_depth"][on_table]
        expected = metric if depth_in_meters else (metric - CAMERA_NEAR) / (CAMERA_FAR - CAMERA_NEAR)
        np.testing.assert_allclose(depth, expected, rtol=1e-4, atol=1e-4)
        assert obs[f"{camera}_depth"].dtype == np.float32 and obs[f"{camera}_point_cloud"].dtype == np.float64
    if not depth_in_meters:
        assert 0.0 <= obs["overhead_depth"].min() and obs["overhead_depth"].max() <= 1.0


def test_only_requested_cameras_and_modalities_are_rendered(backend_for, monkeypatch):
    import mujoco

    backend = backend_for(cameras=("front", "wrist"), modalities=("depth",), image_size=(32, 32))
    backend.reset(0, None)
    drawn = []
    original = mujoco.mjr_render
    monkeypatch.setattr(mujoco, "mjr_render", lambda viewport, scene, context: (
        drawn.append((scene.flags[mujoco.mjtRndFlag.mjRND_SEGMENT], viewport.left)),
        original(viewport, scene, context)))
    obs = observe(backend)
    assert sorted(obs) == sorted(["front_depth", "wrist_depth", *low_dim_fields(make_config())])
    assert drawn == [(1, 0), (1, 32)]  # one flat pass, two cameras
    low_dim_only = backend_for(cameras=(), modalities=("rgb",))
    low_dim_only.reset(0, None)
    drawn.clear()
    observe(low_dim_only)
    assert drawn == []


# --- through the vector env -----------------------------------------------------------------------


def test_vector_env_runs_the_mujoco_backend():
    env = RLBenchVectorEnv(num_envs=2, task="reach_target", backend="mujoco", image_size=(32, 32),
                           cameras=("front", "wrist"), arm_mode="joint_velocity")
    try:
        obs, info = env.reset(seed=0)
        assert obs["front_rgb"].shape == (2, 32, 32, 3) and obs["task_low_dim_state"].shape == (2, 3)
        assert len(info["descriptions"]) == 2
        wrist = obs["wrist_rgb"].copy()
        actions = np.zeros((2, 8), np.float32)
        actions[:, 0], actions[:, 7] = 1.0, 1.0
        for _ in range(5):
            obs, reward, terminated, truncated, info = env.step(actions)
        assert not terminated.any() and np.all(obs["joint_positions"][:, 0] > 0.05)
        assert np.abs(obs["wrist_rgb"].astype(int) - wrist).mean() > 1
        assert env.render("front").shape == (2, 32, 32, 3)
    finally:
        env.close()


def test_each_get_demos_call_draws_new_demos():
    with RLBenchVectorEnv(num_envs=2, task="reach_target", backend="mujoco", cameras=(),
                          low_dim=("gripper_pose",), max_episode_steps=60) as env:
        first, second = env.get_demos(2), env.get_demos(2)
    assert len(first) == len(second) == 2
    assert not any(np.array_equal(a.actions, b.actions) for a in first for b in second)


def test_get_demos_of_a_chosen_variation_and_the_variation_count():
    """get_demos(variation=v): demos of v, the same as an env with v fixed gives from the same seed; a variation out
    of range names the task's count; get_attr("variation_count") reads the task's count."""
    settings = dict(task="reach_target", backend="mujoco", cameras=(), low_dim=("gripper_pose",), max_episode_steps=60)
    with RLBenchVectorEnv(num_envs=2, **settings) as env, \
            RLBenchVectorEnv(num_envs=2, backend_options={"variation": 2}, **settings) as fixed:
        assert env.get_attr("variation_count") == (len(COLORS), len(COLORS))
        demos = env.get_demos(2, seed=3, variation=2)
        assert [demo.variation_index for demo in demos] == [2, 2]
        assert all(COLORS[2][0] in demo.descriptions[0] for demo in demos)
        for demo, same in zip(demos, fixed.get_demos(2, seed=3)):
            np.testing.assert_array_equal(demo.actions, same.actions)
        with pytest.raises(WorkerError, match=rf"ConfigError: get_demos variation must be an integer in "
                                              rf"0\.\.19 \(reach_target has {len(COLORS)} variations\), got 20"):
            env.get_demos(1, seed=0, variation=len(COLORS))


def test_misc_gives_rlbench_camera_matrices_that_rebuild_the_point_cloud():
    with RLBenchVectorEnv(num_envs=1, backend="mujoco", misc=True, cameras=("front", "wrist"),
                          modalities=("depth", "point_cloud"), depth_in_meters=True, image_size=(48, 32)) as env:
        obs, _ = env.reset(seed=0)
        for camera in ("front", "wrist"):
            extrinsics, intrinsics = obs[f"{camera}_camera_extrinsics"][0], obs[f"{camera}_camera_intrinsics"][0]
            assert obs[f"{camera}_camera_near"][0] == 0.01 and obs[f"{camera}_camera_far"][0] == 4.5
            np.testing.assert_allclose(extrinsics[:3, :3] @ extrinsics[:3, :3].T, np.eye(3), atol=1e-12)
            np.testing.assert_allclose(intrinsics[:2, 2], [24, 16])  # principal point: (width / 2, height / 2)
            # PyRep's pointcloud_from_depth_and_camera_params: pixel (u, v) at integer coordinates
            depth = obs[f"{camera}_depth"][0].astype(np.float64)
            v, u = np.mgrid[:32, :48]
            in_camera = np.stack([u * depth, v * depth, depth], -1) @ np.linalg.inv(intrinsics).T
            world = in_camera @ extrinsics[:3, :3].T + extrinsics[:3, 3]
            np.testing.assert_allclose(world, obs[f"{camera}_point_cloud"][0], atol=1e-5, err_msg=camera)


def test_fixed_timing_runs_one_control_step_and_says_what_is_under_way(backend_for):
    """action_timing="fixed": a close command moves the fingers one control step per action, alongside
    the arm, until they stop (info["gripper_moving"] until then); an ik move runs one control step
    towards its target per action (info["arm_moving"] until it gets there); rlbench timing closes the
    fingers within its one action."""
    fixed = backend_for(arm_mode="joint_velocity", action_timing="fixed")
    fixed.reset(0, None)
    close = np.array([0.3, 0, 0, 0, 0, 0, 0, 0], np.float32)
    fingers, moving = [], []
    for _ in range(20):
        info = fixed.step(close).info
        fingers.append(observe(fixed)["gripper_joint_positions"].mean())
        moving.append(info.get("gripper_moving", False))
    assert 0.03 < fingers[0] < FINGER_MAX and np.all(np.diff(fingers) < 1e-4)  # closing step by step
    assert moving[0] and not moving[-1] and fingers[-1] < 0.002
    settled = moving.index(False)
    assert not any(moving[settled:]) and 5 <= settled <= 15
    assert observe(fixed)["joint_positions"][0] > 0.1  # the arm moved meanwhile: 0.3 rad/s for a second

    rlbench = backend_for(arm_mode="joint_velocity")
    rlbench.reset(0, None)
    assert rlbench.step(close).info == {} and observe(rlbench)["gripper_joint_positions"].mean() < 0.002

    pose_mode = backend_for(action_timing="fixed")
    pose_mode.reset(0, None)
    start = observe(pose_mode)["gripper_pose"]
    target = pose_action(start[:3] + [0.0, 0.15, -0.1], start[3:])
    moves = [pose_mode.step(target).info.get("arm_moving", False) for _ in range(40)]
    assert moves[0] and not moves[-1]
    np.testing.assert_allclose(observe(pose_mode)["gripper_pose"][:3], target[:3], atol=0.01)


def test_demos_need_rlbench_timing(backend_for):
    with pytest.raises(ConfigError, match="action_timing='rlbench'"):
        backend_for(action_timing="fixed").get_demos(1, seed=0)


def test_a_task_per_env_pads_task_state_and_switches_tasks_at_reset(make_env):
    """Mixed tasks in one vector env: each env's own task, descriptions and task_low_dim_state (zero-padded to
    the longest, its own length in info), drawn by one worker; a reset changes an env's task in place."""
    tasks = ["reach_target", "close_drawer", "push_button"]
    env = make_env(num_envs=3, task=tasks, backend="mujoco", cameras=("front",), image_size=(16, 16),
                   modalities=("rgb", "mask"), envs_per_worker=3)
    sizes = {name: BACKEND.task_state_size(make_config(task=name)) for name in tasks}
    obs, info = env.reset(seed=0)
    assert env.get_attr("task") == tuple(tasks) == env.env_config.task
    assert obs["task_low_dim_state"].shape == (3, max(sizes.values()))
    assert info["task_low_dim_size"].tolist() == [sizes[name] for name in tasks]
    for row, name in enumerate(tasks):
        assert not obs["task_low_dim_state"][row, sizes[name]:].any()
        task = BACKEND(make_config(task=name), 0)
        try:
            assert list(info["descriptions"][row]) == task.sim.task.descriptions(int(info["variation_index"][row]))
        finally:
            task.close()
    assert len({obs["front_mask"][row].max() for row in range(3)}) > 1  # each drawn with its own task's scene
    obs, info = env.reset(seed=0, options={"env_options": [{"task": "push_button"}, None, {"task": "ReachTarget"}]})
    assert env.get_attr("task") == ("push_button", "close_drawer", "reach_target")
    assert info["task"].tolist() == ["push_button", "close_drawer", "reach_target"]
    assert info["task_low_dim_size"].tolist() == [sizes["push_button"], sizes["close_drawer"], sizes["reach_target"]]
    with pytest.raises(ConfigError, match="closest|Closest"):
        env.reset(options={"task": "push_buton"})


def test_tasks_the_backend_lacks_are_named_together():
    lacking = ("basketball_in_hoop", "water_plants", "wipe_desk")  # RLBench tasks not embedded
    with pytest.raises(ConfigError) as error:
        RLBenchVectorEnv(num_envs=4, task=["reach_target", *lacking], backend="mujoco", cameras=())
    assert all(name in str(error.value) for name in lacking) and "backend='rlbench'" in str(error.value)
