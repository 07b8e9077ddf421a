"""Demos as LeRobot datasets, written through the `lerobot` library (an optional dependency).

One dataset per task, at {root}/{task} (LeRobot v3.0 layout: parquet frames, mp4 videos, meta/). One
frame per action: frame t holds observation t and the action taken from it, so a demo of T
observations gives T - 1 frames (the final observation, which has no action, is not a frame). Features,
named as LeRobot's policies expect:

    observation.images.{camera}   video (H, W, 3): the rgb of each chosen camera
    observation.state             float32: proprioception, RLBench's low-dim order (STATE_FIELDS present)
    observation.environment_state float32: task_low_dim_state, where the env observes it
    action                        float32: the env's action (arm then gripper)
    rlbench_episode               int64 (2,): the RLBench variation, and the episode's number within it
                                  (as RLBench counts: the N of variation{v}/episodes/episodeN)
and the frame's task is the demo's first description. Depth and masks are not written (LeRobot videos
are 8-bit colour).

Crash safety. Until it is finalised, LeRobot keeps its parquet files open, and a writer that dies then
leaves a dataset LeRobot cannot load. So the writer works in sessions: before LeRobot touches the dataset,
a journal at {root}/.staging/lerobot/{task}/ records the dataset's files and copies meta/'s top-level files
(info.json, stats.json, tasks.parquet: the only files a resumed LeRobot dataset rewrites; data, videos and
episode metadata go to new files). Every `checkpoint_every` episodes the session is finalised and a new one
begins. The next writer on a dataset whose journal's owner is dead rolls it back: it deletes the files the
session added and restores meta/, which loses at most the episodes since the last checkpoint.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from ..backends.base import Demo
from ..config import EnvConfig
from ..errors import ConfigError, DatasetError
from ..spec import observation_spec
from .rlbench_format import STAGING_FOLDER

STATE_FIELDS = ("gripper_open", "joint_velocities", "joint_positions", "joint_forces", "gripper_pose",
                "gripper_joint_positions")  # RLBench's Observation.get_low_dim_data order, proprioception only
POSE_ACTION_NAMES = ("x", "y", "z", "qx", "qy", "qz", "qw", "gripper")
JOINT_ACTION_NAMES = tuple(f"joint_{i}" for i in range(7)) + ("gripper",)
EPISODE_KEY = "rlbench_episode"
EPISODE_NAMES = ["variation_index", "variation_episode"]  # one (2,) feature: LeRobot 0.4's (1,) int features
# break on numpy >= 2.4 (datasets calls int() on a 1-element array)
RLBENCH_FPS = 20  # one RLBench control step is 0.05 s
JOURNAL = "journal.json"


@dataclass(frozen=True)
class LeRobotOptions:
    """fps: frames per second recorded in the dataset. cameras: rgb cameras written as videos (None: every
    camera with rgb). vcodec: LeRobot's video codec ('libsvtav1', 'h264', ...). checkpoint_every: episodes
    per session (see the module's docstring): a crash loses at most these."""

    fps: int = RLBENCH_FPS
    cameras: tuple[str, ...] | None = None
    vcodec: str = "libsvtav1"
    checkpoint_every: int = 50


def dataset_features(config: EnvConfig, options: LeRobotOptions) -> dict[str, dict]:
    """LeRobot's feature dict for demos of `config` (a validated EnvConfig)."""
    spec = observation_spec(config)
    cameras = _cameras(config, options)
    features = {
        f"observation.images.{camera}": {"dtype": "video", "shape": spec[f"{camera}_rgb"].shape,
                                         "names": ["height", "width", "channels"]}
        for camera in cameras
    }
    state = [name for name in STATE_FIELDS if name in spec]
    if state:
        names = [element for name in state for element in _element_names(name, spec[name].shape)]
        features["observation.state"] = {"dtype": "float32", "shape": (len(names),), "names": names}
    if "task_low_dim_state" in spec and spec["task_low_dim_state"].shape[0] > 0:
        features["observation.environment_state"] = {
            "dtype": "float32", "shape": spec["task_low_dim_state"].shape,
            "names": _element_names("task_low_dim_state", spec["task_low_dim_state"].shape)}
    actions = POSE_ACTION_NAMES if config.arm_mode in ("ik", "planning") else JOINT_ACTION_NAMES
    features["action"] = {"dtype": "float32", "shape": (len(actions),), "names": list(actions)}
    features[EPISODE_KEY] = {"dtype": "int64", "shape": (2,), "names": EPISODE_NAMES}
    return features


def quiet_encoder_logs() -> None:
    """SVT-AV1, LeRobot's default codec, prints a dozen `Svt[info]` lines per video on stderr; its level 1
    keeps errors. Read when an encoder opens, so this holds for the writer process from here on; a
    user's own SVT_LOG wins."""
    os.environ.setdefault("SVT_LOG", "1")


class LeRobotWriter:
    """Appends demos of one task to the LeRobot dataset at {root}/{task}, creating it or resuming it (after
    rolling back what a crashed writer left, see the module's docstring).

    `completed` lists the (variation_index, variation_episode) pairs already in the dataset, so a rerun
    can skip them. Use as a context manager, or call close(): LeRobot writes its files' footers then.
    """

    def __init__(self, root: str | os.PathLike, config: EnvConfig, options: LeRobotOptions = LeRobotOptions()):
        quiet_encoder_logs()
        try:
            from lerobot.datasets.lerobot_dataset import LeRobotDataset
        except ImportError as error:  # the optional extra is missing
            raise ImportError("LeRobotWriter needs the `lerobot` package (docs/collect.md says how to install it).") \
                from error
        self._dataset_class = LeRobotDataset
        self.config = config.validated()
        self.options = options
        self.path = Path(root) / self.config.one_task
        self.features = dataset_features(self.config, options)
        self.session = Path(root) / STAGING_FOLDER / "lerobot" / self.config.one_task
        roll_back(self.session, self.path)
        self.dataset: Any = self._open()
        pairs = np.asarray(self.dataset.hf_dataset.with_format("numpy")[EPISODE_KEY]).reshape(-1, 2) \
            if self.dataset.meta.total_episodes else np.zeros((0, 2), np.int64)
        self.completed = {(int(v), int(e)) for v, e in np.unique(pairs, axis=0)}

    def _open(self) -> Any:
        """Begin a session: journal first, then let LeRobot open (or create) the dataset."""
        exists = (self.path / "meta" / "info.json").is_file()
        if not exists and self.path.exists():
            raise DatasetError(f"{self.path} exists but holds no LeRobot dataset (no meta/info.json); move it away "
                               "or write to another folder.")
        begin_session(self.session, self.path, created=not exists)
        repo_id = f"rlbench_vec/{self.config.task}"
        self._session_episodes = 0
        if not exists:
            return self._dataset_class.create(repo_id, self.options.fps, self.features, root=self.path,
                                              robot_type="panda", use_videos=True, vcodec=self.options.vcodec)
        dataset = self._dataset_class(repo_id, root=self.path, vcodec=self.options.vcodec)
        self._check_resumed_features(dataset)
        return dataset

    def add_episode(self, demo: Demo, variation_episode: int) -> int:
        """Append `demo` as one episode; return its LeRobot episode index."""
        if not demo.success:
            raise DatasetError("only successful demos are written; this demo failed (retry it).")
        steps = len(demo.actions)
        if steps < 1:
            raise DatasetError("a demo needs at least one action to make a LeRobot frame.")
        if not demo.descriptions:
            raise DatasetError("the demo has no description for LeRobot's task field.")
        frames = self._frames(demo, variation_episode)
        for t in range(steps):
            frame = {key: value[t] for key, value in frames.items()}
            frame["task"] = str(demo.descriptions[0])
            self.dataset.add_frame(frame)
        index = self.dataset.meta.total_episodes
        self.dataset.save_episode(parallel_encoding=False)  # writers already run in parallel; no pool per episode
        self.completed.add((int(demo.variation_index), int(variation_episode)))
        self._session_episodes += 1
        if self._session_episodes >= self.options.checkpoint_every:
            self._end_session()
            self.dataset = self._open()
        return index

    def close(self) -> None:
        if self.dataset is not None:
            self._end_session()
            self.dataset = None

    def _end_session(self) -> None:
        self.dataset.finalize()
        shutil.rmtree(self.session)

    def __enter__(self) -> LeRobotWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _frames(self, demo: Demo, variation_episode: int) -> dict[str, np.ndarray]:
        observations, steps = demo.observations, len(demo.actions)
        frames = {f"observation.images.{camera}": observations[f"{camera}_rgb"][:steps]
                  for camera in _cameras(self.config, self.options)}
        state = [name for name in STATE_FIELDS if name in observations]
        if "observation.state" in self.features:
            frames["observation.state"] = np.concatenate(
                [np.asarray(observations[name][:steps], np.float32).reshape(steps, -1) for name in state], axis=1)
        if "observation.environment_state" in self.features:
            frames["observation.environment_state"] = observations["task_low_dim_state"][:steps].astype(np.float32)
        frames["action"] = np.asarray(demo.actions, np.float32)
        frames[EPISODE_KEY] = np.tile(np.array([demo.variation_index, variation_episode], np.int64), (steps, 1))
        return frames

    def _check_resumed_features(self, dataset: Any) -> None:
        stored = dataset.meta.features
        different = [key for key, feature in self.features.items()
                     if key not in stored or tuple(stored[key]["shape"]) != tuple(feature["shape"])]
        if different:
            raise DatasetError(f"{self.path} holds a LeRobot dataset with other features ({different}); resume it "
                               "with the arguments that created it, or write to a new folder.")


def _cameras(config: EnvConfig, options: LeRobotOptions) -> tuple[str, ...]:
    with_rgb = config.cameras if "rgb" in config.modalities else ()
    if options.cameras is None:
        return with_rgb
    missing = [camera for camera in options.cameras if camera not in with_rgb]
    if missing:
        raise ConfigError(f"LeRobot cameras {missing} have no rgb in this config; choose among {list(with_rgb)} "
                          "or add them (with 'rgb') to the env's cameras and modalities.")
    return tuple(options.cameras)


def _element_names(field: str, shape: tuple[int, ...]) -> list[str]:
    if field == "gripper_pose":
        return [f"gripper_pose.{axis}" for axis in POSE_ACTION_NAMES[:7]]
    size = int(np.prod(shape))
    return [field] if size == 1 and not shape else [f"{field}.{i}" for i in range(size)]



# ---- sessions ----

def begin_session(session: Path, dataset: Path, created: bool) -> None:
    """Record the dataset's files and back up meta/'s top-level files; the journal is written last (atomically),
    so a journal always describes a complete backup."""
    shutil.rmtree(session, ignore_errors=True)
    backup = session / "meta"
    backup.mkdir(parents=True)
    files: list[str] = []
    if not created:
        files = sorted(str(path.relative_to(dataset)) for path in dataset.rglob("*") if path.is_file())
        for path in (dataset / "meta").iterdir():
            if path.is_file():
                shutil.copy2(path, backup / path.name)
    journal = {"host": socket.gethostname(), "pid": os.getpid(), "created": created, "files": files}
    (session / (JOURNAL + ".tmp")).write_text(json.dumps(journal))
    os.replace(session / (JOURNAL + ".tmp"), session / JOURNAL)


def roll_back(session: Path, dataset: Path) -> bool:
    """Undo the session a dead writer left at `session`: delete what it added to `dataset`, restore meta/.
    Returns whether there was one. Raises DatasetError if the session's writer is still running."""
    if not session.exists():
        return False
    journal_path = session / JOURNAL
    if journal_path.is_file():  # without it the session died before LeRobot touched the dataset
        journal = json.loads(journal_path.read_text())
        if journal["host"] == socket.gethostname() and psutil.pid_exists(journal["pid"]) \
                and journal["pid"] != os.getpid():
            raise DatasetError(f"{dataset} is being written by process {journal['pid']}; one writer per dataset.")
        if journal["created"]:
            shutil.rmtree(dataset, ignore_errors=True)
        else:
            kept = set(journal["files"])
            for path in sorted(dataset.rglob("*"), reverse=True):  # files before their folders
                if path.is_file() and str(path.relative_to(dataset)) not in kept:
                    path.unlink()
                elif path.is_dir() and not any(path.iterdir()):
                    path.rmdir()
            for backup in (session / "meta").iterdir():
                shutil.copy2(backup, dataset / "meta" / backup.name)
    shutil.rmtree(session)
    return True
