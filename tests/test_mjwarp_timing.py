"""Each world of the mjwarp backend on its own clock, and the two action timings, on warp's CPU device
(RLBENCH_VEC_MJWARP_DEVICE=cuda:0 runs them on a GPU, where bit-identity needs
backend_options["deterministic"]).

A world's trajectory must be a function of its own seed and actions: the same world, given the same
actions, ends bit-for-bit the same whatever the other worlds do (long ik moves, gripper changes, no
action at all). action_timing="fixed" runs one control step per action and says what is still under
way, with the fingers moving as the mujoco backend's. Both through RLBenchVectorEnv: test_mjwarp_vector_env.py.
"""

from __future__ import annotations

import os
from dataclasses import replace

import numpy as np
import pytest
from conftest import needs

from rlbench_vec.backends.mujoco.backend import choose_variation, task_class, use_renderer
from rlbench_vec.config import EnvConfig
from rlbench_vec.errors import ActionError

pytestmark = needs("gpu", "warp", "mujoco_warp", "torch")

DEVICE = os.environ.get("RLBENCH_VEC_MJWARP_DEVICE", "cpu")
SEEDS = [5, 6, 7]
STEPS = 6


def config(**kwargs) -> EnvConfig:
    return EnvConfig(**{"task": "pick_and_lift", "backend": "mujoco", "absolute_mode": False, "cameras": ("front",),
                        "modalities": ("rgb",), "image_size": (24, 24), **kwargs}).validated()


def batched(cfg: EnvConfig, worlds: int):
    use_renderer(cfg)  # MuJoCo's GL backend is fixed at its first import
    from rlbench_vec.backends.mjwarp.simulation import BatchedSimulation

    return BatchedSimulation(cfg, worlds, DEVICE, deterministic=DEVICE != "cpu")


def actions(sim, step: int, busy: bool) -> np.ndarray:
    """World 1: small moves and a gripper that changes twice in three steps. World 0, when busy: long
    moves the other way and a gripper change every step; else it holds still, gripper open."""
    a = np.zeros((sim.num_worlds, sim.action_size), np.float32)
    sign = (-1) ** step
    if sim.config.arm_mode == "ik":
        a[:, 6] = 1.0  # identity rotation (delta mode)
        a[1, :3] = [0.02, -0.01, -0.02]
        if busy:
            a[0, :3] = [0.15 * sign, 0.1, -0.1 * sign]
    else:
        a[1, :7] = 0.2 * np.sin(np.arange(7) + step)
        if busy:
            a[0, :7] = 0.8 * np.cos(np.arange(7) * step)
    a[:, -1] = 1.0
    a[1, -1] = float(step % 3 != 2)
    if busy:
        a[0, -1] = float(step % 2)
    return a


def trajectory(sim, busy: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Worlds 1 and 2's joint state and observations after each step, and world 2's state before and
    after each step it sat out (it takes an action every other step)."""
    sim.reset(seeds=SEEDS)
    states, observations, idle = [], [], []
    for step in range(STEPS):
        before = sim.d.qpos.numpy()[2].copy()
        active = [True, True, step % 2 == 0]
        out = sim.step(actions(sim, step, busy), active=active)
        assert out.finished.cpu().numpy().tolist() == active
        if not active[2]:
            idle.append((before, sim.d.qpos.numpy()[2].copy()))
        states.append(np.concatenate([sim.d.qpos.numpy()[1:], sim.d.qvel.numpy()[1:]], axis=1))
        obs = sim.observe()
        observations.append(np.concatenate([obs["joint_positions"][1:].cpu().numpy().ravel(),
                                            obs["front_rgb"][1:].cpu().numpy().ravel()]))
    return np.array(states), np.array(observations), np.array(idle)


@pytest.mark.parametrize("arm_mode", ["ik", "joint_velocity"])
def test_a_worlds_trajectory_depends_on_its_own_actions_only(arm_mode):
    """Gripper, ik and joint actions: world 0 holding still or busy with long moves and gripper changes
    (its actions take up to 26 control steps where world 1's take 1-16) leaves worlds 1 and 2 bit-for-bit
    the same, and world 2 does not move at all while it has no action."""
    sim = batched(config(arm_mode=arm_mode), 3)
    quiet_states, quiet_obs, quiet_idle = trajectory(sim, busy=False)
    busy_states, busy_obs, busy_idle = trajectory(sim, busy=True)
    assert np.abs(quiet_states[1:] - quiet_states[:-1]).max() > 1e-3  # world 1 moved
    assert np.array_equal(quiet_states, busy_states)
    assert np.array_equal(quiet_obs, busy_obs)
    for before, after in (*quiet_idle, *busy_idle):
        assert np.array_equal(before, after)
    sim.close()


def test_fixed_timing_moves_the_fingers_as_the_mujoco_backend_and_says_when_they_stop():
    """One control step per action for every world; a close command moves the fingers step by step
    alongside the arm, as backend="mujoco" does with action_timing="fixed", and `moving` keeps the
    gripper bit until they stop; a world with no action stays frozen."""
    from rlbench_vec.backends.mjwarp.control import GRIPPER_MOVING
    from rlbench_vec.backends.mujoco.simulation import Simulation

    cfg = config(arm_mode="joint_velocity", cameras=(), modalities=(), action_timing="fixed")
    sim = batched(cfg, 2)
    sim.reset(seeds=[3, 4])
    host = Simulation(cfg)
    rng = np.random.default_rng(3)
    host.reset(choose_variation(task_class(cfg), cfg, None, rng), rng)
    close = np.array([0, 0.2, 0, 0, 0, 0, 0, 0], np.float32)
    fingers = host.panda.finger_qpos_adr
    frozen = sim.d.qpos.numpy()[1].copy()
    moving = []
    for _ in range(16):
        out = sim.step(np.stack([close, close]), active=[True, False])
        info = host.act(close).info
        assert out.control_steps[0] == 1
        moving.append(bool(out.moving[0] & GRIPPER_MOVING))
        assert moving[-1] == info.get("gripper_moving", False)
        np.testing.assert_allclose(sim.d.qpos.numpy()[0, fingers], host.data.qpos[fingers], atol=2e-5)
    assert moving[0] and not moving[-1]
    assert np.array_equal(sim.d.qpos.numpy()[1], frozen)

    rlbench = batched(replace(cfg, action_timing="rlbench"), 1)
    rlbench.reset(seeds=[3])
    # rlbench timing: the arm's control step, then the gripper's, as many as the fixed steps took
    assert int(rlbench.step(close[None]).control_steps[0]) == 1 + moving.index(False) + 1
    sim.close()
    rlbench.close()


def test_partial_steps_leave_unfinished_worlds_in_their_action():
    """step(min_done=1): returns once one world's action is done; the world still moving carries on at
    the next step while the finished one takes a new action, and no world can be given a second action
    while its first runs. The long action ends exactly as if stepped to its end at once."""
    sim = batched(config(arm_mode="ik"), 2)
    sim.reset(seeds=[5, 6])
    far = actions(sim, 0, busy=True)  # world 0: a long move and a gripper change
    out = sim.step(far, min_done=1)
    assert out.finished.cpu().numpy().tolist() == [False, True]
    with pytest.raises(ActionError, match="still in their previous action"):
        sim.step(far, active=[True, False])
    steps = 1
    while not sim.step(far, active=[False, True], min_done=1).finished[0]:
        steps += 1
    partial = sim.d.qpos.numpy()[0].copy()

    sim.reset(seeds=[5, 6])
    sim.step(far, active=[True, False])
    assert np.array_equal(sim.d.qpos.numpy()[0], partial) and steps > 1
    sim.close()


def test_the_group_returns_worlds_as_their_actions_finish():
    """MjwarpGroup's partial completion (EnvGroup.start/advance, what a worker runs for recv(min_envs)):
    the first advance returns the worlds done with their short actions and their results; they get
    new actions and join the world still moving; the long action's result comes once, when it is done."""
    from rlbench_vec.backends.mjwarp.group import MjwarpGroup

    cfg = EnvConfig(task="pick_and_lift", backend="mjwarp", arm_mode="ik", absolute_mode=False, cameras=(),
                    backend_options={"device": DEVICE}).validated()
    use_renderer(replace(cfg, backend="mujoco"))
    group = MjwarpGroup(cfg, range(3))
    assert group.partial_steps
    group.reset(np.arange(3), SEEDS, [None] * 3)
    far = actions(group.sim, 0, busy=True)  # world 0: a long move and a gripper change; worlds 1, 2: short moves
    group.start(np.arange(3), far)
    done, result = group.advance(1)
    assert 0 not in done and len(done) >= 1 and len(result.reward) == len(done)
    reported = list(done)
    while 0 not in done:
        group.start(done, far[done])
        done, result = group.advance(1)
        reported += list(done)
    assert reported.count(0) == 1 and len(reported) > 3
    assert not result.terminated.any() and result.truncated is not None and not result.truncated.any()
    group.close()
