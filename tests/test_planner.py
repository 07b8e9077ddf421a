"""arm_mode="planning" on mujoco as RLBench's EndEffectorPoseViaPlanning (backends/mujoco/planner.py): a keyframe
whose straight path is blocked by a block goes around it with collision checking on and straight through it with
PerAct's ignore_collisions set; a target with no collision-free configuration is an invalid action with its
reason (ConfigurationPathError), or with retry_ignoring_collisions (PerAct's fork) reached anyway; RRTConnect draws
from its own generator only."""

from __future__ import annotations

import numpy as np
import pytest

SEED = 3  # a layout whose block the arm can pass on both sides
SIDE = np.array([0.0, 0.12, 0.0])  # the keyframes, either side of the block at its height


def planning_env(**backend_options):
    from rlbench_vec import RLBenchVectorEnv

    return RLBenchVectorEnv(num_envs=1, task="pick_and_lift", backend="mujoco", arm_mode="planning",
                            ignore_collisions_flag=True, cameras=(), modalities=(), max_episode_steps=10,
                            low_dim=("gripper_pose", "task_low_dim_state"), backend_options=backend_options)


@pytest.fixture(scope="module")
def env():
    env = planning_env()
    yield env
    env.close()


def keyframe(position: np.ndarray, quat: np.ndarray, ignore_collisions: float) -> np.ndarray:
    return np.concatenate([position, quat, [1.0, ignore_collisions]])[None].astype(np.float32)


def blocked_move(env, ignore_collisions: float) -> tuple[dict, np.ndarray, np.ndarray]:
    """From one side of the block to the other at its height; returns the last step and where the block was."""
    obs, _ = env.reset(seed=SEED)
    block, quat = obs["task_low_dim_state"][0, :3].copy(), obs["gripper_pose"][0, 3:7].copy()
    env.step(keyframe(block - SIDE, quat, 1.0))
    obs, _, terminated, _, info = env.step(keyframe(block + SIDE, quat, ignore_collisions))
    assert not terminated[0], info.get("error")
    return obs, block, block + SIDE


def test_a_blocked_keyframe_goes_around_with_checking_and_straight_through_with_ignore_collisions(env):
    obs, block, target = blocked_move(env, ignore_collisions=0.0)
    np.testing.assert_allclose(obs["gripper_pose"][0, :3], target, atol=0.01)
    assert np.linalg.norm(obs["task_low_dim_state"][0, :3] - block) < 0.005, "the arm went through the block"
    obs, block, target = blocked_move(env, ignore_collisions=1.0)
    np.testing.assert_allclose(obs["gripper_pose"][0, :3], target, atol=0.01)
    assert np.linalg.norm(obs["task_low_dim_state"][0, :3] - block) > 0.05, "the straight path pushes the block"


def test_a_target_inside_the_table_has_no_path_and_says_why(env):
    retrying = planning_env(retry_ignoring_collisions=True)
    try:
        for tried, expect_path in ((env, False), (retrying, True)):
            obs, _ = tried.reset(seed=SEED)
            block, quat = obs["task_low_dim_state"][0, :3].copy(), obs["gripper_pose"][0, 3:7].copy()
            into_table = block - [0, 0, 0.04]  # the fingertips 1.5 cm into the table top in every configuration
            _, reward, terminated, _, info = tried.step(keyframe(into_table, quat, 0.0))
            if expect_path:  # PerAct's fork: the failed plan retried ignoring collisions
                assert not terminated[0], info.get("error")
                continue
            assert terminated[0] and reward[0] == 0.0 and info["invalid_action"][0]
            assert info["error"][0].startswith(
                "ConfigurationPathError: A path could not be found: every IK configuration of the target collides")
    finally:
        retrying.close()



def test_rrt_connect_goes_around_an_obstacle_with_its_own_randomness_only():
    """RRTConnect on a square with a wall in the middle: a path from start to a goal whose every segment is free,
    the same for the same seed whatever ran before (no generator shared between plans), another for another."""
    from rlbench_vec.backends.mujoco.rrt_connect import rrt_connect

    def free(q: np.ndarray) -> bool:
        return not (abs(q[0]) < 0.1 and q[1] < 0.6)  # the wall: x in (-0.1, 0.1) below y = 0.6

    def segment_free(points: list) -> bool:
        return all(free(a + (b - a) * t) for a, b in zip(points, points[1:]) for t in np.linspace(0, 1, 50))

    def plan(seed: int) -> list:
        return rrt_connect(np.array([-0.5, 0.0]), [np.array([0.5, 0.0])], np.array([-1.0, -1.0]),
                           np.array([1.0, 1.0]), segment_free, np.random.default_rng(seed), 0.2, 2000)

    path = plan(0)
    assert path is not None and segment_free(path) and max(q[1] for q in path) > 0.6  # over the wall's end
    np.testing.assert_array_equal(path[0], [-0.5, 0.0])
    np.testing.assert_array_equal(path[-1], [0.5, 0.0])
    plan(1)
    np.testing.assert_array_equal(np.array(plan(0)), np.array(path))
