"""Reading episodes of RLBench's on-disk layout (rlbench_format), ours or upstream's, into Demos."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from PIL import Image

from ..backends.base import Demo
from ..config import CAMERAS, LOW_DIM_FIELDS
from ..errors import DatasetError
from . import upstream_pickle
from .rlbench_format import (
    ACTION_MISC_KEY,
    IMAGE_FORMAT,
    IMAGE_MODALITIES,
    LOW_DIM_PICKLE,
    MISC_FIELDS,
    VARIATION_DESCRIPTIONS,
    VARIATION_NAME,
    VARIATION_NUMBER,
    decode_depth,
    decode_mask,
    image_folder,
    misc_key,
    point_cloud,
)


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
    marks = [getattr(record, "ignore_collisions", None) for record in records]
    ignore_collisions = None if any(mark is None for mark in marks) else np.array(marks, np.float64).reshape(steps)
    return Demo(observations, action_array, True, _variation(path, miscs), _descriptions(path),
                ignore_collisions=ignore_collisions)


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
    match = VARIATION_NAME.match(path.parent.parent.name)
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
