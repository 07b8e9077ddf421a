"""Checks of what a task gives a policy against upstream's definitions: task_low_dim_state where the upstream
task file defines get_low_dim_state (else: an order that does not tell the variation's target), and the
shaped reward where it defines reward(). The mujoco backend in this process (no cameras); mjwarp on warp's
CPU device (two worlds, the same seeds)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from task_checks import MJWARP, config

from rlbench_vec.backends.mujoco import BACKEND
from rlbench_vec.backends.mujoco.backend import use_renderer
from rlbench_vec.spec import observation_spec

SEEDS = (3, 4)
STEPS = 3  # random joint-velocity actions per episode

# what the upstream definition computes from one observation (gripper_pose, task_low_dim_state)
FromObservation = Callable[[np.ndarray, np.ndarray], float]
Target = Callable[[Any, int], np.ndarray]  # (the mujoco backend's Simulation, variation) -> the target's xyz


def observe(backend) -> dict[str, np.ndarray]:
    spec = observation_spec(backend.config)
    out = {key: np.zeros(s.shape, s.dtype) for key, s in spec.items()}
    backend.write_observation(out)
    return out


def random_actions(seed: int) -> np.ndarray:
    actions = np.ones((STEPS, 8), np.float32)  # gripper open
    actions[:, :7] = np.random.default_rng(seed).uniform(-0.4, 0.4, (STEPS, 7))
    return actions


def assert_rewards(rewards: np.ndarray, expected) -> None:
    """mjwarp's rewards (float32 positions) are upstream's computed from its observations."""
    np.testing.assert_allclose(rewards, expected, atol=1e-5)


def check_upstream_state(task: str, upstream: Callable[[object], np.ndarray], seed: int = SEEDS[0]) -> None:
    """task_low_dim_state is `upstream(world)` (the upstream get_low_dim_state on our world) after reset and
    after a few actions; mjwarp's is the mujoco backend's for the same seeds (task_checks.check_mjwarp)."""
    backend = BACKEND(config(task), 0)
    try:
        backend.reset(seed, None)
        for action in [None, *random_actions(seed)]:
            if action is not None:
                backend.step(action)
            expected = upstream(backend.sim.world)
            state = observe(backend)["task_low_dim_state"]
            assert state.shape == expected.shape, (state.shape, expected.shape)
            np.testing.assert_allclose(state, expected, atol=1e-9)
    finally:
        backend.close()


def check_state_hides_target(task: str, episodes: list[tuple[int, int]], target: Target) -> None:
    """The target's xyz (`target(simulation, variation)`, found as the task's text names it: by colour, by
    name) sits at different places of task_low_dim_state in the episodes (seed, variation): the state's
    order does not tell the target."""
    backend = BACKEND(config(task), 0)
    places = set()
    try:
        for seed, variation in episodes:
            backend.reset(seed, {"variation": variation})
            state, xyz = observe(backend)["task_low_dim_state"], target(backend.sim, variation)
            found = [k for k in range(len(state) - 2) if np.allclose(state[k:k + 3], xyz, atol=1e-9)]
            assert len(found) == 1, f"{task}: the target's xyz {xyz} in {state}: at {found}"
            places.add(found[0])
    finally:
        backend.close()
    assert len(places) > 1, f"{task}: the target is always at {places} of the state"


def coloured(sim, names: tuple[str, ...], rgb) -> str:
    """The one of the geoms `names` that has colour `rgb`."""
    matches = [name for name in names if np.allclose(sim.model.geom(name).rgba[:3], rgb)]
    assert len(matches) == 1, (names, rgb, matches)
    return matches[0]


def check_shaped_reward(task: str, upstream: FromObservation, mjwarp: bool = True) -> None:
    """With shaped_rewards, every step's reward is upstream's reward() computed from the observation after
    it (and an oracle demo still ends in success), on mujoco and (unless a test of the task checks it
    otherwise) on mjwarp, the same seeds and actions."""
    cfg = config(task, backend_options={"shaped_rewards": True})
    BACKEND.validate(cfg)
    backend = BACKEND(cfg, 0)
    try:
        for seed in SEEDS:
            backend.reset(seed, None)
            for action in random_actions(seed):
                reward = backend.step(action).reward
                out = observe(backend)
                assert reward < 0
                np.testing.assert_allclose(reward, upstream(out["gripper_pose"], out["task_low_dim_state"]),
                                           rtol=1e-9)
        demo, = backend.get_demos(1, seed=SEEDS[0])  # success still ends the episode, and is told apart
        assert demo.success
    finally:
        backend.close()
    if MJWARP and mjwarp:
        use_renderer(cfg)
        from rlbench_vec.backends.mjwarp.simulation import BatchedSimulation

        sim = BatchedSimulation(cfg, len(SEEDS), "cpu")
        try:
            sim.reset(seeds=list(SEEDS))
            for step in range(STEPS):
                result = sim.step(np.stack([random_actions(seed)[step] for seed in SEEDS]))
                out = {key: tensor.cpu().numpy() for key, tensor in sim.observe().items()}
                expected = [upstream(out["gripper_pose"][w], out["task_low_dim_state"][w]) for w in range(len(SEEDS))]
                assert_rewards(result.reward.cpu().numpy(), expected)
        finally:
            sim.close()
