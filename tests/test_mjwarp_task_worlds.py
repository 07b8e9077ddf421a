"""backend="mjwarp" with a task per env (task_worlds.py: a simulator per task in the worker), through
RLBenchVectorEnv on warp's CPU device: each env's task, descriptions and padded task_low_dim_state as the
mujoco backend's, envs of one task and of another untouched by an env's actions, partial steps and resets
across the simulators, a reset to another task refused with the reason.

One vector env for the file (no cameras, three envs of two tasks: two simulators in one worker).
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from conftest import needs

from rlbench_vec import RLBenchVectorEnv
from rlbench_vec.backends.mujoco.backend import task_class, use_renderer
from rlbench_vec.config import EnvConfig
from rlbench_vec.errors import ConfigError

pytestmark = needs("gpu", "warp", "mujoco_warp", "torch")

DEVICE = os.environ.get("RLBENCH_VEC_MJWARP_DEVICE", "cpu")
TASKS = ["pick_and_lift", "reach_target", "pick_and_lift"]  # envs 0 and 2: worlds 0 and 1 of one simulator
OPTIONS = {"arm_mode": "joint_velocity", "cameras": (), "low_dim": ("joint_positions", "task_low_dim_state")}
SEED = 7


@pytest.fixture(scope="module")
def env():
    vector = RLBenchVectorEnv(num_envs=3, task=TASKS, backend="mjwarp", backend_options={"device": DEVICE},
                              autoreset_mode="disabled", **OPTIONS)
    yield vector
    vector.close()


def start(task: str, seed: int):
    """The mujoco backend's simulation of env `seed`'s first episode of `task` (no renderer)."""
    cfg = EnvConfig(task=task, backend="mujoco", **OPTIONS).validated()
    use_renderer(cfg)
    from rlbench_vec.backends.mujoco.simulation import Simulation  # imports MuJoCo

    host = Simulation(cfg)
    host.reset(0, np.random.default_rng(seed))
    return host


def moves(seed: int, steps: int) -> np.ndarray:
    """(steps, 3, 8) joint velocities, gripper kept open."""
    actions = np.random.default_rng(seed).uniform(-0.6, 0.6, (steps, 3, 8)).astype(np.float32)
    actions[..., -1] = 1.0
    return actions


def trajectory(env, actions: np.ndarray) -> np.ndarray:
    env.reset(seed=SEED)
    return np.stack([env.step(step)[0]["joint_positions"].copy() for step in actions])


def test_each_env_runs_its_own_task_as_the_mujoco_backend_starts_it(env):
    obs, info = env.reset(seed=SEED)
    sizes = [task_class(EnvConfig(task=task).validated()).state_size() for task in TASKS]
    assert sizes[1] < sizes[0]  # reach_target's state is padded to pick_and_lift's
    assert list(info["task"]) == TASKS and info["task_low_dim_size"].tolist() == sizes
    assert list(env.get_attr("task")) == TASKS
    assert obs["task_low_dim_state"].shape == (3, max(sizes))
    for i, task in enumerate(TASKS):
        reference = start(task, SEED + i)
        state = obs["task_low_dim_state"][i]
        np.testing.assert_allclose(state[:sizes[i]], reference.low_dim_state(), atol=1e-5)
        assert not state[sizes[i]:].any()
        assert list(info["descriptions"][i]) == reference.task.descriptions(0)

    with pytest.raises(ConfigError, match="cannot move to another task's simulator.*backend='mujoco'"):
        env.reset(options={"env_options": [None, {"task": "pick_and_lift"}, None]})
    _, info = env.reset(seed=SEED, options={"env_options": [{"task": "pick_and_lift"}, None, None]})  # its own
    assert list(info["task"]) == TASKS


def test_an_envs_actions_change_no_other_envs_trajectory(env):
    """Env 0's other actions leave env 2 (its task's simulator) and env 1 (the other one) bit-identical."""
    actions = moves(0, 3)
    base = trajectory(env, actions)
    actions[:, 0] = moves(1, 3)[:, 0]
    changed = trajectory(env, actions)
    assert np.abs(changed[:, 0] - base[:, 0]).max() > 1e-3
    np.testing.assert_array_equal(changed[:, 1:], base[:, 1:])


def test_partial_steps_and_resets_across_the_simulators(env):
    home, _ = env.reset(seed=SEED)
    home = home["joint_positions"].copy()
    for step in moves(2, 2):
        moved = env.step(step)[0]["joint_positions"].copy()
    # a reset of one env of each simulator: the third keeps its state
    obs, _ = env.reset(seed=[SEED, SEED + 1, None], options={"reset_mask": [True, True, False]})
    np.testing.assert_allclose(obs["joint_positions"][:2], home[:2], atol=1e-6)
    np.testing.assert_array_equal(obs["joint_positions"][2], moved[2])
    # steps of envs 0 (pick_and_lift) and 1 (reach_target) while env 2 starts a new episode
    env.send(moves(3, 1)[0, :2], env_ids=[0, 1])
    env.send_reset([2], seeds=[SEED + 5])
    answered = {}
    while len(answered) < 3:
        obs, _, _, _, info = env.recv(min_envs=1)
        answered.update({env_id: (obs["joint_positions"][row].copy(), obs["task_low_dim_state"][row].copy())
                         for row, env_id in enumerate(info["env_id"].tolist())})
    assert all(np.abs(answered[i][0] - home[i]).max() > 1e-3 for i in (0, 1))
    assert np.abs(answered[2][0] - moved[2]).max() > 1e-3  # back at a start, not where it was moved
    np.testing.assert_allclose(answered[2][1], start("pick_and_lift", SEED + 5).low_dim_state(), atol=1e-5)
