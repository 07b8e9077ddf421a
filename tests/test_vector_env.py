"""RLBenchVectorEnv through its public API, with real spawned workers (synthetic backend)."""

from __future__ import annotations

import time
import tracemalloc

import numpy as np
import pytest

from rlbench_vec import ActionError, ClosedError, ConfigError, ResetNeeded
from rlbench_vec.spec import observation_spec

A = 8  # ik arm pose (7) + discrete gripper (1)


def zeros(n: int, k: int | None = None) -> np.ndarray:
    return np.zeros((n, A) if k is None else (n, k, A), np.float32)


def test_observation_keys_shapes_and_dtypes_follow_rlbench(make_env):
    env = make_env(num_envs=2, cameras=("front", "wrist"), modalities=("rgb", "depth", "mask", "point_cloud"),
                   image_size=(64, 48), low_dim=("joint_positions", "gripper_open", "gripper_pose", "gripper_matrix",
                                                 "task_low_dim_state"))
    obs, info = env.reset(seed=0)
    expected = {
        "front_rgb": ((2, 48, 64, 3), np.uint8), "front_depth": ((2, 48, 64), np.float32),
        "front_mask": ((2, 48, 64), np.float32), "front_point_cloud": ((2, 48, 64, 3), np.float64),
        "wrist_rgb": ((2, 48, 64, 3), np.uint8), "joint_positions": ((2, 7), np.float64),
        "gripper_open": ((2,), np.float64), "gripper_pose": ((2, 7), np.float64),
        "gripper_matrix": ((2, 4, 4), np.float64), "task_low_dim_state": ((2, 3), np.float64),
    }
    for key, (shape, dtype) in expected.items():
        assert obs[key].shape == shape and obs[key].dtype == dtype, key
    assert set(obs) == set(env.single_observation_space.spaces)
    for key in obs:
        assert env.observation_space[key].shape == (2, *env.single_observation_space[key].shape), key
    assert env.single_action_space.shape == (A,) and env.action_space.shape == (2, A)
    assert list(info["descriptions"]) == [["synthetic reach_target"]] * 2
    obs, reward, terminated, truncated, info = env.step(zeros(2))
    assert reward.shape == terminated.shape == truncated.shape == (2,)
    assert reward.dtype == np.float64 and terminated.dtype == truncated.dtype == bool


def test_layout_is_known_without_a_simulator():
    from rlbench_vec.config import EnvConfig

    spec = observation_spec(EnvConfig(backend="synthetic").validated())
    assert spec["overhead_rgb"].shape == (128, 128, 3)
    assert len([k for k in spec if k.endswith("_mask")]) == 5


def test_zero_copy_views_alternate_between_two_pages(make_env):
    env = make_env(num_envs=3)
    obs, _ = env.reset(seed=0)
    view = obs["front_rgb"]
    first_pixel = view[:, 0, 0, 0].copy()
    obs1, *_ = env.step(zeros(3))
    assert not np.shares_memory(view, obs1["front_rgb"]), "the next batch goes to the other page"
    np.testing.assert_array_equal(view[:, 0, 0, 0], first_pixel)  # still valid while the next call returns
    obs2, *_ = env.step(zeros(3))
    assert np.shares_memory(view, obs2["front_rgb"]), "the page after that is the first one again"
    assert not np.array_equal(first_pixel, view[:, 0, 0, 0]), "the view shows the newer step"


def test_copy_obs_returns_fresh_arrays(make_env):
    env = make_env(num_envs=2, copy_obs=True)
    obs, _ = env.reset(seed=0)
    kept = obs["front_rgb"]
    before = kept.copy()
    obs2, *_ = env.step(zeros(2))
    assert not np.shares_memory(kept, obs2["front_rgb"])
    np.testing.assert_array_equal(kept, before)


def test_step_chunk_stops_at_episode_end_and_masks(make_env):
    env = make_env(num_envs=2, max_chunk=8, backend_options={"episode_length": 5})
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step_chunk(zeros(2, 8))
    executed = info["executed"]
    assert reward.shape == terminated.shape == executed.shape == (2, 8)
    np.testing.assert_array_equal(executed.sum(axis=1), [5, 5])
    np.testing.assert_array_equal(terminated[:, 4], [True, True])
    assert not executed[:, 5:].any() and reward[:, 4].tolist() == [1.0, 1.0]
    np.testing.assert_array_equal(obs["task_low_dim_state"][:, 0], [5, 5])  # obs after the last action


def test_copy_obs_copies_chunk_observations_too(make_env):
    env = make_env(num_envs=1, max_chunk=2, chunk_obs="all", copy_obs=True)
    env.reset(seed=0)
    *_, info = env.step_chunk(zeros(1, 2))
    kept = info["chunk_observations"]["task_low_dim_state"]
    env.step_chunk(zeros(1, 2))
    np.testing.assert_array_equal(kept[0, :, 0], [1, 2])


def test_recording_needs_a_backend_that_renders():
    from rlbench_vec import RLBenchVectorEnv

    with pytest.raises(ConfigError, match="renders no video"):
        RLBenchVectorEnv(backend="synthetic", record=True)


def test_step_chunk_all_observations(make_env):
    env = make_env(num_envs=2, max_chunk=4, chunk_obs="all")
    env.reset(seed=0)
    obs, _, _, _, info = env.step_chunk(zeros(2, 3))
    every = info["chunk_observations"]["task_low_dim_state"]
    assert every.shape == (2, 3, 3)
    np.testing.assert_array_equal(every[:, :, 0], [[1, 2, 3], [1, 2, 3]])
    np.testing.assert_array_equal(obs["task_low_dim_state"], every[:, -1])


def test_next_step_autoreset_keeps_the_final_observation(make_env):
    env = make_env(num_envs=1, backend_options={"episode_length": 3})
    env.reset(seed=0)
    for _ in range(2):
        env.step(zeros(1))
    obs, reward, terminated, truncated, info = env.step(zeros(1))
    assert terminated[0] and reward[0] == 1.0
    assert obs["task_low_dim_state"][0, 0] == 3  # final observation of the episode
    obs, reward, terminated, truncated, info = env.step(zeros(1))
    assert info["autoreset"][0] and reward[0] == 0 and not terminated[0] and not truncated[0]
    assert obs["task_low_dim_state"][0, 0] == 0  # first observation of the next episode


def test_truncation_at_max_episode_steps(make_env):
    env = make_env(num_envs=2, max_episode_steps=4)
    env.reset(seed=0)
    flags = [env.step(zeros(2))[3].tolist() for _ in range(4)]
    assert flags == [[False, False]] * 3 + [[True, True]]


def test_seeding_is_reproducible_and_distinct_per_env(make_env):
    a = make_env(num_envs=2)
    b = make_env(num_envs=2)
    obs_a, _ = a.reset(seed=7)
    obs_b, _ = b.reset(seed=7)
    np.testing.assert_array_equal(obs_a["joint_positions"], obs_b["joint_positions"])
    assert not np.array_equal(obs_a["joint_positions"][0], obs_a["joint_positions"][1])
    obs_c, _ = b.reset(seed=8)
    assert not np.array_equal(obs_c["joint_positions"][0], obs_a["joint_positions"][0])


def test_synthetic_images_follow_the_seed_and_change_with_each_episode(make_env):
    env = make_env(num_envs=2, max_episode_steps=2, copy_obs=True, cameras=("front",), modalities=("rgb", "depth"))
    first, _ = env.reset(seed=3)
    stepped, *_ = env.step(zeros(2))
    for key in ("front_rgb", "front_depth"):  # the step stamps one pixel; the rest is the episode's content
        np.testing.assert_array_equal(stepped[key].reshape(2, -1)[:, 1:], first[key].reshape(2, -1)[:, 1:])
        assert not np.array_equal(first[key][0], first[key][1])  # each env its own
    env.step(zeros(2))  # the episode ends
    autoreset, *_ = env.step(zeros(2))
    again, _ = env.reset(seed=3)
    for key in ("front_rgb", "front_depth"):
        assert not np.array_equal(autoreset[key][0], first[key][0])
        np.testing.assert_array_equal(again[key], first[key])


def test_async_step_matches_sync(make_env):
    env = make_env(num_envs=3)
    env.reset(seed=0)
    env.step_async(zeros(3))
    obs, reward, terminated, truncated, info = env.step_wait()
    assert reward.shape == (3,)
    np.testing.assert_array_equal(obs["task_low_dim_state"][:, 0], [1, 1, 1])


def test_partial_batches_return_fast_envs_first(make_env):
    # env 0 pays 0.3 s per step, the others nothing: recv(min_envs=2) must not wait for env 0
    env = make_env(num_envs=3, envs_per_worker=1, backend_options={"step_cost_s": 0.0})
    env.set_attr("step_cost_s", [0.3, 0.0, 0.0])
    env.reset(seed=0)
    env.send(zeros(3))
    obs, reward, terminated, truncated, info = env.recv(min_envs=2)
    assert 0 not in info["env_id"].tolist() and len(info["env_id"]) >= 2
    assert obs["joint_positions"].shape == (len(info["env_id"]), 7)
    env.send(zeros(len(info["env_id"])), info["env_id"])
    seen = []
    while 0 not in seen:
        *_, info = env.recv(min_envs=1)
        seen.extend(info["env_id"].tolist())
    assert seen.count(0) == 1


def test_send_rejects_envs_in_flight_and_recv_without_send(make_env):
    env = make_env(num_envs=2)
    env.reset(seed=0)
    with pytest.raises(ConfigError, match="recv\\(\\) has nothing"):
        env.recv()
    env.send(zeros(1), [0])
    with pytest.raises(ConfigError, match="in flight"):
        env.send(zeros(1), [0])
    env.recv()


@pytest.mark.parametrize("actions, message", [
    (np.zeros((2, 7), np.float32), "shape"),
    (np.zeros((3, 8), np.float32), "shape"),
    (np.full((2, 8), np.nan, np.float32), "NaN"),
    (np.array([["a"] * 8] * 2), "real-valued"),
])
def test_bad_actions_are_refused_before_sending(make_env, actions, message):
    env = make_env(num_envs=2)
    env.reset(seed=0)
    with pytest.raises(ActionError, match=message):
        env.step(actions)
    env.step(zeros(2))  # nothing was sent: the env still works


def test_actions_outside_the_bounds_are_clipped_and_flagged_per_env(make_env):
    env = make_env(num_envs=3, arm_mode="joint_velocity", absolute_mode=False, low_dim=("joint_positions",))
    start = env.reset(seed=0)[0]["joint_positions"][0, 0]
    limit = env.single_action_space.high[0]  # the Panda's 2.175 rad/s
    actions = np.zeros((3, A), np.float32)
    actions[0, 0], actions[1, -1] = 100.0, 5.0  # an arm joint of env 0, the gripper of env 1
    obs, *_, info = env.step(actions)
    assert info["action_clipped"].tolist() == info["_action_clipped"].tolist() == [True, True, False]
    assert env.call("last_gripper")[1] == 1.0 and obs["joint_positions"][0, 0] - start == pytest.approx(0.01 * limit)
    *_, info = env.step(np.zeros((3, A), np.float32))
    assert "action_clipped" not in info  # the flag belongs to the step whose actions were clipped
    chunk = np.zeros((3, 2, A), np.float32)
    chunk[2, 1, 3] = -1e3  # any action of a chunk
    *_, info = env.step_chunk(chunk)
    assert info["action_clipped"].tolist() == [False, False, True]
    env.send(actions[:1], env_ids=[2])  # partial batches: the flag follows its env
    *_, info = env.recv()
    assert info["env_id"].tolist() == [2] and info["action_clipped"].tolist() == [True]


def test_actions_outside_the_bounds_are_refused_on_request(make_env):
    env = make_env(num_envs=2, arm_mode="joint_velocity", absolute_mode=False, clip_actions=False)
    env.reset(seed=0)
    actions = np.zeros((2, A), np.float32)
    actions[1, 4] = 3.0
    with pytest.raises(ActionError, match=r"rows \[1\].*value 3 at index 4 is outside \[-2\.61, 2\.61\].*clip_actions"):
        env.step(actions)
    *_, info = env.step(np.zeros((2, A), np.float32))  # nothing was sent: the env still works
    assert "action_clipped" not in info


def test_stats_split_time_per_env(make_env):
    env = make_env(num_envs=2, envs_per_worker=1, backend_options={"step_cost_s": 0.002})
    env.reset(seed=0)
    env.reset_stats()
    started = time.perf_counter()
    for _ in range(10):
        env.step(zeros(2))
    elapsed = time.perf_counter() - started
    stats = env.stats()
    np.testing.assert_array_equal(stats["steps"], [10, 10])
    assert (stats["exec_s"] >= 10 * 0.002).all(), "the busy step cost shows as execution"
    parts = stats["exec_s"] + stats["write_s"] + stats["reset_s"] + stats["ipc_s"]
    assert (parts <= elapsed).all(), "an env's parts are shares of the round trips: they never sum past the wall time"
    assert stats["resets"].tolist() == [0, 0] and stats["reset_s"].tolist() == [0, 0]


def test_closed_env_refuses_work_and_close_is_idempotent(make_env):
    env = make_env(num_envs=1)
    env.close()
    env.close()
    with pytest.raises(ClosedError):
        env.reset()


@pytest.mark.parametrize("kwargs, message", [
    ({"num_envs": 0}, "num_envs"),
    ({"cameras": ("frnt",)}, "Did you mean 'front'"),
    ({"modalities": ("rgbd",)}, "modality"),
    ({"arm_mode": "teleport"}, "arm_mode"),
    ({"image_size": (4, 4)}, "image_size"),
    ({"backend": "gazebo"}, "backend"),
    ({"backend_options": {"step_kost_s": 1}}, "unknown synthetic backend_options"),
    ({"chunk_obs": "some"}, "chunk_obs"),
])
def test_bad_config_is_refused_before_any_worker_starts(kwargs, message):
    from rlbench_vec import RLBenchVectorEnv

    with pytest.raises(ConfigError, match=message):
        RLBenchVectorEnv(backend=kwargs.pop("backend", "synthetic"), **kwargs)


def test_many_more_workers_than_cores(make_env):
    env = make_env(num_envs=16, cameras=(), modalities=())
    env.reset(seed=0)
    for _ in range(5):
        obs, *_ = env.step(zeros(16))
    assert obs["joint_positions"].shape == (16, 7)


def test_env_ids_in_any_order_get_their_own_actions(make_env):
    env = make_env(num_envs=2)
    env.reset(seed=0)
    actions = zeros(2)
    actions[:, -1] = [0.0, 1.0]  # gripper value tells the rows apart
    env.send(actions, env_ids=[1, 0])
    env.recv()
    assert env.call("last_gripper") == (1.0, 0.0)


def test_unpicklable_arguments_are_refused_before_sending(make_env):
    env = make_env(num_envs=2)
    env.reset(seed=0)
    with pytest.raises(ConfigError, match="must be picklable"):
        env.set_attr("step_cost_s", lambda: 0)
    with pytest.raises(ConfigError, match="must be picklable"):
        env.reset(options={"f": lambda: 0})
    env.reset(seed=0)  # nothing was left in flight
    env.step(zeros(2))


def test_a_failed_call_leaves_the_episode_running(make_env):
    from rlbench_vec import WorkerError

    env = make_env(num_envs=1)
    env.reset(seed=0)
    env.step(zeros(1))
    with pytest.raises(WorkerError, match="AttributeError"):
        env.call("no_such_attribute")
    obs, *_, info = env.step(zeros(1))
    assert "autoreset" not in info and obs["task_low_dim_state"][0, 0] == 2


def test_calls_refuse_while_steps_are_in_flight(make_env):
    env = make_env(num_envs=2)
    env.reset(seed=0)
    env.send(zeros(1), [0])
    with pytest.raises(ConfigError, match="recv\\(\\) them before"):
        env.get_attr("steps")
    with pytest.raises(ConfigError, match="use recv\\(\\)"):
        env.step_wait()
    env.recv()


@pytest.mark.parametrize("seed", [-1, [0, -3], [0, 1.5]])
def test_bad_seeds_are_refused(make_env, seed):
    env = make_env(num_envs=2)
    with pytest.raises(ConfigError, match="seed"):
        env.reset(seed=seed)


def test_steps_count_executed_actions_only(make_env):
    env = make_env(num_envs=1)
    env.reset(seed=0)
    env.reset_stats()
    env.step(zeros(1))
    env.reset(seed=0)
    assert env.stats()["steps"].tolist() == [1]


# ---------------------------------------------------------------- autoreset modes


def steps_of(obs) -> list[int]:
    return obs["task_low_dim_state"][:, 0].astype(int).tolist()


def test_same_step_autoreset_returns_the_new_episode_and_the_final_one_in_info(make_env):
    from gymnasium.vector import AutoresetMode

    env = make_env(num_envs=2, cameras=(), autoreset_mode="same_step", backend_options={"episode_length": 2})
    assert env.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    env.reset(seed=0)
    env.step(zeros(2))
    obs, reward, terminated, truncated, info = env.step(zeros(2))
    assert terminated.all() and reward.tolist() == [1.0, 1.0]
    assert steps_of(obs) == [0, 0], "the observation is the new episode's first"
    assert info["_final_obs"].all() and [f["task_low_dim_state"][0] for f in info["final_obs"]] == [2, 2]
    assert "descriptions" in info  # the reset's info, as gymnasium's same-step mode returns it
    obs, *_, info = env.step(zeros(2))
    assert steps_of(obs) == [1, 1] and "autoreset" not in info and "final_obs" not in info


def test_disabled_autoreset_resets_only_the_masked_envs(make_env):
    env = make_env(num_envs=3, cameras=(), autoreset_mode="disabled", backend_options={"episode_length": 2})
    env.reset(seed=0)
    env.step(zeros(3))
    env.step(zeros(3))
    with pytest.raises(ResetNeeded, match="reset_mask"):
        env.step(zeros(3))
    obs, info = env.reset(options={"reset_mask": np.array([True, False, True])})
    assert steps_of(obs) == [0, 2, 0], "unmasked envs keep their observation"
    with pytest.raises(ResetNeeded, match=r"envs \[1\]"):
        env.step(zeros(3))
    env.reset(options={"reset_mask": np.array([False, True, False])})
    obs, *_ = env.step(zeros(3))
    assert steps_of(obs) == [1, 1, 1]
    with pytest.raises(ConfigError, match="reset_mask"):
        env.reset(options={"reset_mask": [1, 0, 1]})


def test_reset_mask_needs_the_disabled_mode(make_env):
    env = make_env(num_envs=2, cameras=())
    with pytest.raises(ConfigError, match="autoreset_mode='disabled'"):
        env.reset(options={"reset_mask": np.array([True, False])})


def test_per_env_reset_options_reach_their_env(make_env):
    env = make_env(num_envs=2, backend="mujoco", cameras=(), arm_mode="joint_velocity")
    _, info = env.reset(seed=0, options={"env_options": [{"variation": 3}, {"variation": 5}]})
    assert info["variation_index"].tolist() == [3, 5]
    with pytest.raises(ConfigError, match="env_options"):
        env.reset(options={"env_options": [{"variation": 3}]})


# ---------------------------------------------------------------- partial batches


def test_partial_batches_are_one_contiguous_block_of_views(make_env):
    env = make_env(num_envs=4, envs_per_worker=1, cameras=("front",))
    env.reset(seed=0)
    env.send(zeros(4))
    obs, _, _, _, info = env.recv(min_envs=4)
    first = obs["front_rgb"]
    assert first.base is not None and first.flags.c_contiguous, "a view of rows of a page, not a gathered copy"
    assert sorted(info["env_id"].tolist()) == [0, 1, 2, 3]
    env.send(zeros(2), env_ids=info["env_id"][:2])
    obs, _, _, _, info2 = env.recv()
    assert not np.shares_memory(obs["front_rgb"], first), "the next batch fills the other page"
    np.testing.assert_array_equal(steps_of(obs), [2, 2])


def test_half_batches_hand_out_every_result_once_in_its_envs_rows(make_env):
    # free steps, half batches over and over: claims past a waiting recv's limit go to the next page
    env = make_env(num_envs=4, envs_per_worker=1, max_episode_steps=10_000)
    env.reset(seed=0)
    env.send(zeros(4))
    steps = np.zeros(4, int)
    for _ in range(300):
        obs, _, _, _, info = env.recv(min_envs=2)
        ids = info["env_id"]
        assert len(ids) >= 2
        steps[ids] += 1
        assert steps_of(obs) == steps[ids].tolist()
        env.send(zeros(len(ids)), env_ids=ids)
    obs, _, _, _, info = env.recv()
    steps[info["env_id"]] += 1
    assert steps_of(obs) == steps[info["env_id"]].tolist() and len(info["env_id"]) == 4


def test_a_recv_that_times_out_leaves_its_results_to_the_next(make_env):
    env = make_env(num_envs=3, envs_per_worker=1, backend_options={"step_cost_s": 0.0})
    env.set_attr("step_cost_s", [0.0, 0.5, 0.5])
    env.reset(seed=0)
    env.send(zeros(3))
    with pytest.raises(TimeoutError):
        env.recv(min_envs=2, timeout=0.2)
    obs, _, _, _, info = env.recv()
    assert sorted(info["env_id"].tolist()) == [0, 1, 2] and steps_of(obs) == [1, 1, 1]


def test_partial_batches_with_copy_obs_are_copies(make_env):
    env = make_env(num_envs=2, envs_per_worker=1, cameras=("front",), copy_obs=True)
    env.reset(seed=0)
    env.send(zeros(2))
    obs, *_ = env.recv()
    assert obs["front_rgb"].base is None or obs["front_rgb"].flags.owndata


def test_float_env_ids_must_be_whole_numbers(make_env):
    env = make_env(num_envs=2)
    env.reset(seed=0)
    with pytest.raises(ConfigError, match="integers"):
        env.send(zeros(1), env_ids=[1.7])
    env.send(zeros(1), env_ids=np.array([1.0]))
    assert env.recv()[4]["env_id"].tolist() == [1]


def test_stats_after_close_are_the_last_figures(make_env):
    env = make_env(num_envs=2)
    env.reset(seed=0)
    env.step(zeros(2))
    env.close()
    assert env.stats()["steps"].tolist() == [1, 1]


def test_the_main_process_allocates_nothing_sized_by_the_observations(make_env):
    """64 envs of five 128x128 cameras (rgb, depth): 37 MB of observations per batch, all in the shared block,
    which the workers write; the main process's own allocations (the spaces, the batch machinery) stay small."""
    tracemalloc.start()
    try:
        env = make_env(num_envs=64, envs_per_worker=32, image_size=(128, 128), modalities=("rgb", "depth"))
        env.reset(seed=0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    observation_bytes = sum(space.low.size * space.dtype.itemsize for space in env.observation_space.values())
    assert observation_bytes > 30e6
    assert peak < observation_bytes / 8, f"{peak / 1e6:.1f} MB traced"  # 130 MB with gymnasium's batch_space


# ---------------------------------------------------------------- tasks per env


def test_a_suite_gives_the_envs_its_tasks_in_turn(make_env):
    from rlbench_vec import SUITES, list_tasks

    assert "peract18" in list_tasks("synthetic", suites=True) and "peract18" not in list_tasks("synthetic")
    env = make_env(num_envs=20, task="peract18", cameras=(), envs_per_worker=20)
    suite = SUITES["peract18"]
    assert suite[0] == "open_drawer" and len(suite) == 18
    _, info = env.reset(seed=0)
    assert env.get_attr("task") == suite + suite[:2] == tuple(info["task"])
    assert list(info["descriptions"][19]) == [f"synthetic {suite[1]}"]
    with pytest.raises(ConfigError, match="one name per env"):
        make_env(num_envs=3, task=["reach_target", "open_drawer"])


def test_send_reset_starts_episodes_while_others_step(make_env):
    env = make_env(num_envs=3, envs_per_worker=1, cameras=(), autoreset_mode="disabled",
                   backend_options={"episode_length": 1})
    env.reset(seed=0)
    env.set_attr("step_cost_s", [0.5, 0.0, 0.0])
    env.send(zeros(3))
    *_, terminated, _, info = env.recv(min_envs=2)
    ended = info["env_id"]
    assert 0 not in ended.tolist() and terminated.all()
    env.send_reset(ended, seeds=[7, 8], options={"env_options": [{"task": "open_drawer"}, None]})
    seen = {}
    while len(seen) < 3:
        obs, reward, terminated, _, info = env.recv(min_envs=1)
        for row, env_id in enumerate(info["env_id"].tolist()):
            seen[env_id] = (int(obs["task_low_dim_state"][row, 0]), info.get("task", [None] * 3)[row])
    assert seen[0] == (1, None), "env 0 finished its step meanwhile"
    assert {seen[int(e)][0] for e in ended} == {0} and seen[int(ended[0])][1] == "open_drawer"
    assert env.get_attr("task")[int(ended[0])] == "open_drawer"
    with pytest.raises(ConfigError, match="one seed per env"):
        env.send_reset([1], seeds=3)


def run_of_64_envs(make_env, envs_per_worker: int) -> tuple[list, dict]:
    """Steps of 64 envs whose episodes end (and autoreset) twice: what each step returned and the stats."""
    env = make_env(num_envs=64, envs_per_worker=envs_per_worker, image_size=(8, 8), cameras=("front",),
                   backend_options={"episode_length": 3})
    env.reset(seed=0)
    env.reset_stats()
    steps = []
    for _ in range(7):
        obs, reward, terminated, truncated, info = env.step(zeros(64))
        steps.append((obs["task_low_dim_state"].tolist(), reward.tolist(), terminated.tolist(), truncated.tolist(),
                      info.get("autoreset", np.zeros(64, bool)).tolist(), sorted(info)))
    stats = {key: env.stats()[key].tolist() for key in ("steps", "resets")}
    return steps, stats


def test_a_reply_of_many_envs_is_taken_in_as_one_of_a_few(make_env):
    """A command of 64 envs in one worker is reported and taken in by numpy, two workers' of 32 by loops
    (MANY_RECORDS: worker/delivery.py, engine/envtable.py): the same results, infos and accounts."""
    many_steps, many_stats = run_of_64_envs(make_env, 64)
    few_steps, few_stats = run_of_64_envs(make_env, 32)
    assert many_steps == few_steps
    assert many_stats == few_stats
    assert set(many_stats["resets"]) == {1} and set(many_stats["steps"]) == {6}  # an autoreset step takes no action
    assert [all(step[2]) for step in many_steps] == [False, False, True, False, False, False, True]
    disabled = make_env(num_envs=64, envs_per_worker=64, autoreset_mode="disabled", image_size=(8, 8),
                        cameras=("front",), backend_options={"episode_length": 1})
    disabled.reset(seed=0)
    disabled.step(zeros(64))
    with pytest.raises(ResetNeeded, match="envs \\[0, 1, 2"):  # the reply of 64 marked every episode over
        disabled.step(zeros(64))
