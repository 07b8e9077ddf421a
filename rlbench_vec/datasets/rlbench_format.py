"""RLBench's on-disk demo layout: what `rlbench/dataset_generator.py` writes and
`rlbench.utils.get_stored_demos` reads.

    {root}/{task}/variation{v}/variation_descriptions.pkl
    {root}/{task}/variation{v}/episodes/episode{i}/
        {camera}_rgb/{t}.png     {camera}_depth/{t}.png     {camera}_mask/{t}.png
        low_dim_obs.pkl          variation_number.pkl       variation_descriptions.pkl

Folder and file names are those of upstream's rlbench/backend/const.py; the per-episode
variation_number.pkl and variation_descriptions.pkl are what the PerAct fork's generator adds and its
loader reads. Depth is stored normalised between the camera's near and far planes as a 24-bit RGB
PNG (float_array_to_rgb_image with DEPTH_SCALE); masks as RGB-coded object handles; the loader
rebuilds metric depth and point clouds from each observation's misc (near, far, extrinsics,
intrinsics), so those must be in the demo (EnvConfig.misc=True).

An episode is written into {root}/.staging/ and renamed into place when complete: a crash leaves no
half episode where loaders look, and a rerun can tell finished episodes by their folder alone.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import re
import shutil
import socket
import struct
import uuid
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import psutil
from isal import isal_zlib
from PIL import Image

from ..backends.base import Demo
from ..config import CAMERAS, LOW_DIM_FIELDS
from ..errors import DatasetError
from . import upstream_pickle
from .upstream_pickle import UpstreamDemo, UpstreamObservation

# rlbench/backend/const.py ({CAMERA}_{RGB,DEPTH,MASK}_FOLDER are "{camera}_{modality}").
IMAGE_FORMAT = "%d.png"
EPISODES_FOLDER = "episodes"
EPISODE_FOLDER = "episode%d"
VARIATIONS_FOLDER = "variation%d"
LOW_DIM_PICKLE = "low_dim_obs.pkl"
VARIATION_DESCRIPTIONS = "variation_descriptions.pkl"
VARIATION_NUMBER = "variation_number.pkl"  # the PerAct fork's const.py
DEPTH_SCALE = 2**24 - 1
IMAGE_MODALITIES = ("rgb", "depth", "mask")
MISC_FIELDS = ("extrinsics", "intrinsics", "near", "far")  # misc["{camera}_camera_{field}"], as upstream
MISC_CAMERA_ORDER = ("left_shoulder", "right_shoulder", "overhead", "front", "wrist")  # Scene._get_misc
ACTION_MISC_KEY = "action"  # ours: the action taken from this observation (absent on the last)
STAGING_FOLDER = ".staging"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PNG_RGB8 = struct.pack(">BBBBB", 8, 2, 0, 0, 0)  # bit depth, colour type RGB, deflate, filter method, no interlace
PNG_FILTER_SUB = 1

_EPISODE_NAME = re.compile(r"^episode(\d+)$")
_STAGING_NAME = re.compile(r"^(?P<host>.+)-(?P<pid>\d+)-[0-9a-f]{32}$")
_VARIATION_COPY = "descriptions_for_variation.pkl"
_VARIATION_NAME = re.compile(r"^variation(\d+)$")


def image_folder(camera: str, modality: str) -> str:
    return f"{camera}_{modality}"


def misc_key(camera: str, field: str) -> str:
    """The key in an observation dict and in upstream's misc, e.g. 'front_camera_near'."""
    return f"{camera}_camera_{field}"


def variation_dir(root: str | os.PathLike, task: str, variation: int) -> Path:
    return Path(root) / task / (VARIATIONS_FOLDER % variation)


def episode_dir(root: str | os.PathLike, task: str, variation: int, episode: int) -> Path:
    return variation_dir(root, task, variation) / EPISODES_FOLDER / (EPISODE_FOLDER % episode)


def completed_episodes(root: str | os.PathLike, task: str, variation: int) -> list[int]:
    """Episode numbers already written for this task and variation (renamed into place, so complete)."""
    episodes = variation_dir(root, task, variation) / EPISODES_FOLDER
    if not episodes.is_dir():
        return []
    return sorted(int(m.group(1)) for m in map(_EPISODE_NAME.match, os.listdir(episodes)) if m)


def stored_episodes(root: str | os.PathLike, task: str) -> set[tuple[int, int]]:
    """(variation, episode) of every episode already written for this task."""
    task_dir = Path(root) / task
    if not task_dir.is_dir():
        return set()
    variations = [int(m.group(1)) for m in map(_VARIATION_NAME.match, os.listdir(task_dir)) if m]
    return {(v, e) for v in variations for e in completed_episodes(root, task, v)}


# ---- encodings (rlbench/backend/utils.py) ----

def encode_depth(depth: np.ndarray) -> np.ndarray:
    """Normalised depth (H, W) -> (H, W, 3) uint8, the 24-bit integer round(depth * DEPTH_SCALE) with
    R the high byte, as upstream's float_array_to_rgb_image(depth, scale_factor=DEPTH_SCALE)."""
    scaled = np.clip(np.floor(np.asarray(depth, np.float64) * DEPTH_SCALE + 0.5), 0, DEPTH_SCALE).astype(np.uint32)
    return np.stack([scaled >> 16, (scaled >> 8) & 0xFF, scaled & 0xFF], axis=-1).astype(np.uint8)


def decode_depth(image: np.ndarray) -> np.ndarray:
    """(H, W, 3) uint8 -> normalised depth (H, W) float64, as upstream's image_to_float_array(image, DEPTH_SCALE)."""
    value = image.astype(np.int64)
    return (value[..., 0] * 65536 + value[..., 1] * 256 + value[..., 2]) / DEPTH_SCALE


def encode_mask(handles: np.ndarray) -> np.ndarray:
    """Object handles (H, W) -> (H, W, 3) uint8 with handle = R + 256 G + 65536 B: the image upstream saves
    from an RGB-coded mask ((mask * 255).astype(uint8) of masks_as_one_channel=False)."""
    value = np.rint(handles).astype(np.int64)
    if value.min(initial=0) < 0 or value.max(initial=0) > DEPTH_SCALE:
        raise DatasetError(f"mask values must be object handles in [0, {DEPTH_SCALE}] to be stored as RGB.")
    return np.stack([value & 0xFF, (value >> 8) & 0xFF, value >> 16], axis=-1).astype(np.uint8)


def decode_mask(image: np.ndarray) -> np.ndarray:
    """(H, W, 3) uint8 -> handles (H, W) int64, as upstream's rgb_handles_to_mask (computed in int64:
    upstream's uint8 arithmetic overflows on numpy 2)."""
    value = image.astype(np.int64)
    return value[..., 0] + value[..., 1] * 256 + value[..., 2] * 65536


def point_cloud(depth_m: np.ndarray, extrinsics: np.ndarray, intrinsics: np.ndarray) -> np.ndarray:
    """World-frame points (H, W, 3) from metric depth along the optical axis and RLBench's misc camera
    parameters: what PyRep's VisionSensor.pointcloud_from_depth_and_camera_params computes, with pixel
    (column u, row v) at integer coordinates: world = R K^-1 (z u, z v, z) + C for extrinsics [R C]."""
    height, width = depth_m.shape
    v, u = np.mgrid[0:height, 0:width].astype(np.float64)
    pixels = np.stack([u, v, np.ones_like(u)], axis=-1)
    camera = (pixels @ np.linalg.inv(intrinsics).T) * depth_m[..., None]
    return camera @ extrinsics[:3, :3].T + extrinsics[:3, 3]


# ---- writing ----

def deflate_fast(data: memoryview) -> bytes:
    return isal_zlib.compress(data, 1)


def png_bytes(image: np.ndarray, deflate: Callable[[memoryview], bytes] = deflate_fast) -> bytes:
    """An (H, W, 3) uint8 image as an 8-bit RGB PNG, encoded for speed: every row with PNG's Sub filter
    (each byte minus the one a pixel to its left, so flat regions become zeros), then deflated by ISA-L
    (python-isal, level 1): on rendered 128x128 frames ~3x faster than zlib's fastest run-length setting
    and ~10x faster than Pillow's encoder, in files of about the same size (benchmarks/collect_bench.py
    prints all three). The writers spend most of their time here."""
    height, width, _ = image.shape
    flat = image.reshape(height, 3 * width)
    rows = np.empty((height, 1 + 3 * width), np.uint8)  # each row: its filter type, then the filtered bytes
    rows[:, 0] = PNG_FILTER_SUB
    rows[:, 1:4] = flat[:, :3]
    np.subtract(flat[:, 3:], flat[:, :-3], out=rows[:, 4:])  # uint8 arithmetic wraps, as PNG's filter does
    data = deflate(rows.data)
    header = struct.pack(">II", width, height) + PNG_RGB8
    return b"".join((PNG_SIGNATURE, _png_chunk(b"IHDR", header), _png_chunk(b"IDAT", data), _png_chunk(b"IEND", b"")))


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(data, zlib.crc32(kind)))


def write_episode(root: str | os.PathLike, task: str, episode: int, demo: Demo, *,
                  depth_in_meters: bool = False) -> Path:
    """Write `demo` as episode `episode` of its variation (demo.variation_index) of `task`; return its folder.

    The demo must hold rgb and depth of all five cameras and their misc keys ({camera}_camera_near, _far,
    _extrinsics, _intrinsics): RLBench's loader opens all ten image folders and rebuilds depth and point
    clouds from misc. Masks are written where the demo has them. `depth_in_meters` says how the demo's
    depth is expressed (EnvConfig.depth_in_meters); it is stored normalised either way, as upstream.
    Raises DatasetError for a demo that cannot be stored so, or an episode that already exists.
    """
    steps = _check_demo(demo)
    target = episode_dir(root, task, demo.variation_index, episode)
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
        # The variation's copy of the descriptions goes in first (atomically), so a finished episode implies it.
        (staging / _VARIATION_COPY).write_bytes(descriptions)
        target.parent.mkdir(parents=True, exist_ok=True)
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
    return UpstreamDemo(upstream)


# ---- reading ----

def read_episode(path: str | os.PathLike, *, depth_in_meters: bool = False, point_clouds: bool = False) -> Demo:
    """Read one episode folder (ours or upstream's) into a Demo with our observation layout.

    observations: {camera}_rgb uint8 (T, H, W, 3), {camera}_depth float32 (T, H, W) normalised (metres with
    depth_in_meters), {camera}_mask float32 (T, H, W) handles, {camera}_point_cloud float64 (T, H, W, 3)
    when point_clouds (rebuilt from depth and misc, as RLBench's loader), every low-dim field the pickle
    holds (float64), and {camera}_camera_{extrinsics,intrinsics,near,far} float64 from misc.
    actions: (T - 1, A) float32 from misc["action"]; (T - 1, 0) for upstream's demos, which store none.
    Raises DatasetError for a missing or broken episode.
    """
    path = Path(path)
    try:
        with open(path / LOW_DIM_PICKLE, "rb") as file:
            stored = upstream_pickle.load(file)
    except FileNotFoundError as error:
        raise DatasetError(f"{path} is not an RLBench episode: {error}") from error
    steps = len(stored)
    records = [stored[t] for t in range(steps)]
    miscs = [getattr(record, "misc", None) or {} for record in records]
    observations = _read_low_dim(records)
    observations.update(_read_misc(miscs))
    for camera in CAMERAS:
        observations.update(_read_camera(path, camera, steps, observations, depth_in_meters, point_clouds))
    actions = [misc[ACTION_MISC_KEY] for misc in miscs[:-1] if ACTION_MISC_KEY in misc]
    if steps > 1 and len(actions) == steps - 1:
        action_array = np.stack(actions).astype(np.float32)
    else:
        action_array = np.zeros((max(steps - 1, 0), 0), np.float32)
    return Demo(observations, action_array, True, _variation(path, miscs), _descriptions(path))


def _read_low_dim(records: list) -> dict[str, np.ndarray]:
    out = {}
    for name in LOW_DIM_FIELDS:
        values = [getattr(record, name, None) for record in records]
        if values and all(value is not None for value in values):
            out[name] = np.array(values, np.float64)
    return out


def _read_misc(miscs: list[dict]) -> dict[str, np.ndarray]:
    out = {}
    for camera in CAMERAS:
        for field in MISC_FIELDS:
            key = misc_key(camera, field)
            if miscs and all(key in misc for misc in miscs):
                out[key] = np.array([misc[key] for misc in miscs], np.float64)
    return out


def _read_camera(path: Path, camera: str, steps: int, observations: dict[str, np.ndarray], depth_in_meters: bool,
                 point_clouds: bool) -> dict[str, np.ndarray]:
    out = {}
    for modality in IMAGE_MODALITIES:
        directory = path / image_folder(camera, modality)
        if not directory.is_dir():
            continue
        if len(os.listdir(directory)) != steps:
            raise DatasetError(f"{directory} holds {len(os.listdir(directory))} images for {steps} observations.")
        images = np.stack([_read_png(directory / (IMAGE_FORMAT % t)) for t in range(steps)])
        if modality == "rgb":
            out[f"{camera}_rgb"] = images
        elif modality == "mask":
            out[f"{camera}_mask"] = decode_mask(images).astype(np.float32)
        else:
            depth = decode_depth(images)
            metric = _metric_depth(depth, observations, camera) if depth_in_meters or point_clouds else depth
            out[f"{camera}_depth"] = (metric if depth_in_meters else depth).astype(np.float32)
            if point_clouds:
                extrinsics = _misc(observations, camera, "extrinsics")
                intrinsics = _misc(observations, camera, "intrinsics")
                out[f"{camera}_point_cloud"] = np.stack(
                    [point_cloud(metric[t], extrinsics[t], intrinsics[t]) for t in range(steps)])
    return out


def _read_png(path: Path) -> np.ndarray:
    with Image.open(path) as image:
        return np.asarray(image)


def _metric_depth(depth: np.ndarray, observations: dict[str, np.ndarray], camera: str) -> np.ndarray:
    near, far = (_misc(observations, camera, field)[:, None, None] for field in ("near", "far"))
    return near + depth * (far - near)


def _misc(observations: dict[str, np.ndarray], camera: str, field: str) -> np.ndarray:
    key = misc_key(camera, field)
    if key not in observations:
        raise DatasetError(f"metric depth and point clouds of {camera} need {key!r} in every observation's misc.")
    return observations[key]


def _variation(path: Path, miscs: list[dict]) -> int:
    """The per-episode variation_number.pkl (PerAct fork), else misc's variation_index, else the folder name."""
    if (path / VARIATION_NUMBER).is_file():
        with open(path / VARIATION_NUMBER, "rb") as file:
            return int(upstream_pickle.load(file))
    if miscs and "variation_index" in miscs[0]:
        return int(miscs[0]["variation_index"])
    match = _VARIATION_NAME.match(path.parent.parent.name)
    if match is None:
        raise DatasetError(f"cannot tell the variation of {path}: no {VARIATION_NUMBER}, misc or variation folder.")
    return int(match.group(1))


def _descriptions(path: Path) -> list[str]:
    """The episode's variation_descriptions.pkl (PerAct fork), else its variation's; [] where neither exists."""
    for candidate in (path / VARIATION_DESCRIPTIONS, path.parent.parent / VARIATION_DESCRIPTIONS):
        if candidate.is_file():
            with open(candidate, "rb") as file:
                return list(upstream_pickle.load(file))
    return []
