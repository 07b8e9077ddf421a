"""Writing episodes in RLBench's on-disk layout (rlbench_format): each into {root}/.staging/ first, renamed
into place when complete, so a crash leaves no half episode where loaders look and a rerun can tell finished
episodes by their folder alone."""

from __future__ import annotations

import contextlib
import os
import pickle
import re
import shutil
import socket
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from ..backends.base import Demo
from ..config import CAMERAS, LOW_DIM_FIELDS
from ..errors import DatasetError
from . import upstream_pickle
from .rlbench_format import (
    ACTION_MISC_KEY,
    IMAGE_FORMAT,
    IMAGE_MODALITIES,
    LOW_DIM_PICKLE,
    MISC_CAMERA_ORDER,
    MISC_FIELDS,
    STAGING_FOLDER,
    VARIATION_DESCRIPTIONS,
    VARIATION_NUMBER,
    encode_depth,
    encode_mask,
    episode_dir,
    image_folder,
    misc_key,
    png_bytes,
)
from .upstream_pickle import UpstreamDemo, UpstreamObservation

_STAGING_NAME = re.compile(r"^(?P<host>.+)-(?P<pid>\d+)-[0-9a-f]{32}$")
_VARIATION_COPY = "descriptions_for_variation.pkl"


def write_episode(root: str | os.PathLike, task: str, episode: int, demo: Demo, *,
                  depth_in_meters: bool = False, all_variations: bool = False) -> Path:
    """Write `demo` as episode `episode` of its variation (demo.variation_index) of `task`, or (all_variations)
    of the task's all_variations folder as RLBench's dataset generator with --all_variations; return its folder.

    The demo must hold rgb and depth of all five cameras and their misc keys ({camera}_camera_near, _far,
    _extrinsics, _intrinsics): RLBench's loader opens all ten image folders and rebuilds depth and point
    clouds from misc. Masks are written where the demo has them. `depth_in_meters` says how the demo's
    depth is expressed (EnvConfig.depth_in_meters); it is stored normalised either way, as upstream.
    The demo's reset_seed is stored as upstream's random_seed: the state numpy's legacy generator has when
    seeded with it (RLBench's reset_to_demo restores such a state; stored_episodes reads the seed back).
    Raises DatasetError for a demo that cannot be stored so, or an episode that already exists.
    """
    steps = _check_demo(demo)
    target = episode_dir(root, task, demo.variation_index, episode, all_variations)
    if target.exists():
        raise DatasetError(f"{target} already exists; episodes are never overwritten (remove it to write it again).")
    staging = Path(root) / STAGING_FOLDER / f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex}"
    try:
        staging.mkdir(parents=True)
        _write_images(staging, demo, steps, depth_in_meters)
        (staging / LOW_DIM_PICKLE).write_bytes(upstream_pickle.dumps(_upstream_demo(demo, steps)))
        descriptions = _plain_pickle(list(map(str, demo.descriptions)))
        (staging / VARIATION_DESCRIPTIONS).write_bytes(descriptions)
        (staging / VARIATION_NUMBER).write_bytes(_plain_pickle(int(demo.variation_index)))
        target.parent.mkdir(parents=True, exist_ok=True)
        if not all_variations:  # the variation's copy of the descriptions first (atomically): an episode implies it
            (staging / _VARIATION_COPY).write_bytes(descriptions)
            os.replace(staging / _VARIATION_COPY, target.parent.parent / VARIATION_DESCRIPTIONS)
        os.rename(staging, target)
    except OSError as error:
        raise DatasetError(f"could not write {target}: {error}") from error
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def remove_stale_staging(root: str | os.PathLike) -> int:
    """Remove partial episodes left in {root}/.staging by writers of this host that are no longer running
    (crashed or killed mid-write); return how many. Live writers' folders are kept."""
    staging = Path(root) / STAGING_FOLDER
    if not staging.is_dir():
        return 0
    host = socket.gethostname()
    removed = 0
    for entry in staging.iterdir():
        owner = _STAGING_NAME.match(entry.name)
        if owner and owner["host"] == host and not psutil.pid_exists(int(owner["pid"])):
            shutil.rmtree(entry, ignore_errors=True)
            removed += 1
    with contextlib.suppress(OSError):  # only when empty: a live writer's folder keeps it
        staging.rmdir()
    return removed


def _plain_pickle(value: object) -> bytes:
    return pickle.dumps(value, protocol=upstream_pickle.PROTOCOL)


def _check_demo(demo: Demo) -> int:
    observations = demo.observations
    missing = [key for camera in CAMERAS for key in (f"{camera}_rgb", f"{camera}_depth")
               + tuple(misc_key(camera, field) for field in MISC_FIELDS) if key not in observations]
    if missing:
        raise DatasetError(
            f"RLBench's layout needs rgb, depth and camera misc of all five cameras; the demo lacks {missing}. "
            f"Collect with cameras={CAMERAS}, modalities including 'rgb' and 'depth', and misc=True."
        )
    if not demo.success:
        raise DatasetError("RLBench's layout holds successful demos only; this demo failed (retry it).")
    steps = {len(value) for value in observations.values()}
    if len(steps) != 1 or len(demo.actions) != next(iter(steps)) - 1:
        raise DatasetError(f"demo arrays disagree on the number of steps: observations {sorted(steps)}, "
                           f"actions {len(demo.actions)} (expected one fewer than observations).")
    return steps.pop()


def _write_images(folder: Path, demo: Demo, steps: int, depth_in_meters: bool) -> None:
    observations = demo.observations
    for camera in CAMERAS:
        near = observations[misc_key(camera, "near")]
        far = observations[misc_key(camera, "far")]
        for modality in IMAGE_MODALITIES:
            images = observations.get(f"{camera}_{modality}")
            if images is None:
                continue
            directory = folder / image_folder(camera, modality)
            directory.mkdir()
            for t in range(steps):
                if modality == "rgb":
                    image = images[t]
                elif modality == "depth":
                    depth = (images[t] - near[t]) / (far[t] - near[t]) if depth_in_meters else images[t]
                    image = encode_depth(depth)
                else:
                    image = encode_mask(images[t])
                (directory / (IMAGE_FORMAT % t)).write_bytes(png_bytes(image))


def _upstream_demo(demo: Demo, steps: int) -> UpstreamDemo:
    """The demo as upstream pickles it: image fields None, low-dim fields as RLBench records them."""
    observations = demo.observations
    low_dim = [name for name in LOW_DIM_FIELDS if name in observations]
    cameras = [camera for camera in MISC_CAMERA_ORDER if misc_key(camera, "near") in observations]
    upstream = []
    for t in range(steps):
        attributes: dict[str, Any] = {name: np.array(observations[name][t], np.float64) for name in low_dim}
        if "gripper_open" in attributes:
            attributes["gripper_open"] = float(attributes["gripper_open"])
        if demo.ignore_collisions is not None:  # upstream records a (1,) array per frame
            # in the other low-dim arrays' dtype object: a pickle memoizes dtypes by identity, and a writer process
            # gets its arrays from shared memory (another float64 object than a worker's): the same bytes either way
            dtype = next((a.dtype for a in attributes.values() if isinstance(a, np.ndarray)), np.dtype(np.float64))
            attributes["ignore_collisions"] = np.array([demo.ignore_collisions[t]], dtype)
        misc: dict[str, Any] = {}
        for camera in cameras:
            misc[misc_key(camera, "extrinsics")] = np.array(observations[misc_key(camera, "extrinsics")][t], np.float64)
            misc[misc_key(camera, "intrinsics")] = np.array(observations[misc_key(camera, "intrinsics")][t], np.float64)
            misc[misc_key(camera, "near")] = float(observations[misc_key(camera, "near")][t])
            misc[misc_key(camera, "far")] = float(observations[misc_key(camera, "far")][t])
        misc["variation_index"] = int(demo.variation_index)
        if t < steps - 1:
            misc[ACTION_MISC_KEY] = np.array(demo.actions[t], np.float32)
        upstream.append(UpstreamObservation(**attributes, misc=misc))
    seed = None if demo.reset_seed is None else np.random.RandomState(demo.reset_seed).get_state()
    return UpstreamDemo(upstream, random_seed=seed)
