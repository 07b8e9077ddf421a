"""rlbench_vec.sb3.SB3VecEnv under stable-baselines3: same-step resets with terminal observations,
observations SB3 may keep, the VecEnv interface, SB3's wrappers and checker, and PPO training."""

from __future__ import annotations

import os
import signal

import gymnasium as gym
import numpy as np
import pytest
from conftest import extra_reason, live_children, own_segments

from rlbench_vec import RLBenchVectorEnv
from rlbench_vec import make_env as make_single_env
from rlbench_vec.errors import ConfigError

pytest.importorskip("stable_baselines3", reason=extra_reason("ecosystem", ["stable_baselines3"]))

from stable_baselines3 import PPO  # noqa: E402
from stable_baselines3.common.env_checker import check_env  # noqa: E402
from stable_baselines3.common.monitor import Monitor  # noqa: E402
from stable_baselines3.common.vec_env import (  # noqa: E402
    VecCheckNan,
    VecFrameStack,
    VecMonitor,
    VecNormalize,
)

from rlbench_vec.sb3 import SB3VecEnv  # noqa: E402

LOW_DIM = ("joint_positions", "gripper_pose", "task_low_dim_state")
REACH = dict(task="reach_target", backend="mujoco", cameras=(), low_dim=LOW_DIM, arm_mode="joint_velocity")


@pytest.fixture
def sb3_env(make_env):  # make_env's leak check runs after this one's envs are closed
    """Build SB3VecEnvs; close them after the test and check that nothing outlived them."""
    envs: list[SB3VecEnv] = []

    def factory(**kwargs) -> SB3VecEnv:
        kwargs = {**REACH, "arm_limit": 1.0, **kwargs}
        envs.append(SB3VecEnv(**kwargs))
        return envs[-1]

    yield factory
    pids = {pid for env in envs for pid in env.vector_env.worker_pids}
    segments = {env.vector_env.shm_name for env in envs}
    for env in envs:
        env.close()
    assert not segments & own_segments(), "shared memory outlived close()"
    assert not [p.pid for p in live_children() if p.pid in pids], "worker processes outlived close()"


def moving_actions(n: int, t: int) -> np.ndarray:
    """Joint velocities that change every step (so observations do), gripper open."""
    actions = np.zeros((n, 8), np.float32)
    actions[:, :7] = 0.5 * np.sin(0.7 * t + np.arange(7))
    actions[:, 7] = 1.0
    return actions


def test_flat_observations_and_bounded_actions(sb3_env):
    env = sb3_env(num_envs=2, observation="flat")
    layout = env.flat_layout
    assert list(layout) == sorted(LOW_DIM)  # gymnasium's Dict orders its keys
    assert env.observation_space == gym.spaces.Box(-np.inf, np.inf, (7 + 7 + 3,), np.float32)
    assert np.all(env.action_space.low == [-1.0] * 7 + [0.0]) and np.all(env.action_space.high == 1.0)
    obs = env.reset()
    assert obs.shape == (2, 17) and obs.dtype == np.float32
    assert all(env.observation_space.contains(row) for row in obs)
    single = env.vector_env.single_observation_space
    assert single["task_low_dim_state"].shape == (3,) and len(env.reset_infos) == 2
    assert all(info["descriptions"] for info in env.reset_infos)


@pytest.mark.parametrize("observation", ["flat", "dict"])
def test_a_finished_episode_resets_within_the_step(sb3_env, make_env, observation):
    """Against the engine's next-step autoreset with the same seed and actions: the final
    observation arrives as terminal_observation, the new episode's first one as the observation."""
    steps = 4
    env = sb3_env(num_envs=2, observation=observation, max_episode_steps=steps, seed=3)
    reference = make_env(num_envs=2, **REACH, max_episode_steps=steps, seed=3, copy_obs=True)

    def as_sb3(obs: dict, i: int):
        if observation == "dict":
            return {key: np.reshape(value[i], env.observation_space[key].shape) for key, value in obs.items()}
        return np.concatenate([np.ravel(obs[key][i]) for key in env.flat_layout]).astype(np.float32)

    def assert_same(ours, theirs):
        if observation == "dict":
            assert ours.keys() == theirs.keys()
            for key in ours:
                np.testing.assert_array_equal(ours[key], theirs[key])
        else:
            np.testing.assert_array_equal(ours, theirs)

    obs = env.reset()
    expected, _ = reference.reset()
    for t in range(2 * steps):
        obs, rewards, dones, infos = env.step(moving_actions(2, t))
        expected, ref_rewards, terminated, truncated, _ = reference.step(moving_actions(2, t))
        np.testing.assert_array_equal(rewards, ref_rewards)
        assert dones.tolist() == (terminated | truncated).tolist() == [(t + 1) % steps == 0] * 2
        for i in range(2):
            if dones[i]:
                assert infos[i]["TimeLimit.truncated"] is True
                assert_same(infos[i]["terminal_observation"], as_sb3(expected, i))
            else:
                assert "terminal_observation" not in infos[i]
        if dones.any():  # the reference resets at its next step: that observation is ours already
            expected, _, _, _, auto_info = reference.step(moving_actions(2, t))
            assert auto_info["autoreset"].all()
            assert [info["variation_index"] for info in env.reset_infos] == auto_info["variation_index"].tolist()
        for i in range(2):
            assert_same(obs[i] if observation == "flat" else {k: v[i] for k, v in obs.items()}, as_sb3(expected, i))


def test_a_task_termination_is_no_time_limit(sb3_env):
    env = sb3_env(num_envs=2, backend="synthetic", backend_options={"episode_length": 3}, observation="flat")
    env.reset()
    for _ in range(2):
        _, rewards, dones, infos = env.step(np.zeros((2, 8), np.float32))
        assert not dones.any()
    _, rewards, dones, infos = env.step(np.zeros((2, 8), np.float32))
    assert dones.all() and rewards.tolist() == [1.0, 1.0]
    assert [info["TimeLimit.truncated"] for info in infos] == [False, False]
    assert all(info["terminal_observation"].shape == env.observation_space.shape for info in infos)


def test_observations_outlive_the_steps_sb3_keeps_them_for(sb3_env):
    """SB3 adds the previous step's observation to its buffer after the next step returned: the
    arrays it got must still hold their values then, and later."""
    env = sb3_env(num_envs=2, observation="dict", max_episode_steps=50)
    kept = [env.reset()]
    snapshots = [{key: value.copy() for key, value in kept[0].items()}]
    for t in range(4):
        obs, *_ = env.step(moving_actions(2, t))
        kept.append(obs)
        snapshots.append({key: value.copy() for key, value in obs.items()})
    assert not np.array_equal(kept[1]["joint_positions"], kept[3]["joint_positions"])  # they did change
    for obs, snapshot in zip(kept, snapshots):
        for key in obs:
            np.testing.assert_array_equal(obs[key], snapshot[key])


def test_vec_env_interface(sb3_env):
    env = sb3_env(num_envs=2, observation="flat", max_episode_steps=20)
    assert env.get_attr("render_mode") == ["rgb_array", "rgb_array"] and env.render_mode == "rgb_array"
    assert env.has_attr("variation") and not env.has_attr("no_such_attribute")
    with pytest.raises(AttributeError, match="no_such_attribute"):
        env.get_attr("no_such_attribute")
    env.set_attr("variation", 5, indices=[1])
    assert env.get_attr("variation", indices=1) == [5]
    env.set_attr("variation", 7)
    assert env.get_attr("variation") == [7, 7]
    frames = env.env_method("render_rgb", "front", indices=[0])
    assert len(frames) == 1 and frames[0].shape == (128, 128, 3) and frames[0].dtype == np.uint8
    assert env.env_is_wrapped(Monitor) == [False, False]
    assert [frame.shape for frame in env.get_images()] == [(128, 128, 3)] * 2
    assert env.render().shape == (256, 128, 3)  # SB3 tiles the envs' frames

    env.seed(11)
    first = env.reset()
    env.seed(11)
    np.testing.assert_array_equal(env.reset(), first)
    env.seed(12)
    assert not np.array_equal(env.reset(), first)
    env.set_options([{"variation": 2}, {"variation": 4}])
    env.reset()
    assert [info["variation_index"] for info in env.reset_infos] == [2, 4]


def test_a_worker_restart_ends_the_episode_without_a_terminal_observation(sb3_env):
    env = sb3_env(num_envs=2, observation="flat", envs_per_worker=1, max_episode_steps=50)
    env.reset()
    os.kill(env.vector_env.worker_pid(1), signal.SIGKILL)
    obs, _, dones, infos = env.step(moving_actions(2, 0))
    assert dones.tolist() == [False, True] and infos[1]["restarted"]
    assert "terminal_observation" not in infos[1] and infos[1]["TimeLimit.truncated"] is False
    assert np.isfinite(obs).all()
    _, _, dones, _ = env.step(moving_actions(2, 1))
    assert not dones.any()


def test_sb3_wrappers_and_ppo_train_over_it(sb3_env):
    """PPO through SB3's own wrappers: NaN checks, observation/reward normalisation (which also
    normalises terminal observations), frame stacking (which reads them) and episode statistics."""
    env = sb3_env(num_envs=2, observation="flat", max_episode_steps=10)
    wrapped = VecMonitor(VecFrameStack(VecNormalize(VecCheckNan(env, raise_exception=True)), n_stack=2))
    model = PPO("MlpPolicy", wrapped, n_steps=64, batch_size=64, n_epochs=2, seed=0, device="cpu")
    model.learn(total_timesteps=256)
    assert model.num_timesteps == 256
    assert len(model.ep_info_buffer) == 2 * (128 // 10)  # VecMonitor saw every finished episode of both envs
    assert all(info["l"] == 10 for info in model.ep_info_buffer)
    assert np.isfinite(model.rollout_buffer.values).all()


def test_ppo_with_camera_images_and_multi_input_policy(sb3_env):
    env = sb3_env(num_envs=2, cameras=("front",), image_size=(64, 64), modalities=("rgb",), max_episode_steps=8)
    assert env.observation_space["front_rgb"].shape == (64, 64, 3)
    model = PPO("MultiInputPolicy", env, n_steps=16, batch_size=32, n_epochs=1, seed=0, device="cpu")
    model.learn(total_timesteps=32)
    assert model.num_timesteps == 32
    assert model.observation_space["front_rgb"].shape == (3, 64, 64)  # SB3 transposed the images itself


@pytest.mark.parametrize("arm_mode", ["joint_velocity", "joint_position", "ik", "planning"])
def test_sb3_check_env_passes_on_the_single_env(arm_mode):
    """SB3's checker takes a single gymnasium.Env and refuses unbounded actions: the env's own bounds
    pass, its random actions step, and its observations (the default low-dim fields, gripper_open as shape
    (1,) among them) lie in their finite bounds."""
    env = make_single_env("reach_target", backend="mujoco", cameras=("front",), image_size=(32, 32),
                          modalities=("rgb", "depth", "mask"), arm_mode=arm_mode, max_episode_steps=10)
    try:
        assert env.observation_space["gripper_open"].shape == (1,)
        check_env(env, warn=False)
    finally:
        env.close()


@pytest.mark.parametrize("options, message", [
    (dict(observation="flat", cameras=("front",)), "cameras=()"),
    (dict(observation="pixels"), "observation must be one of"),
    (dict(autoreset_mode="next_step"), "sets autoreset_mode itself"),
    (dict(copy_obs=True), "sets copy_obs itself"),
    (dict(as_torch=True), "sets as_torch itself"),
    (dict(arm_limit=-1.0), "positive finite"),
])
def test_bad_options_are_refused_before_any_worker_starts(options, message):
    before = {p.pid for p in live_children()}
    with pytest.raises(ConfigError, match=message):
        SB3VecEnv(num_envs=2, **{**REACH, "arm_limit": 1.0, **options})
    assert not {p.pid for p in live_children()} - before


def test_the_engine_underneath_is_the_vector_env(sb3_env):
    env = sb3_env(num_envs=2, observation="flat")
    assert isinstance(env.vector_env, RLBenchVectorEnv)
    assert env.vector_env.vector_config.autoreset_mode == "same_step"
    assert env.vector_env.vector_config.copy_obs is False
