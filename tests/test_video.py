"""Per-env video: the recorder in-process with a fake backend, then real MuJoCo workers end to end."""

from __future__ import annotations

import importlib.util
import os

import imageio.v2 as imageio
import numpy as np
import pytest

from rlbench_vec.config import VideoConfig
from rlbench_vec.worker.video import VideoRecorder

CODEC_TOLERANCE = 4.0  # mean absolute difference per channel value (0..255) after lossy h264


class FakeBackend:
    """Renders a frame whose colour encodes (camera, frame number), so decoded frames can be matched."""

    def __init__(self, height: int = 48, width: int = 64):
        self.shape = (height, width, 3)
        self.t = 0

    def render_rgb(self, camera: str) -> np.ndarray:
        return expected_frame(self.shape, camera, self.t)


def expected_frame(shape: tuple[int, int, int], camera: str, t: int) -> np.ndarray:
    frame = np.empty(shape, np.uint8)
    frame[..., 0] = (40 + 25 * t) % 256  # neighbours differ by far more than the codec's error
    frame[..., 1] = 60 if camera == "front" else 180
    frame[..., 2] = 128
    return frame


def decode(path: str) -> list[np.ndarray]:
    with imageio.get_reader(path) as reader:
        return [np.asarray(frame) for frame in reader]


def close_enough(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and float(np.abs(a.astype(np.int16) - b.astype(np.int16)).mean()) < CODEC_TOLERANCE


def record_episodes(recorder: VideoRecorder, backend: FakeBackend, lengths: list[int]) -> None:
    for length in lengths:  # as EpisodeRunner: a frame after the reset, then one per executed action
        recorder.start_episode()
        recorder.capture(backend.render_rgb)
        for _ in range(length):
            backend.t += 1
            recorder.capture(backend.render_rgb)


def test_one_file_per_episode_and_camera_with_every_frame(tmp_path):
    recorder = VideoRecorder(VideoConfig(directory=str(tmp_path), cameras=("front", "wrist"), fps=10), env_index=3)
    backend = FakeBackend()
    record_episodes(recorder, backend, [5, 9])
    recorder.close()
    assert sorted(os.listdir(tmp_path)) == [
        "env003_ep00000_front.mp4", "env003_ep00000_wrist.mp4", "env003_ep00001_front.mp4", "env003_ep00001_wrist.mp4",
    ]
    t = 0
    for episode, length in enumerate([5, 9]):
        for camera in ("front", "wrist"):
            frames = decode(str(tmp_path / f"env003_ep{episode:05d}_{camera}.mp4"))
            assert len(frames) == length + 1
            for offset, frame in enumerate(frames):
                assert close_enough(frame, expected_frame(backend.shape, camera, t + offset)), (episode, camera, offset)
        t += length


def test_per_run_file_and_numbering_never_overwrites(tmp_path):
    config = VideoConfig(directory=str(tmp_path), cameras=("front",), per_episode=False)
    for _ in range(2):  # a second recorder (a restarted worker, a second run) gets the next number
        recorder = VideoRecorder(config, env_index=0)
        record_episodes(recorder, FakeBackend(), [3, 4])
        recorder.close()
    assert sorted(os.listdir(tmp_path)) == ["env000_run00_front.mp4", "env000_run01_front.mp4"]
    assert len(decode(str(tmp_path / "env000_run01_front.mp4"))) == 4 + 5


def test_rank_prefix_under_torchrun(tmp_path, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    recorder = VideoRecorder(VideoConfig(directory=str(tmp_path), cameras=("front",)), env_index=0)
    record_episodes(recorder, FakeBackend(), [1])
    recorder.close()
    assert os.listdir(tmp_path) == ["rank001_env000_ep00000_front.mp4"]


def test_a_failing_encoder_stops_recording_without_failing_steps(tmp_path, capfd):
    recorder = VideoRecorder(VideoConfig(directory=str(tmp_path), cameras=("front",)), env_index=0)
    backend = FakeBackend()
    recorder.capture(backend.render_rgb)
    backend.shape = (32, 32, 3)  # a frame of another size cannot go into the same stream
    for _ in range(recorder.config.queue_size * 2):  # more than the queue holds: capture must never block
        recorder.capture(backend.render_rgb)
    recorder.close()
    assert recorder.failed
    assert "video of env 0 stopped" in capfd.readouterr().err


def mujoco_available() -> bool:
    """Whether mujoco is installed, found without importing it into the test process (that would
    fix its renderer for every later in-process test). A broken backend must fail, not skip."""
    return importlib.util.find_spec("mujoco") is not None


@pytest.mark.skipif(not mujoco_available(), reason="the MuJoCo backend is not usable here")
def test_mujoco_workers_record_frames_that_match_observations(make_env, tmp_path):
    """Env 1 of 2 records: one frame after the reset, then one per executed action, chunk sub-steps
    included; each decoded frame matches that step's front_rgb / wrist_rgb observation."""
    video = VideoConfig(directory=str(tmp_path), env_ids=(1,), cameras=("front", "wrist"))
    env = make_env(num_envs=2, backend="mujoco", cameras=("front", "wrist"), modalities=("rgb",),
                   image_size=(64, 48), max_chunk=3, chunk_obs="all", copy_obs=True, record=video)
    obs, _ = env.reset(seed=0)
    seen = {camera: [obs[f"{camera}_rgb"][1]] for camera in ("front", "wrist")}
    start = np.concatenate([obs["gripper_pose"], np.ones((2, 1))], axis=1).astype(np.float32)
    move = lambda j: start + np.float32([0.04, 0, -0.04, 0, 0, 0, 0, 0]) * j  # ik: 4 cm forward and down per step
    for j in (1, 2):
        obs, *_ = env.step(move(j))
        for camera in seen:
            seen[camera].append(obs[f"{camera}_rgb"][1])
    obs, _, _, _, info = env.step_chunk(np.stack([move(j) for j in (3, 4, 5)], axis=1))
    assert info["executed"][1].all()
    for camera in seen:
        seen[camera].extend(np.array(info["chunk_observations"][f"{camera}_rgb"][1]))  # views of shared memory
    env.close()  # the worker's recorder flushes its files

    assert sorted(os.listdir(tmp_path)) == ["env001_ep00000_front.mp4", "env001_ep00000_wrist.mp4"]
    for camera, observed in seen.items():
        frames = decode(str(tmp_path / f"env001_ep00000_{camera}.mp4"))
        assert len(frames) == 1 + 2 + 3
        for step, (frame, expected) in enumerate(zip(frames, observed)):
            assert close_enough(frame, expected), (camera, step)
        # the arm moves in the front view: every frame is closest to its own step's observation
        if camera == "front":
            distance = [[np.abs(f.astype(np.int16) - o).mean() for o in observed] for f in frames]
            assert list(np.argmin(distance, axis=1)) == list(range(len(frames)))
