"""The gymnasium contract: RLBenchVectorEnv as a VectorEnv (spaces, next-step autoreset, wrappers,
call/get_attr/set_attr, render) and the single-env RLBenchEnv under gymnasium's env checker."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env, data_equivalence
from gymnasium.vector import AutoresetMode, SyncVectorEnv, VectorEnv
from gymnasium.vector.utils import batch_space
from gymnasium.wrappers import vector as vector_wrappers

from rlbench_vec import ENV_ID, RLBenchVectorEnv
from rlbench_vec.errors import ConfigError
from rlbench_vec.gym_env import RLBenchEnv
from rlbench_vec.gym_env import make_env as make_single_env

SYNTHETIC = dict(backend="synthetic", cameras=("front",), image_size=(16, 16))
ENDS_AFTER_3 = dict(SYNTHETIC, backend_options={"episode_length": 3})
MUJOCO = dict(backend="mujoco", cameras=(), low_dim=("joint_positions", "gripper_pose", "task_low_dim_state"),
              arm_mode="joint_velocity", absolute_mode=False)
needs_mujoco = pytest.mark.skipif(importlib.util.find_spec("mujoco") is None, reason="mujoco is not installed")


@pytest.fixture
def single_envs():
    """Build single envs; close them after the test."""
    envs: list[RLBenchEnv] = []

    def factory(**kwargs) -> RLBenchEnv:
        envs.append(make_single_env(**kwargs))
        return envs[-1]

    yield factory
    for env in envs:
        env.close()


def quiet_check_env(env: gym.Env, **kwargs) -> None:
    """gymnasium's checker, with its advice about unbounded Boxes silenced (RLBench defines no bounds),
    and its note that an env made without gymnasium.make has no spec to remake it from (the
    gymnasium.make test below covers that)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*infinity.*")
        warnings.filterwarnings("ignore", message=".*normalized space.*")
        warnings.filterwarnings("ignore", message=".*not having a spec.*")
        check_env(env, **kwargs)


# ---------------------------------------------------------------- the vector env


def test_is_a_gymnasium_vector_env_with_batched_spaces(make_env):
    env = make_env(num_envs=3, **SYNTHETIC)
    assert isinstance(env, VectorEnv) and env.num_envs == 3
    assert env.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    assert env.observation_space == batch_space(env.single_observation_space, 3)
    assert env.action_space == batch_space(env.single_action_space, 3)
    obs, info = env.reset(seed=0)
    assert obs in env.observation_space and isinstance(info, dict)
    env.action_space.seed(0)
    obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
    assert obs in env.observation_space
    assert reward.shape == terminated.shape == truncated.shape == (3,)
    assert terminated.dtype == truncated.dtype == bool and isinstance(info, dict)


def test_matches_gymnasium_sync_vector_env_step_for_step(make_env, single_envs):
    """The same envs, seeds and actions through gymnasium's reference SyncVectorEnv (next-step
    autoreset) give the same observations, rewards, terminations and truncations."""
    ours = make_env(num_envs=2, copy_obs=True, **ENDS_AFTER_3)  # results are kept across steps below
    reference = SyncVectorEnv([lambda: single_envs(**ENDS_AFTER_3)] * 2, autoreset_mode=AutoresetMode.NEXT_STEP)
    results, expected = [ours.reset(seed=3)], [reference.reset(seed=3)]
    rng = np.random.default_rng(0)
    for _ in range(8):  # two episode ends and their autoresets
        actions = rng.uniform(-1, 1, (2, 8)).astype(np.float32)
        results.append(ours.step(actions))
        expected.append(reference.step(actions))
    reference.close()
    for got, ref in zip(results, expected):
        # the single env gives a scalar (gripper_open) as shape (1,), the vector env per env as ()
        ref_obs = {key: value.reshape(got[0][key].shape) for key, value in ref[0].items()}
        assert data_equivalence((got[0], *got[1:-1]), (ref_obs, *ref[1:-1]), exact=True)  # obs, reward, ends
        # info: a superset of gymnasium's (ours adds info["autoreset"] on autoreset steps)
        assert all(data_equivalence(got[-1][key], value) for key, value in ref[-1].items())


def test_record_episode_statistics_and_normalisation_wrappers(make_env):
    env = make_env(num_envs=2, **ENDS_AFTER_3)
    wrapped = vector_wrappers.RecordEpisodeStatistics(env)
    wrapped = vector_wrappers.FlattenObservation(wrapped)
    wrapped = vector_wrappers.NormalizeObservation(wrapped)
    wrapped = vector_wrappers.ClipAction(wrapped)
    wrapped = vector_wrappers.NormalizeReward(wrapped)
    wrapped = vector_wrappers.DictInfoToList(wrapped)
    obs, infos = wrapped.reset(seed=0)
    assert obs.shape == (2, gym.spaces.flatdim(env.single_observation_space)) and len(infos) == 2
    episodes = []
    for _ in range(8):
        obs, reward, terminated, truncated, infos = wrapped.step(wrapped.action_space.sample())
        assert np.isfinite(obs).all() and np.isfinite(reward).all()
        episodes += [info["episode"] for info in infos if "episode" in info]
    # Episodes end at steps 3 and 7 (step 4 is the autoreset): 2 per env, each of length 3, return 1.
    assert len(episodes) == 4
    assert all(e["l"] == 3 and e["r"] == 1.0 for e in episodes)


def test_call_get_attr_set_attr(make_env):
    env = make_env(num_envs=2, **SYNTHETIC)
    env.reset(seed=0)
    env.step(np.zeros((2, 8)))
    assert env.get_attr("steps") == (1, 1)
    env.set_attr("step_cost_s", [0.0, 0.001])
    assert env.get_attr("step_cost_s") == (0.0, 0.001)
    env.set_attr("step_cost_s", 0.0)
    assert env.call("step_cost_s") == (0.0, 0.0)  # a non-callable attribute is read, as gymnasium does
    assert env.call("task_state_size", env.env_config, env_ids=[1]) == (3,)  # a method, with arguments
    with pytest.raises(ConfigError, match="public"):
        env.get_attr("_bound")


def test_importing_the_package_alone_registers_the_id_for_make():
    """As docs/ecosystem.md writes it, in a fresh interpreter: `import rlbench_vec`, then gymnasium.make."""
    script = ("import gymnasium as gym, rlbench_vec\n"
              f"env = gym.make({ENV_ID!r}, backend='synthetic', cameras=(), low_dim=('gripper_open',))\n"
              "obs, info = env.reset(seed=0)\n"
              "print(type(env.unwrapped).__name__, sorted(obs))\n"
              "env.close()\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[0] == "RLBenchEnv ['gripper_open']"


def test_make_vec_builds_the_vector_env():
    env = gym.make_vec(ENV_ID, num_envs=2, **SYNTHETIC)
    try:
        assert isinstance(env, RLBenchVectorEnv) and env.num_envs == 2
    finally:
        env.close()


@needs_mujoco
def test_render_returns_one_frame_per_env_of_the_chosen_camera(make_env):
    env = make_env(num_envs=2, image_size=(24, 16), **MUJOCO)
    env.reset(seed=0)
    frames = env.render("overhead")
    assert frames.shape == (2, 16, 24, 3) and frames.dtype == np.uint8 and frames.any()
    assert not np.array_equal(frames, env.render("front"))


# ---------------------------------------------------------------- the single env


def test_single_env_passes_gymnasium_env_checker(single_envs):
    env = single_envs(**ENDS_AFTER_3)
    quiet_check_env(env, skip_render_check=True)  # the synthetic backend does not render


@needs_mujoco
def test_single_mujoco_env_passes_env_checker_with_render(single_envs):
    env = single_envs(render_mode="rgb_array", render_camera="front", image_size=(24, 16), **MUJOCO)
    quiet_check_env(env)
    env.reset(seed=0)
    assert env.render().shape == (16, 24, 3)


@needs_mujoco
def test_gymnasium_make_with_its_own_checks():
    env = gym.make(ENV_ID, render_mode="rgb_array", image_size=(24, 16), **MUJOCO)  # PassiveEnvChecker too
    try:
        quiet_check_env(env.unwrapped)  # with a spec: also remakes the env for every render mode
    finally:
        env.close()


@needs_mujoco
def test_the_default_observations_have_finite_bounds_wherever_a_physical_limit_exists():
    """gymnasium's checker on the id with the default observations (cameras cut to one, smaller): five
    warnings, no more: its advice to normalise the action space (RLBench's units are kept) and the two
    unbounded keys, joint velocities and task_low_dim_state; every observation lies in its bounds."""
    env = gym.make(ENV_ID, render_mode="rgb_array", cameras=("wrist",), image_size=(24, 16))
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            check_env(env.unwrapped)
        unbounded = [key for key, box in env.observation_space.items() if not box.is_bounded()]
        assert unbounded == ["joint_velocities", "task_low_dim_state"]
        assert len(caught) <= 5, [str(w.message) for w in caught]
    finally:
        env.close()


def test_single_env_unbatches_and_asks_for_reset_after_the_end(single_envs):
    env = single_envs(**ENDS_AFTER_3)
    with pytest.raises(gym.error.ResetNeeded):
        env.step(np.zeros(8))
    obs, info = env.reset(seed=5)
    assert obs["joint_positions"].shape == (7,) and obs["gripper_open"].shape == (1,)
    assert info["descriptions"] == ["synthetic reach_target"]
    for _ in range(3):
        kept = obs
        obs, reward, terminated, truncated, info = env.step(np.zeros(8, np.float32))
        assert isinstance(reward, float) and type(terminated) is bool and type(truncated) is bool
    assert terminated and reward == 1.0
    assert not np.shares_memory(obs["front_rgb"], kept["front_rgb"])  # copies, yours to keep
    with pytest.raises(gym.error.ResetNeeded):
        env.step(np.zeros(8))


def test_single_env_refuses_vector_only_options():
    with pytest.raises(ConfigError, match="num_envs"):
        make_single_env(num_envs=2, **SYNTHETIC)
    with pytest.raises(ConfigError, match="render_mode"):
        make_single_env(render_mode="human", **SYNTHETIC)
