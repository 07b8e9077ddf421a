"""An independent reader of RLBench's dataset layout, written from upstream's
`rlbench.utils.get_stored_demos` (RLBench 1.2.0) and PyRep's
`VisionSensor.pointcloud_from_depth_and_camera_params`, for one episode folder.

It runs in a Python where `rlbench` is importable (the tests put tests/rlbench_double first on the
path, standing in for an RLBench install) and never imports rlbench_vec, so `low_dim_obs.pkl` is
unpickled exactly as a user's RLBench would: into `rlbench.demo.Demo` and
`rlbench.backend.observation.Observation`. It checks those classes and the attribute dict, then saves
what upstream's loader would hand a user, with every camera's rgb, depth, mask and point cloud on:

    python tests/upstream_loader.py EPISODE_DIR OUT.npz
"""

from __future__ import annotations

import os
import pickle
import sys

import numpy as np
from PIL import Image
from rlbench.backend.observation import Observation
from rlbench.demo import Demo

CAMERAS = ("left_shoulder", "right_shoulder", "overhead", "wrist", "front")
LOW_DIM = ("joint_velocities", "joint_positions", "joint_forces", "gripper_open", "gripper_pose", "gripper_matrix",
           "gripper_joint_positions", "gripper_touch_forces", "task_low_dim_state")
DEPTH_SCALE = 2**24 - 1  # rlbench/backend/const.py


def depth_from_png(path: str) -> np.ndarray:
    """image_to_float_array(Image.open(path), DEPTH_SCALE): the RGB bytes as one 24-bit integer, scaled."""
    rgb = np.array(Image.open(path))
    return np.sum(rgb * [65536, 256, 1], axis=2) / DEPTH_SCALE


def handles_from_png(path: str) -> np.ndarray:
    """rgb_handles_to_mask(np.array(Image.open(path))): handle = R + 256 G + 65536 B. Upstream computes it
    in uint8 arithmetic, which numpy 2 rejects; the astype(int) it meant to apply is applied here."""
    rgb = np.array(Image.open(path)).astype(int)
    return rgb[:, :, 0] + rgb[:, :, 1] * 256 + rgb[:, :, 2] * 256 * 256


def pyrep_point_cloud(depth_m: np.ndarray, extrinsics: np.ndarray, intrinsics: np.ndarray) -> np.ndarray:
    """PyRep's construction: scale homogeneous pixel coordinates (column, row, 1) by depth, then apply the
    inverse of the 4x4 camera projection K [R^T | -R^T C] (extrinsics = [R C], the camera pose in the world)."""
    height, width = depth_m.shape
    columns = np.tile(np.arange(width, dtype=np.float32), (height, 1))
    rows = np.tile(np.arange(height, dtype=np.float32)[:, None], (1, width))
    scaled = np.stack([columns, rows, np.ones_like(columns)], axis=-1) * depth_m[..., None]
    rotation, centre = extrinsics[:3, :3], extrinsics[:3, 3:]
    world_to_camera = np.concatenate([rotation.T, -rotation.T @ centre], axis=1)
    projection = np.concatenate([intrinsics @ world_to_camera, [[0, 0, 0, 1]]])
    inverse = np.linalg.inv(projection)[:3]
    homogeneous = np.concatenate([scaled, np.ones((height, width, 1))], axis=-1).reshape(-1, 4)
    return (homogeneous @ inverse.T).reshape(height, width, 3)


def load_episode(example_path: str) -> dict[str, np.ndarray]:
    with open(os.path.join(example_path, "low_dim_obs.pkl"), "rb") as f:
        demo = pickle.load(f)
    assert type(demo) is Demo, type(demo)
    assert list(vars(demo)) == ["_observations", "random_seed", "num_reset_attempts"], list(vars(demo))
    reference = list(vars(Observation(None, None, None, None, None, None, None, None, None, None, None, **{
        f"{camera}_{kind}": None for camera in CAMERAS for kind in ("rgb", "depth", "mask", "point_cloud")})))
    for obs in demo._observations:
        assert type(obs) is Observation, type(obs)
        assert list(vars(obs)) == reference, list(vars(obs))
        assert all(getattr(obs, f"{camera}_{kind}") is None
                   for camera in CAMERAS for kind in ("rgb", "depth", "mask", "point_cloud"))

    num_steps = len(demo)
    # get_stored_demos refuses an episode whose ten rgb/depth folders do not each hold one image per step.
    for camera in CAMERAS:
        for kind in ("rgb", "depth"):
            if len(os.listdir(os.path.join(example_path, f"{camera}_{kind}"))) != num_steps:
                raise RuntimeError("Broken dataset assumption")

    out: dict[str, list] = {}
    for i in range(num_steps):
        obs = demo[i]
        name = f"{i}.png"  # IMAGE_FORMAT
        for camera in CAMERAS:
            rgb = np.array(Image.open(os.path.join(example_path, f"{camera}_rgb", name)))
            out.setdefault(f"{camera}_rgb", []).append(rgb)
            depth = depth_from_png(os.path.join(example_path, f"{camera}_depth", name))
            near, far = obs.misc[f"{camera}_camera_near"], obs.misc[f"{camera}_camera_far"]
            depth_m = near + depth * (far - near)
            out.setdefault(f"{camera}_depth", []).append(depth)
            out.setdefault(f"{camera}_depth_m", []).append(depth_m)
            out.setdefault(f"{camera}_point_cloud", []).append(pyrep_point_cloud(
                depth_m, obs.misc[f"{camera}_camera_extrinsics"], obs.misc[f"{camera}_camera_intrinsics"]))
            mask_dir = os.path.join(example_path, f"{camera}_mask")
            if os.path.isdir(mask_dir):
                out.setdefault(f"{camera}_mask", []).append(handles_from_png(os.path.join(mask_dir, name)))
        for field in LOW_DIM:
            if getattr(obs, field) is not None:
                out.setdefault(field, []).append(getattr(obs, field))
    arrays = {key: np.array(values) for key, values in out.items()}
    with open(os.path.join(example_path, "variation_number.pkl"), "rb") as f:
        arrays["variation_number"] = np.array(pickle.load(f))
    with open(os.path.join(example_path, "variation_descriptions.pkl"), "rb") as f:
        arrays["descriptions"] = np.array(pickle.load(f))
    with open(os.path.join(example_path, os.pardir, os.pardir, "variation_descriptions.pkl"), "rb") as f:
        arrays["variation_descriptions"] = np.array(pickle.load(f))
    arrays["variation_index_in_misc"] = np.array([obs.misc["variation_index"] for obs in demo._observations])
    return arrays


if __name__ == "__main__":
    episode, destination = sys.argv[1:3]
    arrays = load_episode(episode)
    assert not any(name.startswith("rlbench_vec") for name in sys.modules), "the reader must not use rlbench_vec"
    np.savez(destination, **arrays)
