"""Observation and action layout, computed from the config alone (no simulator is imported).

Shapes and dtypes follow RLBench's `Observation`: see ../shared/RLBENCH_API.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .backends import backend_class
from .config import POSE_ARM_MODES, EnvConfig

PANDA_JOINTS = 7
GRIPPER_BOUNDS = {"discrete": (0.0, 1.0), "joint_position": (0.0, 0.04)}


@dataclass(frozen=True)
class ArraySpec:
    shape: tuple[int, ...]
    dtype: np.dtype


def camera_spec(modality: str, height: int, width: int) -> ArraySpec:
    return {
        "rgb": ArraySpec((height, width, 3), np.dtype(np.uint8)),
        "depth": ArraySpec((height, width), np.dtype(np.float32)),
        "mask": ArraySpec((height, width), np.dtype(np.float32)),
        "point_cloud": ArraySpec((height, width, 3), np.dtype(np.float64)),
    }[modality]


def low_dim_spec(name: str, task_state_size: int) -> ArraySpec:
    shape = {
        "joint_velocities": (PANDA_JOINTS,),
        "joint_positions": (PANDA_JOINTS,),
        "joint_forces": (PANDA_JOINTS,),
        "gripper_open": (),
        "gripper_pose": (7,),
        "gripper_matrix": (4, 4),
        "gripper_joint_positions": (2,),
        "task_low_dim_state": (task_state_size,),
    }[name]
    return ArraySpec(shape, np.dtype(np.float64))


CAMERA_MISC = {  # RLBench's Observation.misc entries per camera
    "extrinsics": ArraySpec((4, 4), np.dtype(np.float64)),  # camera-to-world pose
    "intrinsics": ArraySpec((3, 3), np.dtype(np.float64)),  # pixels from camera-frame points
    "near": ArraySpec((), np.dtype(np.float64)),  # clipping planes, metres
    "far": ArraySpec((), np.dtype(np.float64)),
}


def low_dim_fields(config: EnvConfig) -> tuple[str, ...]:
    """The low-dim fields observed: the config's, or its backend's default when it names none."""
    return backend_class(config.backend).default_low_dim(config) if config.low_dim is None else config.low_dim


def observation_spec(config: EnvConfig) -> dict[str, ArraySpec]:
    """Every observation key with its per-env shape and dtype, in a stable order."""
    spec = {
        f"{camera}_{modality}": camera_spec(modality, config.height, config.width)
        for camera in config.cameras
        for modality in config.modalities
    }
    if config.misc:
        spec.update({f"{camera}_camera_{name}": s for camera in config.cameras for name, s in CAMERA_MISC.items()})
    low_dim = low_dim_fields(config)
    task_state_size = backend_class(config.backend).task_state_size(config) if "task_low_dim_state" in low_dim else 0
    spec.update({name: low_dim_spec(name, task_state_size) for name in low_dim})
    return spec


def observation_bytes(config: EnvConfig) -> int:
    """One env's observation in bytes: what a step writes into shared memory."""
    return sum(int(np.prod(s.shape, dtype=np.int64)) * s.dtype.itemsize for s in observation_spec(config).values())


def action_size(config: EnvConfig) -> int:
    """Arm part then gripper part, as RLBench's MoveArmThenGripper: pose is xyz + quaternion xyzw."""
    arm = 7 if config.arm_mode in POSE_ARM_MODES else PANDA_JOINTS
    return arm + 1


def action_bounds(config: EnvConfig) -> tuple[np.ndarray, np.ndarray]:
    """Bounds of one action. The arm is unbounded (RLBench defines none); the gripper is bounded."""
    size = action_size(config)
    low = np.full(size, -np.inf, dtype=np.float32)
    high = np.full(size, np.inf, dtype=np.float32)
    if config.arm_mode in POSE_ARM_MODES:
        low[3:7], high[3:7] = -1.0, 1.0
    low[-1], high[-1] = GRIPPER_BOUNDS[config.gripper_mode]
    return low, high
