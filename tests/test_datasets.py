"""rlbench_vec.datasets: demos of the real mujoco backend written in RLBench's layout and as LeRobot
datasets, read back by our reader, by an independent reader written from upstream's loader
(tests/upstream_loader.py, in a Python where `rlbench` is the test double) and by LeRobotDataset."""

from __future__ import annotations

import math
import os
import pickle
import socket
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from conftest import extra_reason

from rlbench_vec import CAMERAS, Demo, EnvConfig, RLBenchVectorEnv
from rlbench_vec.datasets import (
    completed_episodes,
    episode_dir,
    read_episode,
    remove_stale_staging,
    upstream_pickle,
    write_episode,
)
from rlbench_vec.datasets.rlbench_format import DEPTH_SCALE, STAGING_FOLDER, decode_mask, encode_mask, misc_key
from rlbench_vec.datasets.stored_episodes import dataset_identity, seed_of_state, stored_task_episodes
from rlbench_vec.errors import DatasetError

TESTS = Path(__file__).resolve().parent
DOUBLE = TESTS / "rlbench_double"
TASK = "pick_and_lift"
SIZE = 32
LOW_DIM = ("joint_velocities", "joint_positions", "joint_forces", "gripper_open", "gripper_pose", "gripper_matrix",
           "gripper_joint_positions", "task_low_dim_state")
CONFIG = EnvConfig(task=TASK, backend="mujoco", image_size=(SIZE, SIZE),
                   modalities=("rgb", "depth", "mask", "point_cloud"), low_dim=LOW_DIM, misc=True, arm_mode="ik",
                   absolute_mode=False)


@pytest.fixture(scope="module")
def demos() -> list[Demo]:
    fields = {name: getattr(CONFIG, name) for name in ("task", "backend", "image_size", "modalities", "low_dim",
                                                        "misc", "arm_mode", "absolute_mode")}
    with RLBenchVectorEnv(num_envs=2, seed=3, **fields) as env:
        collected = env.get_demos(2)
    assert all(demo.success for demo in collected)
    return collected


@pytest.fixture(scope="module")
def written(demos, tmp_path_factory) -> tuple[Path, list[Path]]:
    root = tmp_path_factory.mktemp("rlbench_layout")
    return root, [write_episode(root, TASK, i, demo) for i, demo in enumerate(demos)]


def _depth_bound(reference: np.ndarray, scale: float = 1.0) -> np.ndarray:
    """RLBench's encoding keeps depth to half a step of 1/DEPTH_SCALE; float32 adds its own rounding."""
    return scale * 0.5 / DEPTH_SCALE + np.spacing(np.abs(reference).astype(np.float32)) + 1e-12


def test_layout_is_upstreams(written, demos):
    root, paths = written
    for path, demo in zip(paths, demos):
        assert path == root / TASK / f"variation{demo.variation_index}" / "episodes" / path.name
        folders = {f"{camera}_{modality}" for camera in CAMERAS for modality in ("rgb", "depth", "mask")}
        files = {"low_dim_obs.pkl", "variation_number.pkl", "variation_descriptions.pkl"}
        assert set(os.listdir(path)) == folders | files
        steps = len(demo.actions) + 1
        for folder in folders:
            assert sorted(os.listdir(path / folder)) == sorted(f"{t}.png" for t in range(steps))
        with open(path.parent.parent / "variation_descriptions.pkl", "rb") as f:
            assert pickle.load(f) == demo.descriptions
    assert paths[0].name == "episode0" and paths[1].name == "episode1"
    assert not (root / STAGING_FOLDER).exists() or not os.listdir(root / STAGING_FOLDER)


def test_round_trip_rlbench_format(written, demos):
    _, paths = written
    for path, demo in zip(paths, demos):
        back = read_episode(path, point_clouds=True)
        steps = len(demo.actions) + 1
        assert back.success and back.variation_index == demo.variation_index
        assert back.descriptions == demo.descriptions
        np.testing.assert_array_equal(back.actions, demo.actions)
        assert back.actions.dtype == np.float32
        # RLBench's Observation.ignore_collisions per frame: 0 at the start, 1 while moving to a marked waypoint
        # (pick_and_lift's grasp approach and lift), stored and read back
        assert demo.ignore_collisions is not None and demo.ignore_collisions.shape == (steps,)
        assert demo.ignore_collisions[0] == 0 and set(demo.ignore_collisions) == {0.0, 1.0}
        np.testing.assert_array_equal(back.ignore_collisions, demo.ignore_collisions)
        for camera in CAMERAS:
            rgb, depth, mask = (back.observations[f"{camera}_{m}"] for m in ("rgb", "depth", "mask"))
            assert rgb.shape == (steps, SIZE, SIZE, 3) and rgb.dtype == np.uint8
            assert depth.shape == mask.shape == (steps, SIZE, SIZE)
            assert depth.dtype == mask.dtype == np.float32
            assert back.observations[f"{camera}_point_cloud"].shape == (steps, SIZE, SIZE, 3)
            np.testing.assert_array_equal(rgb, demo.observations[f"{camera}_rgb"])
            np.testing.assert_array_equal(mask, demo.observations[f"{camera}_mask"])
            original = demo.observations[f"{camera}_depth"]
            assert np.all(np.abs(depth - original) <= _depth_bound(original))
            for field in ("extrinsics", "intrinsics", "near", "far"):
                np.testing.assert_array_equal(back.observations[misc_key(camera, field)],
                                              demo.observations[misc_key(camera, field)])
        for name in LOW_DIM:
            assert back.observations[name].dtype == np.float64
            np.testing.assert_array_equal(back.observations[name], demo.observations[name])


def test_metric_depth_round_trip(demos, tmp_path):
    """A demo recorded with depth in metres is stored normalised, as upstream, and read back in metres."""
    demo = demos[0]
    observations = dict(demo.observations)
    for camera in CAMERAS:
        near, far = (observations[misc_key(camera, f)][:, None, None] for f in ("near", "far"))
        observations[f"{camera}_depth"] = (near + observations[f"{camera}_depth"] * (far - near)).astype(np.float32)
    path = write_episode(tmp_path, TASK, 0, replace(demo, observations=observations), depth_in_meters=True)
    back = read_episode(path, depth_in_meters=True)
    for camera in CAMERAS:
        original = observations[f"{camera}_depth"]
        span = observations[misc_key(camera, "far")][0] - observations[misc_key(camera, "near")][0]
        assert np.all(np.abs(back.observations[f"{camera}_depth"] - original) <= _depth_bound(original, span) * 2)


def test_independent_upstream_reader_agrees(written):
    """The pickles load as RLBench's own classes in a Python with `rlbench` (the double) and no rlbench_vec,
    and upstream's loading logic returns what our reader returns."""
    _, paths = written
    for path in paths:
        out = path.parent.parent.parent.parent / f"{path.name}_upstream.npz"
        env = {**os.environ, "PYTHONPATH": str(DOUBLE)}
        run = subprocess.run([sys.executable, str(TESTS / "upstream_loader.py"), str(path), str(out)], env=env,
                             cwd=path, capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        upstream = np.load(out)
        ours = read_episode(path, point_clouds=True)
        metric = read_episode(path, depth_in_meters=True)
        for camera in CAMERAS:
            np.testing.assert_array_equal(ours.observations[f"{camera}_rgb"], upstream[f"{camera}_rgb"])
            np.testing.assert_array_equal(ours.observations[f"{camera}_mask"], upstream[f"{camera}_mask"])
            np.testing.assert_array_equal(ours.observations[f"{camera}_depth"],
                                          upstream[f"{camera}_depth"].astype(np.float32))
            np.testing.assert_array_equal(metric.observations[f"{camera}_depth"],
                                          upstream[f"{camera}_depth_m"].astype(np.float32))
            np.testing.assert_allclose(ours.observations[f"{camera}_point_cloud"], upstream[f"{camera}_point_cloud"],
                                       rtol=0, atol=1e-9)
        for name in LOW_DIM:
            np.testing.assert_array_equal(ours.observations[name], upstream[name])
        assert "gripper_touch_forces" not in upstream  # we have none: stored as None, as upstream when it is off
        assert int(upstream["variation_number"]) == ours.variation_index
        assert np.all(upstream["variation_index_in_misc"] == ours.variation_index)
        assert list(upstream["descriptions"]) == list(upstream["variation_descriptions"]) == ours.descriptions


def test_point_clouds_from_misc_match_the_backend(written, demos):
    """Point clouds rebuilt from depth and misc, as RLBench's loader does, land on the backend's own point
    clouds: this checks the misc conventions (camera pose with CoppeliaSim's axes, PyRep's intrinsics). PyRep
    puts pixel centres at integer coordinates where the renderer has them at +0.5, so points may differ by
    the ray angle of half a pixel diagonal times the depth."""
    _, paths = written
    for path, demo in zip(paths, demos):
        back = read_episode(path, depth_in_meters=True, point_clouds=True)
        for camera in CAMERAS:
            focal = abs(back.observations[misc_key(camera, "intrinsics")][0, 0, 0])
            depth = back.observations[f"{camera}_depth"]
            error = np.linalg.norm(back.observations[f"{camera}_point_cloud"]
                                   - demo.observations[f"{camera}_point_cloud"], axis=-1)
            assert np.all(error <= depth * (math.sqrt(0.5) / focal) * 1.01 + 1e-5), (camera, error.max())


def test_pickle_names_only_upstream_classes_and_numpy_1_paths(written):
    """low_dim_obs.pkl refers to RLBench's classes and to numpy names that numpy 1.x and 2.x both import."""
    _, paths = written
    named = set()

    class Stored:
        pass

    class NameRecorder(pickle.Unpickler):
        def find_class(self, module, name):
            named.add((module, name))
            return Stored if module.startswith("rlbench") else super().find_class(module, name)

    with open(paths[0] / "low_dim_obs.pkl", "rb") as file:
        NameRecorder(file).load()
    assert named == {("rlbench.demo", "Demo"), ("rlbench.backend.observation", "Observation"),
                     ("numpy.core.multiarray", "_reconstruct"), ("numpy.core.multiarray", "scalar"),
                     ("numpy", "ndarray"), ("numpy", "dtype")}


def test_masks_are_stored_as_upstream_codes_them_over_the_whole_24_bit_range():
    """handle = R + 256 G + 65536 B (upstream's rgb_handles_to_mask), for handles up to 2**24 - 1."""
    handles = np.array([[0, 1, 255, 256], [65535, 65536, 123456, DEPTH_SCALE]], np.float32)
    image = encode_mask(handles)
    assert image.dtype == np.uint8 and image.shape == (2, 4, 3)
    value = image.astype(np.int64)
    np.testing.assert_array_equal(value[..., 0] + 256 * value[..., 1] + 65536 * value[..., 2], handles)
    np.testing.assert_array_equal(decode_mask(image), handles)


def test_reader_refuses_foreign_pickles(tmp_path):
    episode = tmp_path / "episode0"
    episode.mkdir()
    (episode / "low_dim_obs.pkl").write_bytes(pickle.dumps(os.system))  # unpickling may call what it names
    with pytest.raises(DatasetError, match="refusing to load"):
        read_episode(episode)
    with pytest.raises(DatasetError, match="not an RLBench episode"):
        read_episode(tmp_path / "missing")


def test_writer_refuses_what_rlbench_cannot_load(demos, tmp_path):
    demo = demos[0]
    without_misc = {k: v for k, v in demo.observations.items() if not k.startswith("front_camera")}
    with pytest.raises(DatasetError, match="misc=True"):
        write_episode(tmp_path, TASK, 0, replace(demo, observations=without_misc))
    without_camera = {k: v for k, v in demo.observations.items() if not k.startswith("wrist_")}
    with pytest.raises(DatasetError, match="all five cameras"):
        write_episode(tmp_path, TASK, 0, replace(demo, observations=without_camera))
    with pytest.raises(DatasetError, match="successful"):
        write_episode(tmp_path, TASK, 0, replace(demo, success=False))
    with pytest.raises(DatasetError, match="number of steps"):
        write_episode(tmp_path, TASK, 0, replace(demo, actions=demo.actions[:-1]))
    write_episode(tmp_path, TASK, 0, demo)
    with pytest.raises(DatasetError, match="already exists"):
        write_episode(tmp_path, TASK, 0, demo)
    assert not os.listdir(tmp_path / STAGING_FOLDER)


def test_failure_mid_write_leaves_nothing(demos, tmp_path):
    """An error after some images are written (a mask that is no object handle) removes the partial episode."""
    demo = demos[0]
    observations = dict(demo.observations)
    observations["front_mask"] = observations["front_mask"].copy()
    observations["front_mask"][-1, 0, 0] = -1.0
    with pytest.raises(DatasetError, match="object handles"):
        write_episode(tmp_path, TASK, 0, replace(demo, observations=observations))
    assert completed_episodes(tmp_path, TASK, demo.variation_index) == []
    assert not episode_dir(tmp_path, TASK, demo.variation_index, 0).exists()
    assert not os.listdir(tmp_path / STAGING_FOLDER)


CRASHING_WRITER = textwrap.dedent("""
    import os, pickle, sys
    from rlbench_vec.datasets import rlbench_writer
    demo = pickle.load(open(sys.argv[2], "rb"))
    original, encoded = rlbench_writer.png_bytes, []
    def encode_then_die(*args, **kwargs):
        encoded.append(1)
        if len(encoded) == 20:
            os._exit(9)  # the process dies mid-episode, as a SIGKILL would leave it
        return original(*args, **kwargs)
    rlbench_writer.png_bytes = encode_then_die
    rlbench_writer.write_episode(sys.argv[1], "pick_and_lift", 0, demo)
""")


def test_crash_mid_write_leaves_no_episode_and_rerun_completes(demos, tmp_path):
    demo = demos[0]
    demo_file = tmp_path / "demo.pkl"
    demo_file.write_bytes(pickle.dumps(demo))
    root = tmp_path / "data"
    run = subprocess.run([sys.executable, "-c", CRASHING_WRITER, str(root), str(demo_file)], cwd=TESTS.parent,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 9, run.stderr
    episodes = root / TASK / f"variation{demo.variation_index}" / "episodes"
    assert not episodes.exists() or os.listdir(episodes) == []  # what RLBench's loader lists: nothing partial
    assert completed_episodes(root, TASK, demo.variation_index) == []
    assert len(os.listdir(root / STAGING_FOLDER)) == 1  # the dead writer's partial episode, out of loaders' sight
    assert remove_stale_staging(root) == 1
    assert not (root / STAGING_FOLDER).exists()
    write_episode(root, TASK, 0, demo)
    assert completed_episodes(root, TASK, demo.variation_index) == [0]


def test_stale_staging_keeps_live_writers(tmp_path):
    live = tmp_path / STAGING_FOLDER / f"{socket.gethostname()}-{os.getpid()}-{'0' * 32}"
    live.mkdir(parents=True)
    assert remove_stale_staging(tmp_path) == 0 and live.is_dir()


# ---- LeRobot ----

def _lerobot():
    return pytest.importorskip("lerobot.datasets.lerobot_dataset", reason=extra_reason("lerobot", ["lerobot"]))


def test_round_trip_lerobot_format(demos, tmp_path):
    _lerobot()
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    from rlbench_vec.datasets.lerobot_format import STATE_FIELDS, LeRobotOptions, LeRobotWriter

    options = LeRobotOptions(cameras=("front", "wrist"))
    with LeRobotWriter(tmp_path, CONFIG, options) as writer:
        indices = [writer.add_episode(demo, variation_episode=i) for i, demo in enumerate(demos)]
    assert indices == [0, 1]

    dataset = LeRobotDataset(f"rlbench_vec/{TASK}", root=tmp_path / TASK)
    frames = [len(demo.actions) for demo in demos]
    assert dataset.num_episodes == 2 and len(dataset) == sum(frames)
    state_fields = [name for name in STATE_FIELDS if name in LOW_DIM]
    start = 0
    for episode, (demo, steps) in enumerate(zip(demos, frames)):
        for t in (0, steps - 1):
            item = dataset[start + t]
            assert int(item["episode_index"]) == episode and int(item["frame_index"]) == t
            assert item["task"] == demo.descriptions[0]
            assert item["rlbench_episode"].tolist() == [demo.variation_index, episode]
            np.testing.assert_array_equal(item["action"].numpy(), demo.actions[t])
            state = np.concatenate([np.atleast_1d(demo.observations[name][t]) for name in state_fields])
            np.testing.assert_allclose(item["observation.state"].numpy(), state.astype(np.float32))
            np.testing.assert_allclose(item["observation.environment_state"].numpy(),
                                       demo.observations["task_low_dim_state"][t].astype(np.float32))
            for camera in options.cameras:
                image = item[f"observation.images.{camera}"]
                assert tuple(image.shape) == (3, SIZE, SIZE) and str(image.dtype) == "torch.float32"
                decoded = (image.numpy().transpose(1, 2, 0) * 255).astype(np.float32)
                rgb = demo.observations[f"{camera}_rgb"].astype(np.float32)
                error = np.abs(decoded - rgb[t]).mean()
                assert error < 12, (camera, t, error)  # lossy video of 32x32 frames
                assert error < np.abs(decoded - rgb[steps - 1 - t]).mean()  # and the frame of its own time
        start += steps


def test_lerobot_resume_lists_completed_episodes(demos, tmp_path):
    _lerobot()
    from rlbench_vec.datasets.lerobot_format import LeRobotOptions, LeRobotWriter

    options = LeRobotOptions(cameras=("front",))
    with LeRobotWriter(tmp_path, CONFIG, options) as writer:
        writer.add_episode(demos[0], variation_episode=4)
    with LeRobotWriter(tmp_path, CONFIG, options) as writer:
        assert writer.completed == {(demos[0].variation_index, 4)}
        assert writer.add_episode(demos[1], variation_episode=5) == 1
    with LeRobotWriter(tmp_path, CONFIG, options) as writer:
        assert writer.completed == {(demos[0].variation_index, 4), (demos[1].variation_index, 5)}
    with pytest.raises(DatasetError, match="other features"):
        LeRobotWriter(tmp_path, CONFIG, LeRobotOptions(cameras=("front", "wrist")))


CRASHING_LEROBOT_WRITER = textwrap.dedent("""
    import os, pickle, sys
    from rlbench_vec.datasets.lerobot_format import LeRobotOptions, LeRobotWriter
    config, demos = pickle.load(open(sys.argv[2], "rb"))
    writer = LeRobotWriter(sys.argv[1], config, LeRobotOptions(cameras=("front",), checkpoint_every=2))
    for episode in range(3):
        writer.add_episode(demos[episode % 2], variation_episode=episode)
    os._exit(9)  # killed in the session after the checkpoint: LeRobot's files of episode 2 stay open
""")


def test_lerobot_crash_rolls_back_to_the_last_checkpoint(demos, tmp_path):
    _lerobot()
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    from rlbench_vec.datasets.lerobot_format import LeRobotOptions, LeRobotWriter

    inputs = tmp_path / "inputs.pkl"
    inputs.write_bytes(pickle.dumps((CONFIG, demos)))
    root = tmp_path / "data"
    run = subprocess.run([sys.executable, "-c", CRASHING_LEROBOT_WRITER, str(root), str(inputs)], cwd=TESTS.parent,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 9, run.stderr
    assert (root / STAGING_FOLDER / "lerobot" / TASK / "journal.json").is_file()
    with LeRobotWriter(root, CONFIG, LeRobotOptions(cameras=("front",))) as writer:
        assert writer.completed == {(demos[0].variation_index, 0), (demos[1].variation_index, 1)}
        writer.add_episode(demos[0], variation_episode=2)
    dataset = LeRobotDataset(f"rlbench_vec/{TASK}", root=root / TASK)
    assert dataset.num_episodes == 3
    assert len(dataset) == len(demos[0].actions) * 2 + len(demos[1].actions)
    assert not (root / STAGING_FOLDER / "lerobot" / TASK).exists()


def test_lerobot_crash_in_the_first_session_leaves_no_dataset(demos, tmp_path):
    _lerobot()
    from rlbench_vec.datasets.lerobot_format import LeRobotOptions, LeRobotWriter

    inputs = tmp_path / "inputs.pkl"
    inputs.write_bytes(pickle.dumps((CONFIG, demos)))
    script = CRASHING_LEROBOT_WRITER.replace("checkpoint_every=2", "checkpoint_every=10")
    run = subprocess.run([sys.executable, "-c", script, str(tmp_path), str(inputs)], cwd=TESTS.parent,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 9, run.stderr
    assert (tmp_path / TASK).is_dir()
    with LeRobotWriter(tmp_path, CONFIG, LeRobotOptions(cameras=("front",))) as writer:
        assert writer.completed == set()


ENCODE_ONE_VIDEO = """
import sys
import av
import numpy as np
from rlbench_vec.datasets.lerobot_format import quiet_encoder_logs
if sys.argv[1] == "quiet":
    quiet_encoder_logs()
out = av.open(sys.argv[2], "w")
stream = out.add_stream("libsvtav1", rate=10)
stream.width = stream.height = 64
stream.pix_fmt = "yuv420p"
for i in range(3):
    for packet in stream.encode(av.VideoFrame.from_ndarray(np.full((64, 64, 3), 40 * i, np.uint8), format="rgb24")):
        out.mux(packet)
for packet in stream.encode():
    out.mux(packet)
out.close()
"""


def test_lerobot_writer_keeps_the_av1_encoder_quiet(tmp_path):
    av = pytest.importorskip("av", reason=extra_reason("lerobot", ["av"]))
    if "libsvtav1" not in av.codecs_available:
        pytest.skip("this PyAV build has no SVT-AV1 encoder")
    env = {key: value for key, value in os.environ.items() if key != "SVT_LOG"}
    script = tmp_path / "encode.py"
    script.write_text(ENCODE_ONE_VIDEO)

    def stderr(mode: str) -> str:
        run = subprocess.run([sys.executable, str(script), mode, str(tmp_path / f"{mode}.mp4")], env=env,
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        return run.stderr

    assert "Svt[info]" in stderr("default")  # what LeRobot's encoding printed before
    assert "Svt[" not in stderr("quiet")


def test_stored_episodes_in_either_layout_with_their_starts_and_the_datasets_identity(written, demos, tmp_path):
    """datasets.stored_episodes: each layout in RLBench's order, the variation, descriptions and the reset seed
    stored as upstream's random_seed (a state numpy's legacy generator takes); the identity follows the files."""
    root, paths = written
    every = tmp_path / "every"
    for i, demo in enumerate(demos):
        write_episode(every, TASK, i, demo, all_variations=True)
    assert not (every / TASK / "all_variations" / "variation_descriptions.pkl").exists()
    for folder, all_variations in ((root, False), (every, True)):
        stored = stored_task_episodes(folder, TASK)
        assert [(e.variation, e.descriptions, e.reset_seed, e.all_variations) for e in stored] == [
            (d.variation_index, tuple(d.descriptions), d.reset_seed, all_variations) for d in demos]
        assert [e.reset_seed is not None for e in stored] == [True, True]
    assert [e.number for e in stored_task_episodes(every, TASK)] == [0, 1]
    with open(every / TASK / "all_variations" / "episodes" / "episode0" / "low_dim_obs.pkl", "rb") as file:
        state = upstream_pickle.load(file).random_seed
    np.random.RandomState().set_state(state)  # what RLBench's Demo.restore_state does with it
    drawn = np.random.RandomState(5)
    drawn.random()
    assert seed_of_state(state) == demos[0].reset_seed and seed_of_state(drawn.get_state()) is None
    first = dataset_identity(every, {TASK: stored_task_episodes(every, TASK)})
    assert first == dataset_identity(every, {TASK: stored_task_episodes(every, TASK)})
    assert first != dataset_identity(every, {TASK: stored_task_episodes(every, TASK, 1)})
    (every / TASK / "all_variations" / "episodes" / "episode1" / "variation_number.pkl").write_bytes(pickle.dumps(7))
    assert first != dataset_identity(every, {TASK: stored_task_episodes(every, TASK)})
    with pytest.raises(DatasetError, match="no stored episodes of reach_target"):
        stored_task_episodes(every, "reach_target")
