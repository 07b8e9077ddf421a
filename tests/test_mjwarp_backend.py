"""The batched MuJoCo Warp backend on warp's CPU device: the core against the mujoco backend for the
same state (backend="mjwarp" through RLBenchVectorEnv: test_mjwarp_vector_env.py).

A few worlds each; the kernels compile once per machine (cached under ~/.cache/warp). MuJoCo is
imported in this process with the renderer the mujoco backend picks, before mujoco_warp is.
RLBENCH_VEC_MJWARP_DEVICE=cuda:0 runs the same tests on a GPU.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest
from conftest import needs

from rlbench_vec.backends.mujoco.backend import MujocoBackend, choose_variation, task_class, use_renderer
from rlbench_vec.config import EnvConfig
from rlbench_vec.errors import ActionError, ConfigError
from rlbench_vec.spec import observation_spec

pytestmark = needs("gpu", "warp", "mujoco_warp", "torch")

DEVICE = os.environ.get("RLBENCH_VEC_MJWARP_DEVICE", "cpu")
WORLDS = 3
SEEDS = [11, 12, 13]
CAMERA_CONFIG = {
    "task": "pick_and_lift", "backend": "mujoco", "arm_mode": "ik", "absolute_mode": True, "image_size": (128, 128),
    "modalities": ("rgb", "depth", "mask", "point_cloud"), "depth_in_meters": True,
    "low_dim": ("joint_positions", "joint_velocities", "joint_forces", "gripper_open", "gripper_pose", "gripper_matrix",
                "gripper_joint_positions", "task_low_dim_state"),
    "backend_options": {"variation": "random"},  # the layouts these tests were written for
}


def config(**kwargs) -> EnvConfig:
    return EnvConfig(**{**CAMERA_CONFIG, **kwargs}).validated()


def batched(cfg: EnvConfig, worlds: int = WORLDS, **kwargs):
    use_renderer(cfg)  # MuJoCo's GL backend is fixed at its first import
    from rlbench_vec.backends.mjwarp.simulation import BatchedSimulation

    return BatchedSimulation(cfg, worlds, DEVICE, **kwargs)


@pytest.fixture(scope="module")
def sim():
    """pick_and_lift, ik with absolute poses, all five cameras with every modality."""
    simulation = batched(config())
    yield simulation
    simulation.close()


def reference(cfg: EnvConfig, seed: int):
    """The mujoco backend's simulation of env `seed`'s first episode (no renderer)."""
    use_renderer(cfg)
    from rlbench_vec.backends.mujoco.simulation import Simulation  # imports MuJoCo

    host = Simulation(replace(cfg, cameras=()))
    rng = np.random.default_rng(seed)
    host.reset(choose_variation(task_class(cfg), cfg, None, rng), rng)
    return host


def hold_pose(sim) -> np.ndarray:
    """Absolute pose actions that keep every gripper where it is, open."""
    pose = sim.observe()["gripper_pose"].cpu().numpy()
    return np.concatenate([pose, np.ones((sim.num_worlds, 1))], axis=1).astype(np.float32)


def state(sim) -> np.ndarray:
    return sim.d.qpos.numpy().copy()


def test_importing_the_package_imports_no_simulator():
    """Neither the package nor what the main process asks of the backend class imports a simulator."""
    code = ("import sys; import rlbench_vec.backends.mjwarp as b; from rlbench_vec.config import EnvConfig; "
            "b.check_config(EnvConfig(task='open_drawer', arm_mode='ik').validated()); "
            "print(sorted(m for m in ('warp', 'mujoco_warp', 'mujoco', 'torch') if m in sys.modules)); "
            "from rlbench_vec.backends import backend_class; c = EnvConfig(task='open_drawer', backend='mjwarp', "
            f"backend_options={{'device': {DEVICE!r}}}).validated(); B = backend_class('mjwarp'); B.validate(c); "
            "B.observations_on_device(c); B.envs_per_worker(c, 8, None); "
            "print(sorted(m for m in ('warp', 'mujoco_warp', 'mujoco') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["[]", "[]"]


def test_planning_is_refused_with_the_alternative():
    from rlbench_vec.backends.mjwarp import check_config

    for refused in ({"arm_mode": "planning"}, {"ignore_collisions_flag": True}):
        with pytest.raises(ConfigError, match="keyframe agents run on backend='mujoco'.*'rlbench'") as error:
            check_config(config(**refused))
        assert "\n" not in str(error.value)


def test_observations_follow_the_mujoco_layout(sim):
    sim.reset(seeds=SEEDS)
    observations = sim.observe()
    spec = observation_spec(sim.config)
    assert list(observations) == list(spec)
    for key, array_spec in spec.items():
        tensor = observations[key]
        assert tuple(tensor.shape) == (WORLDS, *array_spec.shape), key
        assert tensor.cpu().numpy().dtype == array_spec.dtype, key
    assert observations["front_rgb"].float().mean() > 20  # lit, not black
    # torch views of the simulator's own arrays, on its device: no copy, the same memory every call
    again = sim.observe()
    assert all(again[key].data_ptr() == tensor.data_ptr() for key, tensor in observations.items())
    assert observations["front_depth"].data_ptr() == sim.observer.arrays["front_depth"].ptr
    assert str(observations["front_depth"].device).startswith(DEVICE.split(":")[0])
    assert observations["gripper_open"].cpu().numpy().tolist() == [1.0] * WORLDS


def test_depth_and_masks_match_the_mujoco_renderer(sim):
    """The same episode start (same seed) seen by both renderers: 99% of depth pixels within 1 cm,
    99% of mask pixels the same body id, the same set of ids, point clouds from that depth."""
    cfg = sim.config
    sim.reset(seeds=SEEDS)
    mine = sim.observe_numpy()
    backend = MujocoBackend(cfg, 0)
    try:
        backend.reset(SEEDS[1], None)
        theirs = {key: np.zeros(s.shape, s.dtype) for key, s in observation_spec(cfg).items()}
        backend.write_observation(theirs)
    finally:
        backend.close()
    for camera in cfg.cameras:
        depth, their_depth = mine[f"{camera}_depth"][1], theirs[f"{camera}_depth"]
        assert np.mean(np.abs(depth - their_depth) < 0.01) >= 0.99, camera
        mask, their_mask = mine[f"{camera}_mask"][1], theirs[f"{camera}_mask"]
        assert np.mean(mask == their_mask) >= 0.99, camera
        assert set(np.unique(mask)) == set(np.unique(their_mask)), camera
        cloud, their_cloud = mine[f"{camera}_point_cloud"][1], theirs[f"{camera}_point_cloud"]
        assert np.mean(np.linalg.norm(cloud - their_cloud, axis=-1) < 0.02) >= 0.99, camera
        assert np.abs(mine[f"{camera}_rgb"][1].astype(int) - theirs[f"{camera}_rgb"]).mean() < 10, camera
    for key in ("joint_positions", "joint_velocities", "gripper_joint_positions", "task_low_dim_state",
                "gripper_open", "gripper_matrix"):
        np.testing.assert_allclose(mine[key][1], theirs[key], atol=1e-5, err_msg=key)
    np.testing.assert_allclose(mine["gripper_pose"][1][:3], theirs["gripper_pose"][:3], atol=1e-5)
    assert abs(np.dot(mine["gripper_pose"][1][3:], theirs["gripper_pose"][3:])) > 1 - 1e-6  # q and -q alike


def test_oracle_actions_solve_the_task_in_every_world(sim):
    """The mujoco backend's oracle (absolute ik poses, planned from the same episode start) drives every
    world to success: reward 1 and termination, each world at its own step; every move ends with the arm at
    rest, as the mujoco backend's (robot.py) and RLBench's paths."""
    from rlbench_vec.backends.mujoco.robot import AT_REST_SPEED  # imports MuJoCo: after the renderer's choice

    sim.reset(seeds=SEEDS)
    speeds: list[float] = []
    assert drive_oracles(sim, sim.config, SEEDS, speeds).tolist() == [1.0] * WORLDS
    assert max(speeds) < AT_REST_SPEED


def drive_oracles(sim, cfg: EnvConfig, seeds: list[int], end_speeds: list[float] | None = None) -> np.ndarray:
    """Step every world with the mujoco backend's oracle of its episode (the oracle plans from the
    reference simulation, stepped alongside); the reward each world got. end_speeds: gets the fastest joint
    speed of each acting world after each step."""
    references = [reference(cfg, seed) for seed in seeds]
    oracles = [host.oracle_actions() for host in references]
    rewards, done = np.zeros(len(seeds)), np.zeros(len(seeds), bool)
    for _ in range(cfg.max_episode_steps):
        actions = hold_pose(sim)
        for world, oracle in enumerate(oracles):
            action = next(oracle, None) if not done[world] else None
            if action is not None:
                references[world].act(action)
                actions[world] = action
        result = sim.step(actions, active=~done)
        assert not result.fault.cpu().numpy().any() and not result.error.cpu().numpy().any()
        if end_speeds is not None:
            velocities = np.abs(sim.observe()["joint_velocities"].cpu().numpy())
            end_speeds.extend(velocities[~done].max(axis=1).tolist())
        rewards += result.reward.cpu().numpy()
        done |= result.terminated.cpu().numpy()
        if done.all():
            break
    return rewards


@pytest.mark.parametrize("task", ["reach_target", "open_drawer"])
def test_the_other_tasks_match_their_state_and_succeed(task):
    cfg = config(task=task, cameras=(), low_dim=("gripper_pose", "task_low_dim_state"))
    sim = batched(cfg, 2)
    seeds = [21, 22]
    sim.reset(seeds=seeds)
    state = sim.observe()["task_low_dim_state"].cpu().numpy()
    for world, seed in enumerate(seeds):
        np.testing.assert_allclose(state[world], reference(cfg, seed).low_dim_state(), atol=1e-5)
    assert drive_oracles(sim, cfg, seeds).tolist() == [1.0, 1.0]


def test_joint_velocity_actions_move_like_the_mujoco_backend():
    cfg = config(arm_mode="joint_velocity", cameras=(), low_dim=("joint_positions", "gripper_joint_positions"))
    sim = batched(cfg, 2)
    sim.reset(seeds=[5, 6])
    ref = reference(cfg, 5)
    rng = np.random.default_rng(0)
    for _ in range(6):
        action = np.concatenate([rng.uniform(-1, 1, 7), [rng.integers(2)]]).astype(np.float32)
        result = sim.step(np.stack([action, action]))
        ref.act(action)
        assert result.control_steps.cpu().numpy()[0] >= 1
    mine = sim.observe()
    np.testing.assert_allclose(mine["joint_positions"].cpu().numpy()[0], ref.panda.qpos, atol=2e-3)
    np.testing.assert_allclose(mine["gripper_joint_positions"].cpu().numpy()[0], ref.panda.finger_qpos, atol=2e-3)


def test_reset_by_mask_touches_only_the_masked_worlds(sim):
    sim.reset(seeds=SEEDS)
    start = state(sim)
    target = hold_pose(sim)
    target[:, 2] += 0.05
    sim.step(target)
    moved = state(sim)
    infos = sim.reset(mask=[False, True, False], seeds=[None, SEEDS[1], None])
    after = state(sim)
    assert list(infos) == [1] and "descriptions" in infos[1]
    np.testing.assert_array_equal(after[[0, 2]], moved[[0, 2]])
    np.testing.assert_array_equal(after[1], start[1])


def test_a_nan_world_is_flagged_and_restored_without_touching_the_others(sim):
    def run(poison: bool) -> tuple[np.ndarray, object]:
        sim.reset(seeds=SEEDS)
        action = hold_pose(sim)
        action[:, 0] += 0.03
        if poison:
            qvel = sim.d.qvel.numpy()
            qvel[1, 0] = np.nan
            sim.d.qvel.assign(qvel)
        result = sim.step(action)
        return state(sim), {name: value.cpu().numpy().copy() for name, value in vars(result).items()}

    clean_state, clean = run(False)
    sim.reset(seeds=SEEDS)
    start = state(sim)
    poisoned_state, poisoned = run(True)
    assert poisoned["fault"].tolist() == [0, 1, 0]  # faults.NAN_STATE
    assert poisoned["truncated"].tolist() == [False, True, False]
    np.testing.assert_array_equal(poisoned_state[1], start[1])  # restored to its episode start
    # the others as without the NaN (bit for bit on the CPU; GPU atomics may reorder sums)
    np.testing.assert_allclose(poisoned_state[[0, 2]], clean_state[[0, 2]], atol=1e-4)
    for name in ("reward", "terminated", "error", "control_steps"):
        np.testing.assert_array_equal(poisoned[name][[0, 2]], clean[name][[0, 2]], err_msg=name)


def test_a_constraint_overflow_ends_only_that_worlds_episode():
    """Three blocks resting on the table need 49 constraint rows; with room for 56, pushing a block into
    another in world 1 overflows that world's rows only."""
    cfg = config(arm_mode="joint_velocity", cameras=(), low_dim=("joint_positions",))
    sim = batched(cfg, 2, njmax=56)
    sim.reset(seeds=[1, 2])
    start = state(sim)
    still = np.zeros((2, 8), np.float32)
    still[:, -1] = 1.0
    assert sim.step(still).fault.cpu().numpy().tolist() == [0, 0]
    block, other = (sim.host.world.qpos_adr(name) for name in ("block", "distractor0"))
    qpos = sim.d.qpos.numpy()
    qpos[1, block:block + 3] = qpos[1, other:other + 3] + [0.03, 0.0, 0.0]  # overlapping boxes
    sim.d.qpos.assign(qpos)
    result = sim.step(still)
    assert result.fault.cpu().numpy().tolist() == [0, 2]  # faults.CONSTRAINT_OVERFLOW
    assert result.truncated.cpu().numpy().tolist() == [False, True]
    np.testing.assert_array_equal(state(sim)[1], start[1])


def test_invalid_actions_end_only_their_episode(sim):
    sim.reset(seeds=SEEDS)
    actions = hold_pose(sim)
    actions[0, 3:7] = [0.0, 0.0, 0.0, 2.0]  # not a unit quaternion
    actions[1, 0] = 5.0  # outside the workspace
    before = sim.observe()["joint_positions"].cpu().numpy().copy()
    result = sim.step(actions)
    assert result.error.cpu().numpy().tolist() == [2, 3, 0]
    assert result.terminated.cpu().numpy().tolist() == [True, True, False]
    assert result.reward.cpu().numpy().tolist() == [0.0, 0.0, 0.0]
    after = sim.observe()["joint_positions"].cpu().numpy()
    np.testing.assert_allclose(after[:2], before[:2], atol=2e-3)  # refused arms hold still
    with pytest.raises(ActionError, match=r"shape \(3, 8\)"):
        sim.step(np.zeros((3, 7), np.float32))


def test_step_chunk_stops_each_world_at_its_episode_end(sim):
    sim.reset(seeds=SEEDS)
    chunk = np.repeat(hold_pose(sim)[:, None], 3, axis=1)
    chunk[0, 0, 3:7] = 0.0  # world 0's first action is refused, which ends its episode
    result = sim.step_chunk(chunk)
    assert tuple(result.reward.shape) == (WORLDS, 3)
    assert result.executed.cpu().numpy().tolist() == [[True, False, False], [True] * 3, [True] * 3]
    assert result.terminated.cpu().numpy()[0].tolist() == [True, False, False]
