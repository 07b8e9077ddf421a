"""backend_options={"dense_rewards": True}: each step's reward is the task's staged dense reward, recomputed here
from the observation after the step (gripper_pose, task_low_dim_state), on mujoco for the five tasks that declare
one and on mjwarp (warp's CPU device) for the two with a grasp stage, which must also agree with mujoco's; an
oracle episode still ends in success with reward 1. Whether the block or drawer is grasped is not observed: a
reward must be the value with or without the grasp, and each oracle episode must show both."""

from __future__ import annotations

import math

import numpy as np
import pytest
from task_checks import MJWARP

from rlbench_vec.backends.mujoco import BACKEND
from rlbench_vec.backends.mujoco.backend import use_renderer
from rlbench_vec.backends.mujoco.tasks.push_buttons import PushButtons
from rlbench_vec.config import EnvConfig
from rlbench_vec.errors import ConfigError

SEEDS = [21, 22]
PLATE_ABOVE_BASE = 2 * PushButtons.BASE_HALF[2] + PushButtons.PLUNGER_HALF  # the plate's centre, plunger up


def close(a: np.ndarray, b: np.ndarray) -> float:
    return 1.0 - math.tanh(5.0 * float(np.linalg.norm(a - b)))


def candidates(task: str, tip: np.ndarray, state: np.ndarray, start: np.ndarray) -> tuple[float, ...]:
    """The rewards a step can have, from its observation (`start`: the episode's first task_low_dim_state):
    without and with a grasp where the task has a grasp stage."""
    if task == "reach_target":
        return (close(tip, state[:3]) / 2,)
    if task == "pick_and_lift":
        reach = close(tip, state[:3])
        return reach / 4, (reach + 1 + close(state[:3], state[3:6])) / 4
    if task == "push_button":
        plate = state[:3] + [0, 0, PLATE_ABOVE_BASE + state[3]]
        return (close(tip, plate) + min(1.0, abs(state[3] - start[3]) / 0.003)) / 3,
    if task == "slide_block_to_color_target":
        return ((close(tip, state[:3]) + close(state[:3], state[7:10])) / 3,)  # variation 0: the first square
    assert task == "open_drawer"  # variation 0: the bottom drawer
    reach, opened = close(tip, state[:3]), min(1.0, abs(state[9] - start[9]) / 0.15)
    return (reach + opened) / 4, (reach + 1 + opened) / 4


def config(task: str, **options) -> EnvConfig:
    return EnvConfig(task=task, backend="mujoco", cameras=(), low_dim=("gripper_pose", "task_low_dim_state"),
                     arm_mode="ik", absolute_mode=True,
                     backend_options={"dense_rewards": True, **options}).validated()


def check_step(task: str, reward: float, terminated: bool, tip, state, start, seen: set[int]) -> None:
    """The step's reward is one of its candidates (1 on success); `seen` collects which one."""
    if terminated:
        assert reward == 1.0
        return
    options = candidates(task, tip, state, start)
    matches = [k for k, value in enumerate(options) if abs(reward - value) < 1e-5]
    assert matches, f"{task}: reward {reward} is none of {options}"
    seen.add(matches[0])


def test_dense_rewards_are_refused_where_no_task_declares_them_and_beside_shaped_rewards():
    with pytest.raises(ConfigError, match="declares no dense reward.*Tasks with one: .*open_drawer, pick_and_lift"):
        BACKEND.validate(config("stack_blocks"))
    with pytest.raises(ConfigError, match="choose one"):
        BACKEND.validate(config("reach_target", shaped_rewards=True))
    with pytest.raises(ConfigError, match="dense_rewards'] must be True or False"):
        BACKEND.validate(config("reach_target", dense_rewards="yes"))


@pytest.mark.parametrize("task", ["reach_target", "pick_and_lift", "push_button", "slide_block_to_color_target",
                                  "open_drawer"])
def test_dense_rewards_on_mujoco_follow_the_observations_to_success(task):
    cfg = config(task, oracle=True)
    BACKEND.validate(cfg)
    backend = BACKEND(cfg, 0)
    out = {"gripper_pose": np.zeros(7), "task_low_dim_state": np.zeros(BACKEND.task_state_size(cfg))}
    try:
        for seed in SEEDS:
            backend.reset(seed, None)
            backend.write_observation(out)
            start, seen, result = out["task_low_dim_state"].copy(), set(), None
            for _ in range(cfg.max_episode_steps):
                result = backend.step(np.zeros(8, np.float32))  # the oracle acts
                backend.write_observation(out)
                check_step(task, result.reward, result.terminated, out["gripper_pose"][:3],
                           out["task_low_dim_state"], start, seen)
                if result.terminated:
                    break
            assert result is not None and result.terminated and not result.info, (task, seed, result)
            if task in ("pick_and_lift", "open_drawer"):
                assert seen == {0, 1}, f"{task}, seed {seed}: the grasp stage never (or always) counted"
    finally:
        backend.close()


@pytest.mark.skipif(not MJWARP, reason="needs warp, mujoco_warp, torch: the 'gpu' extra (pip install -e '.[gpu]')")
@pytest.mark.parametrize("task", ["pick_and_lift", "open_drawer"])
def test_dense_rewards_on_mjwarp_follow_the_observations_and_agree_with_mujoco(task):
    """Both worlds act the mujoco backend's oracle of their episode (planned on mujoco, stepped alongside)."""
    cfg = config(task)
    use_renderer(cfg)
    from rlbench_vec.backends.mjwarp.simulation import BatchedSimulation

    references = [BACKEND(cfg, 0) for _ in SEEDS]
    sim = BatchedSimulation(cfg, len(SEEDS), "cpu")
    try:
        for reference, seed in zip(references, SEEDS):
            reference.reset(seed, None)
        oracles = [reference.sim.oracle_actions() for reference in references]
        sim.reset(seeds=SEEDS)
        start = sim.observe()["task_low_dim_state"].cpu().numpy().copy()
        done, seen = np.zeros(len(SEEDS), bool), [set(), set()]
        for _ in range(cfg.max_episode_steps):
            actions = np.zeros((len(SEEDS), 8), np.float32)
            expected = np.zeros(len(SEEDS))
            for world, oracle in enumerate(oracles):
                action = None if done[world] else next(oracle, None)
                if action is not None:
                    expected[world] = references[world].step(action).reward
                    actions[world] = action
            result = sim.step(actions, active=~done)
            out = {key: tensor.cpu().numpy() for key, tensor in sim.observe().items()}
            rewards, terminated = result.reward.cpu().numpy(), result.terminated.cpu().numpy()
            for world in np.flatnonzero(~done):
                check_step(task, float(rewards[world]), bool(terminated[world]), out["gripper_pose"][world, :3],
                           out["task_low_dim_state"][world], start[world], seen[world])
            np.testing.assert_allclose(rewards[~done], expected[~done], atol=2e-3)  # float32 against float64
            done |= terminated
            if done.all():
                break
        assert done.all() and all(found == {0, 1} for found in seen), (done, seen)
    finally:
        sim.close()
        for reference in references:
            reference.close()
