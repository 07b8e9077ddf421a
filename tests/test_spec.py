"""The spaces of rlbench_vec.spec: the action space (finite bounds in every arm mode whose samples are valid
actions, checked on the space itself and by a random policy on the real MuJoCo backend) and batched
observation spaces that take no memory per env."""

from __future__ import annotations

import importlib.util
import itertools
import pickle
import tracemalloc

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector.utils import batch_space

from rlbench_vec import CAMERAS, EnvConfig, RLBenchVectorEnv
from rlbench_vec.config import ARM_MODES, GRIPPER_MODES
from rlbench_vec.errors import ConfigError
from rlbench_vec.spec import (
    QUATERNION,
    REACH_HIGH,
    REACH_LOW,
    WORKSPACE_HIGH,
    WORKSPACE_LOW,
    ActionSpace,
    action_bounds,
    action_space,
    batched_observations,
)

MODES = list(itertools.product(ARM_MODES, (False, True)))


def config(arm_mode: str, absolute: bool, gripper_mode: str = "discrete") -> EnvConfig:
    return EnvConfig(task="reach_target", backend="mujoco", arm_mode=arm_mode, absolute_mode=absolute,
                     gripper_mode=gripper_mode).validated()


@pytest.mark.parametrize("arm_mode, absolute", MODES)
@pytest.mark.parametrize("gripper_mode", GRIPPER_MODES)
def test_bounds_are_finite_and_samples_are_inside_them(arm_mode, absolute, gripper_mode):
    space = action_space(config(arm_mode, absolute, gripper_mode))
    assert np.isfinite(space.low).all() and np.isfinite(space.high).all() and (space.low < space.high).all()
    space.seed(0)
    samples = np.stack([space.sample() for _ in range(200)])
    assert all(space.contains(sample) for sample in samples)
    if arm_mode in ("ik", "planning"):
        np.testing.assert_allclose(np.linalg.norm(samples[:, QUATERNION], axis=1), 1.0, atol=1e-5)
        if absolute:  # inside the workspace, where the arm reaches
            assert (samples[:, :3] >= REACH_LOW - 1e-6).all() and (samples[:, :3] <= REACH_HIGH + 1e-6).all()
            assert (REACH_LOW >= WORKSPACE_LOW).all() and (REACH_HIGH <= WORKSPACE_HIGH).all()


def test_pose_samples_stay_inside_bounds_narrowed_off_the_reach():
    """SB3VecEnv's arm_limit narrows an absolute position to ±arm_limit, off the box the arm reaches: samples
    then keep to the bounds."""
    space = action_space(config("ik", True))
    low, high = space.low.copy(), space.high.copy()
    low[:3], high[:3] = -0.05, 0.05
    narrowed = ActionSpace(low, high, pose=True, seed=0, absolute=True)
    assert all(narrowed.contains(narrowed.sample()) for _ in range(50))


def test_ignore_collisions_flag_adds_peract_9th_number_in_the_pose_modes():
    for arm_mode in ("ik", "planning"):
        flagged = EnvConfig(task="reach_target", backend="mujoco", arm_mode=arm_mode, ignore_collisions_flag=True)
        low, high = action_bounds(flagged.validated())
        plain_low, plain_high = action_bounds(config(arm_mode, True))
        assert low.shape == (9,) and (low[8], high[8]) == (0.0, 1.0)  # x y z, quaternion xyzw, gripper, ignore
        np.testing.assert_array_equal(np.stack([low[:8], high[:8]]), np.stack([plain_low, plain_high]))
        space = action_space(flagged.validated())
        space.seed(0)
        assert all(space.contains(space.sample()) for _ in range(50))
    with pytest.raises(ConfigError, match="ignore_collisions_flag adds PerAct's 9th action number to the pose"):
        EnvConfig(arm_mode="joint_velocity", ignore_collisions_flag=True).validated()


def test_the_batched_space_samples_valid_rows_and_keeps_the_bounds():
    single = action_space(config("ik", False))
    batch = single.batched(5)
    assert batch.shape == (5, 8)
    assert np.array_equal(batch.low[3], single.low) and np.array_equal(batch.high[3], single.high)
    rows = batch.sample()
    assert batch.contains(rows)
    np.testing.assert_allclose(np.linalg.norm(rows[:, QUATERNION], axis=1), 1.0, atol=1e-5)


def test_a_plain_box_over_the_same_bounds_would_sample_invalid_quaternions():
    """What the normalisation is for: uniform samples of [-1, 1]^4 are almost never unit quaternions."""
    low, high = action_bounds(config("ik", True))
    rng = np.random.default_rng(0)
    quaternions = rng.uniform(low, high, size=(100, len(low)))[:, QUATERNION]
    assert (np.abs(np.linalg.norm(quaternions, axis=1) - 1.0) > 1e-3).mean() > 0.9


REACH_FAILURES = ("IK found no joint configuration", "outside the workspace")


@pytest.mark.skipif(importlib.util.find_spec("mujoco") is None, reason="mujoco is not installed")
@pytest.mark.parametrize("arm_mode, absolute", MODES)
def test_a_random_policy_sends_only_valid_actions(arm_mode, absolute):
    """env.action_space.sample() in every arm mode on the MuJoCo backend: joint actions are never invalid,
    and at most 5% of pose samples fail, only where the robot cannot reach them (IK), never for their form
    (a non-unit quaternion, NaN, a wrong shape)."""
    pose = arm_mode in ("ik", "planning")
    with RLBenchVectorEnv(num_envs=2, task="reach_target", backend="mujoco", cameras=(), arm_mode=arm_mode,
                          absolute_mode=absolute, action_timing="fixed", envs_per_worker=2, seed=0) as env:
        env.reset(seed=0)
        env.action_space.seed(0)
        errors = []
        for _ in range(50 if pose else 6):
            _, _, _, _, info = env.step(env.action_space.sample())
            invalid = info.get("_invalid_action", np.zeros(2, bool))
            assert np.array_equal(invalid, info.get("_error", np.zeros(2, bool)))
            errors += [str(info["error"][i]) for i in np.flatnonzero(invalid)]
    assert len(errors) <= (5 if pose else 0), errors  # of 100 pose samples
    assert all(any(reason in error for reason in REACH_FAILURES) for error in errors), errors


def camera_spaces(size: int = 128) -> gym.spaces.Dict:
    return gym.spaces.Dict({
        **{f"{camera}_rgb": gym.spaces.Box(0, 255, (size, size, 3), np.uint8) for camera in CAMERAS},
        **{f"{camera}_depth": gym.spaces.Box(-np.inf, np.inf, (size, size), np.float32) for camera in CAMERAS},
        "joint_positions": gym.spaces.Box(-np.inf, np.inf, (7,), np.float64)})


def test_batched_observations_take_no_memory_per_env():
    """gymnasium's batch_space writes out every bound: 4096 envs of five 128x128 cameras here would be
    about 7 GB of bounds and masks. The batched space's bounds are views of the single env's."""
    single = camera_spaces()
    tracemalloc.start()
    try:
        batched = batched_observations(single, 4096)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20
    assert all(space.low.strides[0] == 0 and space.bounded_below.strides[0] == 0 for space in batched.values())
    assert batched["front_rgb"].shape == (4096, 128, 128, 3)


def test_batched_observations_behave_as_gymnasiums_batch_space():
    single = camera_spaces(size=4)
    ours, theirs = batched_observations(single, 3), batch_space(single, 3)
    assert ours == theirs and theirs == ours
    sample = ours.sample()
    assert ours.contains(sample) and theirs.contains(sample) and ours.contains(theirs.sample())
    outside = {key: value.copy() for key, value in sample.items()}
    outside["joint_positions"][1, 0] = np.nan
    assert not ours.contains(outside)
    again = pickle.loads(pickle.dumps(ours))
    assert again == ours and again["front_rgb"].low.strides[0] == 0
    assert "Box(0, 255, (3, 4, 4, 3), uint8)" in repr(ours)
