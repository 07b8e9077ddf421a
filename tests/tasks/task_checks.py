"""The checks every embedded task passes; each tests/tasks/test_<task>.py calls them with its task's
facts (RLBench's variation count, upstream's descriptions quoted from its task file). Joint-velocity actions.

On mujoco (in this process, no cameras): the name resolves in both spellings, the variation count,
descriptions, variation 0 by default, a settled start, a few steps, an oracle demo that succeeds for one
seed, and the variation past the count refused with the count. On mjwarp (warp's CPU device, two
worlds): reset gives the mujoco backend's task_low_dim_state for the same seeds, a settled start, and a
few steps run without faults.

A settled start: with the arm held still for SETTLE_CHECK_STEPS steps after a reset, no free body of the
task moves more than 5 mm or 0.02 rad, no task joint more than that, and no condition is met.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import replace

import numpy as np
import pytest

from rlbench_vec import list_tasks
from rlbench_vec.backends.mujoco import BACKEND
from rlbench_vec.backends.mujoco.backend import choose_variation, task_class, use_renderer
from rlbench_vec.backends.mujoco.tasks import find_task
from rlbench_vec.config import EnvConfig
from rlbench_vec.errors import ConfigError
from rlbench_vec.spec import observation_spec
from rlbench_vec.task_names import camel_case

LOW_DIM = ("joint_positions", "gripper_pose", "task_low_dim_state")
MJWARP = all(importlib.util.find_spec(name) for name in ("warp", "mujoco_warp", "torch"))
SETTLE_CHECK_STEPS = 10
MOVED, TURNED = 0.005, 0.02  # metres, radians
HOLD = np.array([0, 0, 0, 0, 0, 0, 0, 1], np.float32)  # joint velocities zero, gripper open


def task_motion(model, before: np.ndarray, after: np.ndarray) -> dict[str, float]:
    """How far each joint that is not the Panda's moved between two qpos: free joints by position
    (metres) and rotation (radians), hinges (radians) and slides (metres) by value."""
    motion = {}
    for joint in range(model.njnt):
        name, adr = model.joint(joint).name, int(model.jnt_qposadr[joint])
        if name.startswith("panda_"):
            continue
        if model.jnt_type[joint] == 0:  # free
            motion[name] = float(np.linalg.norm(after[adr:adr + 3] - before[adr:adr + 3]))
            dot = min(1.0, abs(float(after[adr + 3:adr + 7] @ before[adr + 3:adr + 7])))
            motion[f"{name} (rotation)"] = 2 * float(np.arccos(dot))
        else:
            motion[name] = abs(float(after[adr] - before[adr]))
    return motion


def assert_settled(task: str, motion: dict[str, float], rewards: np.ndarray) -> None:
    limits = {name: TURNED if "rotation" in name else MOVED for name in motion}
    moved = {name: round(value, 4) for name, value in motion.items() if value > limits[name]}
    assert not moved, f"{task}: held still after reset, these moved: {moved}"
    assert not np.any(rewards), f"{task}: a condition was met while the arm was held still after reset"


def config(task: str, **kwargs) -> EnvConfig:
    return EnvConfig(**{"task": task, "backend": "mujoco", "cameras": (), "low_dim": LOW_DIM,
                        "arm_mode": "joint_velocity", **kwargs}).validated()


def check_descriptions(task: str, upstream: dict[int, list[str]]) -> None:
    """The task's descriptions of each variation are upstream's `init_episode` return value, word for word."""
    declared = find_task(task)()
    for variation, strings in upstream.items():
        assert declared.descriptions(variation) == strings, f"{task}, variation {variation}"


def check_mujoco(task: str, variations: int, descriptions: list[str], oracle_seed: int = 0,
                 max_episode_steps: int = 200) -> None:
    """`descriptions`: variation 0's, which reset must return. max_episode_steps: room for the oracle's demo,
    which takes several joint-velocity actions per waypoint."""
    assert task in list_tasks("mujoco") and task in list_tasks("mjwarp")
    assert config(camel_case(task)).task == task
    cfg = config(task, max_episode_steps=max_episode_steps)
    BACKEND.validate(cfg)
    assert task_class(cfg).variation_count == variations
    with pytest.raises(ConfigError, match=rf"{task} has {variations} variations"):
        BACKEND.validate(replace(cfg, backend_options={"variation": variations}))
    backend = BACKEND(cfg, 0)
    try:
        info = backend.reset(0, None)
        assert info["descriptions"] == descriptions and info["variation_index"] == 0
        start = backend.sim.data.qpos.copy()
        rewards = np.array([backend.step(HOLD).reward for _ in range(SETTLE_CHECK_STEPS)])
        assert_settled(task, task_motion(backend.sim.model, start, backend.sim.data.qpos), rewards)
        assert all(backend.sim.task.descriptions(v) for v in range(variations))
        spec = observation_spec(cfg)
        rng = np.random.default_rng(0)
        for _ in range(3):
            action = np.append(rng.uniform(-0.3, 0.3, 7), 1.0).astype(np.float32)
            result = backend.step(action)
            assert "error" not in result.info
            out = {key: np.full(s.shape, np.nan, s.dtype) for key, s in spec.items()}
            backend.write_observation(out)
            assert all(np.isfinite(array).all() for array in out.values())
        demo, = backend.get_demos(1, seed=oracle_seed)
        assert demo.success, f"{task}: the oracle failed for seed {oracle_seed}"
        assert demo.observations["task_low_dim_state"].shape[1] == task_class(cfg).state_size()
    finally:
        backend.close()


def check_mjwarp(task: str, seeds: tuple[int, int] = (3, 4)) -> None:
    if not MJWARP:
        pytest.skip("needs warp, mujoco_warp, torch: the 'gpu' extra (pip install -e '.[gpu]')")
    cfg = config(task)
    use_renderer(cfg)
    from rlbench_vec.backends.mjwarp.simulation import BatchedSimulation
    from rlbench_vec.backends.mujoco.simulation import Simulation

    sim = BatchedSimulation(cfg, len(seeds), os.environ.get("RLBENCH_VEC_MJWARP_DEVICE", "cpu"))
    try:
        infos = sim.reset(seeds=list(seeds))
        state = sim.observe()["task_low_dim_state"].cpu().numpy()
        host = Simulation(cfg)
        for world, seed in enumerate(seeds):
            rng = np.random.default_rng(seed)
            host.reset(choose_variation(task_class(cfg), cfg, None, rng), rng)
            assert infos[world]["variation_index"] == host.variation
            np.testing.assert_allclose(state[world], host.low_dim_state(), atol=1e-5)
        start, rewards = sim.d.qpos.numpy().copy(), []
        for _ in range(SETTLE_CHECK_STEPS):
            rewards.append(sim.step(np.tile(HOLD, (len(seeds), 1))).reward.cpu().numpy())
        after = sim.d.qpos.numpy()
        for world in range(len(seeds)):
            assert_settled(task, task_motion(host.model, start[world], after[world]), np.array(rewards)[:, world])
        actions = np.zeros((len(seeds), 8), np.float32)
        actions[:, :7], actions[:, 7] = 0.2, 1.0
        for _ in range(3):
            result = sim.step(actions)
            assert not result.fault.cpu().numpy().any() and not result.error.cpu().numpy().any()
        assert np.isfinite(sim.observe()["task_low_dim_state"].cpu().numpy()).all()
    finally:
        sim.close()
