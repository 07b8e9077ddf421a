"""RLBench's on-disk demo layout: what `rlbench/dataset_generator.py` writes and
`rlbench.utils.get_stored_demos` reads.

    {root}/{task}/variation{v}/variation_descriptions.pkl
    {root}/{task}/variation{v}/episodes/episode{i}/
        {camera}_rgb/{t}.png     {camera}_depth/{t}.png     {camera}_mask/{t}.png
        low_dim_obs.pkl          variation_number.pkl       variation_descriptions.pkl
    {root}/{task}/all_variations/episodes/episode{i}/   (the dataset generator's --all_variations: each episode
        its own variation, named by its variation_number.pkl; PerAct's test set is laid out so)

Folder and file names are those of upstream's rlbench/backend/const.py; the per-episode
variation_number.pkl and variation_descriptions.pkl are what the PerAct fork's generator adds and its
loader reads. Depth is stored normalised between the camera's near and far planes as a 24-bit RGB
PNG (float_array_to_rgb_image with DEPTH_SCALE); masks as RGB-coded object handles; the loader
rebuilds metric depth and point clouds from each observation's misc (near, far, extrinsics,
intrinsics), so those must be in the demo (EnvConfig.misc=True).

This module holds the layout's names, paths and encodings; rlbench_writer writes episodes (into
{root}/.staging/, renamed into place when complete) and rlbench_reader reads them.
"""

from __future__ import annotations

import os
import re
import struct
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np
from isal import isal_zlib

from ..errors import DatasetError
from . import upstream_pickle

IMAGE_FORMAT = "%d.png"
EPISODES_FOLDER = "episodes"
EPISODE_FOLDER = "episode%d"
VARIATIONS_FOLDER = "variation%d"
VARIATIONS_ALL_FOLDER = "all_variations"  # upstream's const.py
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
VARIATION_NAME = re.compile(r"^variation(\d+)$")


def image_folder(camera: str, modality: str) -> str:
    return f"{camera}_{modality}"


def misc_key(camera: str, field: str) -> str:
    """The key in an observation dict and in upstream's misc, e.g. 'front_camera_near'."""
    return f"{camera}_camera_{field}"


def variation_dir(root: str | os.PathLike, task: str, variation: int) -> Path:
    return Path(root) / task / (VARIATIONS_FOLDER % variation)


def episode_dir(root: str | os.PathLike, task: str, variation: int, episode: int, all_variations: bool = False) -> Path:
    """Episode `episode` of the variation's folder, or (all_variations) of the task's all_variations folder."""
    parent = Path(root) / task / VARIATIONS_ALL_FOLDER if all_variations else variation_dir(root, task, variation)
    return parent / EPISODES_FOLDER / (EPISODE_FOLDER % episode)


def episode_numbers(episodes: Path) -> list[int]:
    """The numbers of an episodes folder's episodes, in RLBench's natural order (episode2 before episode10)."""
    if not episodes.is_dir():
        return []
    return sorted(int(m.group(1)) for m in map(_EPISODE_NAME.match, os.listdir(episodes)) if m)


def completed_episodes(root: str | os.PathLike, task: str, variation: int) -> list[int]:
    """Episode numbers already written for this task and variation (renamed into place, so complete)."""
    return episode_numbers(variation_dir(root, task, variation) / EPISODES_FOLDER)


def variation_folders(root: str | os.PathLike, task: str) -> list[int]:
    """The variations that have a folder of their own, ascending."""
    task_dir = Path(root) / task
    if not task_dir.is_dir():
        return []
    return sorted(int(m.group(1)) for m in map(VARIATION_NAME.match, os.listdir(task_dir)) if m)


def stored_episodes(root: str | os.PathLike, task: str) -> set[tuple[int, int]]:
    """(variation, episode) of every episode already written for this task, in either layout (all_variations:
    each episode's variation_number.pkl)."""
    found = {(v, e) for v in variation_folders(root, task) for e in completed_episodes(root, task, v)}
    episodes = Path(root) / task / VARIATIONS_ALL_FOLDER / EPISODES_FOLDER
    for e in episode_numbers(episodes):
        with open(episodes / (EPISODE_FOLDER % e) / VARIATION_NUMBER, "rb") as file:
            found.add((int(upstream_pickle.load(file)), e))
    return found


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
    value = np.rint(handles)
    if value.min(initial=0) < 0 or value.max(initial=0) > DEPTH_SCALE:
        raise DatasetError(f"mask values must be object handles in [0, {DEPTH_SCALE}] to be stored as RGB.")
    handle = value.astype(np.uint32)  # checked to fit: 32-bit arithmetic is much cheaper than int64
    return np.stack([handle & 0xFF, (handle >> 8) & 0xFF, handle >> 16], axis=-1).astype(np.uint8)


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
