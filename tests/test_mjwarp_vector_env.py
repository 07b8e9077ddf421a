"""backend="mjwarp" through RLBenchVectorEnv on warp's CPU device (RLBENCH_VEC_MJWARP_DEVICE=cuda:0 runs them on
a GPU): the mujoco backend's layout through every call, options checked in the main process, autoresets, faults,
restarts, video, and the two action timings. Module-scoped envs where tests can share one (a worker start is
~12 s here).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import imageio.v2 as imageio
import numpy as np
import pytest
from conftest import close_and_check, needs, own_segments
from test_mjwarp_backend import reference

from rlbench_vec import RLBenchVectorEnv
from rlbench_vec.config import EnvConfig, VideoConfig
from rlbench_vec.errors import ConfigError, WorkerError
from rlbench_vec.spec import observation_spec

pytestmark = needs("gpu", "warp", "mujoco_warp", "torch")

DEVICE = os.environ.get("RLBENCH_VEC_MJWARP_DEVICE", "cpu")

ENGINE = {"backend": "mjwarp", "backend_options": {"device": DEVICE}}
HOLD = np.array([0, 0, 0, 0, 0, 0, 0, 1], np.float32)  # joint_velocity: arm still, gripper open


def test_backend_options_and_worker_split_are_checked_in_the_main_process(make_env):
    with pytest.raises(ConfigError, match="nconmax"):
        make_env(num_envs=2, backend="mjwarp", backend_options={"device": DEVICE, "nconmax": 0})
    with pytest.raises(ConfigError, match="allowed"):
        make_env(num_envs=2, backend="mjwarp", backend_options={"device": DEVICE, "renderer": "egl"})
    with pytest.raises(ConfigError, match=r"reach_target has 20 variations\) or 'random'"):
        make_env(num_envs=2, backend="mjwarp", backend_options={"device": DEVICE, "variation": 20})
    with pytest.raises(ConfigError, match=r"task 'pick_and_lift' has no reward\(\) upstream.*reach_target"):
        make_env(num_envs=2, task="pick_and_lift", backend="mjwarp",
                 backend_options={"device": DEVICE, "shaped_rewards": True})
    with pytest.raises(ConfigError, match="envs_per_worker"):
        make_env(num_envs=4, envs_per_worker=2, **ENGINE)
    with pytest.raises(ConfigError, match="arm_mode='ik'"):
        make_env(num_envs=2, arm_mode="planning", **ENGINE)


PICK = {"task": "pick_and_lift", "arm_mode": "joint_velocity", "cameras": ("front", "wrist"), "image_size": (32, 32)}


@pytest.fixture(scope="module")
def pick_env():
    """Three envs of pick_and_lift in one worker, with room for 56 constraint rows: the scene at rest needs 49, so
    an arm driven into the table overflows them (the fault test) while small moves and a closing gripper do not
    (the layout and partial-completion tests)."""
    segments_before = own_segments()
    env = RLBenchVectorEnv(num_envs=3, **PICK, backend="mjwarp", backend_options={"device": DEVICE, "njmax": 56})
    yield env
    close_and_check([env], segments_before)


def test_one_worker_serves_the_mujoco_layout_through_every_call(pick_env):
    """Same keys, shapes and dtypes as backend='mujoco'; env i starts the mujoco backend's episode of seed
    + i; reset, step, step_chunk, send/recv, render, get_attr; demos refused naming the alternative."""
    env = pick_env
    mujoco_cfg = EnvConfig(**PICK, backend="mujoco").validated()
    spec = observation_spec(mujoco_cfg)
    assert {k: (s.shape, s.dtype) for k, s in env.single_observation_space.items()} == {
        k: (s.shape, s.dtype) for k, s in spec.items()}
    assert all(space.low.strides[0] == 0 for space in env.observation_space.values())  # no host memory per env
    assert len(env.worker_pids) == 1

    obs, info = env.reset(seed=7)
    assert {k: (v.shape, v.dtype) for k, v in obs.items()} == {k: ((3, *s.shape), s.dtype) for k, s in spec.items()}
    for i in range(3):
        np.testing.assert_allclose(obs["task_low_dim_state"][i], reference(mujoco_cfg, 7 + i).low_dim_state(),
                                   atol=1e-5)
    assert list(env.get_attr("variation")) == info["variation_index"].tolist() == [0, 0, 0]  # RLBench's default

    actions = np.tile(HOLD, (3, 1))
    actions[:, 0] = [0.5, 0.0, -0.5]
    obs, reward, terminated, truncated, info = env.step(actions)
    assert reward.shape == terminated.shape == truncated.shape == (3,) and not truncated.any()
    obs, reward, _, _, info = env.step_chunk(np.repeat(actions[:, None], 2, axis=1))
    assert reward.shape == (3, 2) and info["executed"].all()
    joints = obs["joint_positions"][:, 0].copy()
    assert joints[0] > joints[1] + 0.01 > joints[2] + 0.02  # each world moved by its own action

    env.send(actions[[2, 0]], env_ids=[2, 0])
    obs, _, _, _, info = env.recv()
    assert sorted(info["env_id"].tolist()) == [0, 2] and obs["front_rgb"].shape == (2, 32, 32, 3)
    frames = env.render("front")
    assert frames.shape == (3, 32, 32, 3) and frames.dtype == np.uint8
    np.testing.assert_array_equal(frames[info["env_id"]], obs["front_rgb"])  # the render they were observed from

    with pytest.raises(WorkerError, match="add it to cameras"):
        env.render("overhead")
    with pytest.raises(WorkerError, match="backend='mujoco'"):
        env.get_demos(1)


@pytest.fixture(scope="module")
def reach_env():
    """Two envs of reach_target in one worker, next-step autoresets: 2-step episodes, the front camera's rgb at
    16x16."""
    segments_before = own_segments()
    env = RLBenchVectorEnv(num_envs=2, task="reach_target", arm_mode="joint_velocity", cameras=("front",),
                           modalities=("rgb",), image_size=(16, 16), low_dim=("joint_positions",), max_episode_steps=2,
                           **ENGINE)
    yield env
    close_and_check([env], segments_before)


MOVE = np.tile(np.array([1, 0, 0, 0, 0, 0, 0, 1], np.float32), (2, 1))  # joint_velocity: joint 0 turns


def test_episodes_end_and_restart_in_next_step_mode(reach_env):
    """The step that ends an episode returns its final observation; the next step resets (same_step: the video
    test below)."""
    env = reach_env
    home = env.reset(seed=0)[0]["joint_positions"].copy()
    env.step(MOVE)
    obs, reward, terminated, truncated, info = env.step(MOVE)
    assert truncated.all() and not terminated.any()
    assert (obs["joint_positions"][:, 0] > home[:, 0] + 0.01).all()
    obs, reward, _, truncated, info = env.step(MOVE)
    assert info["autoreset"].all() and not reward.any() and not truncated.any()
    np.testing.assert_allclose(obs["joint_positions"], home, atol=1e-6)


def test_a_fault_ends_only_its_worlds_episode_with_an_info_flag(pick_env):
    """World 1 drives its arm into the table and overflows the constraint rows (pick_env): its episode is
    truncated with info["fault"] and reset next step; worlds 0 and 2 go on."""
    env = pick_env
    home = env.reset(seed=0)[0]["joint_positions"].copy()
    actions = np.tile(HOLD, (3, 1))
    actions[1, [1, 3]] = 2.0  # shoulder and elbow: down and out
    for _ in range(40):
        obs, reward, terminated, truncated, info = env.step(actions)
        assert not truncated[[0, 2]].any() and not terminated.any()
        if truncated[1]:
            break
    else:
        pytest.fail("world 1 never reached the table")
    assert info["_fault"].tolist() == [False, True, False] and info["fault"][1] == "constraint_overflow"
    np.testing.assert_allclose(obs["joint_positions"][[0, 2]], home[[0, 2]], atol=1e-3)
    obs, _, _, truncated, info = env.step(np.tile(HOLD, (3, 1)))
    assert info["_autoreset"].tolist() == [False, True, False] and not truncated.any()
    np.testing.assert_allclose(obs["joint_positions"][1], home[1], atol=1e-6)


def test_recv_returns_envs_as_their_actions_finish_and_new_actions_join(pick_env):
    """Partial completion through the engine: with send/recv the worker answers each env when its own
    action is done, and actions sent meanwhile join the worlds still moving at the next control step."""
    env = pick_env
    env.reset(seed=0)
    moves = np.zeros((3, 8), np.float32)
    moves[:, 0], moves[:, -1] = 0.2, 1.0  # one control step each, gripper kept open
    moves[0, -1] = 0.0  # env 0 closes its gripper: until the fingers stop, about 12 control steps
    env.send(moves)
    returned, rounds = [], 0
    while True:
        obs, _, _, _, info = env.recv(min_envs=1)
        ids = info["env_id"].tolist()
        returned.append(ids)
        if 0 in ids:
            break
        rounds += 1
        env.send(moves[ids], env_ids=ids)
    assert returned[0] == [1, 2] and rounds >= 5, returned  # envs 1 and 2 acted again while env 0's action ran
    assert obs["gripper_joint_positions"][ids.index(0)].max() < 0.002  # env 0 came back with its fingers closed


def test_a_killed_worker_is_restarted_and_its_envs_report_it(reach_env):
    env = reach_env
    env.reset(seed=0)
    pid = env.worker_pids[0]
    os.kill(pid, signal.SIGKILL)
    obs, _, _, truncated, info = env.step(np.tile(HOLD, (2, 1)))
    assert truncated.all() and info["restarted"].all() and "SIGKILL" in info["restart_reason"][0]
    assert env.worker_pids[0] != pid
    obs, _, _, truncated, info = env.step(np.tile(HOLD, (2, 1)))
    assert info["autoreset"].all() and not truncated.any()
    assert obs["front_rgb"].mean() > 20  # the new worker renders


def test_same_step_autoresets_and_video_of_a_chosen_env_per_episode(make_env, tmp_path):
    """same_step: the step that ends an episode returns the next episode's first observation, the final one in
    the info. The video of env 1 (an observed and an unobserved camera) ends episode 0 with that final
    observation and starts episode 1 in files of its own."""
    video = VideoConfig(directory=str(tmp_path), env_ids=(1,), cameras=("front", "overhead"))
    env = make_env(num_envs=2, task="reach_target", arm_mode="joint_velocity", cameras=("front",),
                   modalities=("rgb",), image_size=(64, 48), low_dim=("joint_positions",), max_episode_steps=2,
                   autoreset_mode="same_step", record=video, **ENGINE)
    obs, _ = env.reset(seed=0)
    home, fronts = obs["joint_positions"].copy(), [obs["front_rgb"][1].copy()]
    fronts.append(env.step(MOVE)[0]["front_rgb"][1].copy())
    obs, reward, terminated, truncated, info = env.step(MOVE)
    assert truncated.all() and not terminated.any() and info["_final_obs"].all()
    assert all(final["joint_positions"][0] > start[0] + 0.01 for final, start in zip(info["final_obs"], home))
    np.testing.assert_allclose(obs["joint_positions"], home, atol=1e-6)
    fronts.append(info["final_obs"][1]["front_rgb"].copy())
    episode_1 = [obs["front_rgb"][1].copy()]
    env.close()  # the worker's recorder flushes its files
    assert sorted(os.listdir(tmp_path)) == [f"env001_ep0000{n}_{camera}.mp4" for n in (0, 1)
                                            for camera in ("front", "overhead")]
    for episode, observed in enumerate((fronts, episode_1)):
        for camera in ("front", "overhead"):
            with imageio.get_reader(str(tmp_path / f"env001_ep0000{episode}_{camera}.mp4")) as reader:
                frames = [np.asarray(frame) for frame in reader]
            assert len(frames) == len(observed) and frames[0].shape == (48, 64, 3), (episode, camera)
            if camera == "front":  # lossy h264: close to the observations, frame by frame
                assert all(np.abs(f.astype(np.int16) - o).mean() < 4.0 for f, o in zip(frames, observed)), episode


def test_fixed_timing_through_the_vector_env_says_what_is_under_way(make_env):
    env = make_env(num_envs=2, task="pick_and_lift", backend="mjwarp", backend_options={"device": DEVICE},
                   arm_mode="joint_velocity", action_timing="fixed", cameras=(), modalities=())
    env.reset(seed=0)
    close = np.array([[0, 0.2, 0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0, 0, 1]], np.float32)  # env 1 keeps it open
    _, _, _, _, info = env.step(close)
    assert info["gripper_moving"].tolist() == [True, False] and info["_gripper_moving"].tolist() == [True, False]
    for _ in range(20):
        obs, _, _, _, info = env.step(close)
    assert "gripper_moving" not in info and obs["gripper_joint_positions"][0].max() < 0.002


@pytest.mark.skipif(not os.path.exists("/dev/nvidia0"), reason="needs an NVIDIA GPU (the CUDA IPC pages)")
@pytest.mark.parametrize("as_torch", [True, False])
def test_cuda_observations_are_read_after_the_worker_wrote_them(as_torch):
    """The worker replies with its page writes queued (EnvGroup.pages_written): what the main process reads
    of a step's observations, at once, is that step's frame, never the page's previous content."""
    import torch

    n = 512  # a render long enough that a read not ordered after it would see the old page
    env = RLBenchVectorEnv(num_envs=n, task="pick_and_lift", backend="mjwarp", arm_mode="joint_velocity",
                           action_timing="fixed", as_torch=as_torch, device="cuda" if as_torch else None)
    try:
        env.reset(seed=0)
        actions = np.zeros((n, 8), np.float32)
        actions[:, :7], actions[:, 7] = 0.8, 1.0
        for _ in range(3):
            obs = env.step(actions)[0]
            wrist = obs["wrist_rgb"][n - 1]
            seen = wrist.cpu().numpy() if isinstance(wrist, torch.Tensor) else wrist.copy()
            np.testing.assert_array_equal(seen, env.call("render_rgb", "wrist", env_ids=[n - 1])[0])
    finally:
        env.close()


@pytest.mark.skipif(not os.path.exists("/dev/nvidia0"), reason="needs an NVIDIA GPU (the CUDA IPC pages)")
def test_closing_a_cuda_vector_env_prints_nothing():
    """The bench on CUDA tensors ends without torch's 'Producer process has been terminated before all
    shared CUDA tensors released' (the worker's pages were held by the user's tensors at its exit)."""
    run = subprocess.run(
        [sys.executable, "-m", "rlbench_vec.bench", "--backend", "mjwarp", "--num_envs", "8", "--steps", "5",
         "--task", "pick_and_lift", "--arm_mode", "joint_velocity", "--as_torch", "--device", "cuda", "--quiet"],
        capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    assert "Producer process" not in run.stderr + run.stdout
