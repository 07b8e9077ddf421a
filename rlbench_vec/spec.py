"""Observation and action layout, computed from the config alone (no simulator is imported), and their
gymnasium spaces: the action space, whose samples are valid actions, and batched spaces whose bounds take
no memory per env.

Shapes and dtypes follow RLBench's `Observation`: see ../shared/RLBENCH_API.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import gymnasium as gym
import numpy as np

from .backends import backend_class
from .config import POSE_ARM_MODES, EnvConfig

PANDA_JOINTS = 7
GRIPPER_BOUNDS = {"discrete": (0.0, 1.0), "joint_position": (0.0, 0.04)}
# The Panda's joint limits (rad) and velocity limits (rad/s), as in Franka's datasheet and RLBench's model
PANDA_Q_MIN = np.array([-2.8973, -1.7628, -2.8973, -3.0718, -2.8973, -0.0175, -2.8973])
PANDA_Q_MAX = np.array([2.8973, 1.7628, 2.8973, -0.0698, 2.8973, 3.7525, 2.8973])
PANDA_DQ_MAX = np.array([2.175, 2.175, 2.175, 2.175, 2.61, 2.61, 2.61])
# RLBench's table (top height, centre and half extent in x, y) and the box a pose target must lie in: the
# table's box widened by 0.2 m and up to 1 m above it, like RLBench's planning workspace
TABLE_TOP_Z = 0.752
TABLE_CENTER = (0.2, 0.0)
TABLE_HALF = (0.6, 0.55)
WORKSPACE_LOW = np.array([TABLE_CENTER[0] - TABLE_HALF[0] - 0.2, -TABLE_HALF[1] - 0.2, TABLE_TOP_Z - 0.05])
WORKSPACE_HIGH = np.array([TABLE_CENTER[0] + TABLE_HALF[0] + 0.2, TABLE_HALF[1] + 0.2, TABLE_TOP_Z + 1.0])
# A delta action's bounds: RLBench's JointPositionActionMode moves a joint at most 0.1 rad per action;
# RLBench bounds no delta pose, so a move of at most 5 cm per axis stands in (the bench's actions move 1 cm)
DELTA_JOINT_BOUND = 0.1
DELTA_POSITION_BOUND = 0.05
QUATERNION = slice(3, 7)  # of a pose action: x y z, then the quaternion x y z w
GRIPPER_INDEX = 7  # of a pose action: the gripper, then (ignore_collisions_flag) PerAct's ignore_collisions
IGNORE_COLLISIONS_INDEX = 8


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


def task_state_sizes(config: EnvConfig) -> dict[str, int]:
    """The length of each task's own task_low_dim_state (known without a simulator)."""
    backend = backend_class(config.backend)
    return {task: backend.task_state_size(config.for_task(task)) for task in config.tasks}


def task_state_size(config: EnvConfig) -> int:
    """task_low_dim_state's length in the layout: the longest of the envs' tasks (or config.task_low_dim_size
    when longer); a shorter one is zero-padded (each env's own length: info["task_low_dim_size"] at resets)."""
    return max(config.task_low_dim_size or 0, *task_state_sizes(config).values())


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
    state_size = task_state_size(config) if "task_low_dim_state" in low_dim else 0
    spec.update({name: low_dim_spec(name, state_size) for name in low_dim})
    return spec


def observation_bytes(config: EnvConfig) -> int:
    """One env's observation in bytes: what a step writes into shared memory."""
    return sum(int(np.prod(s.shape, dtype=np.int64)) * s.dtype.itemsize for s in observation_spec(config).values())


def action_size(config: EnvConfig) -> int:
    """Arm part then gripper part, as RLBench's MoveArmThenGripper: pose is xyz + quaternion xyzw; with
    ignore_collisions_flag a 9th number, PerAct's ignore_collisions."""
    arm = 7 if config.arm_mode in POSE_ARM_MODES else PANDA_JOINTS
    return arm + 1 + int(config.ignore_collisions_flag)


def gripper_index(config: EnvConfig) -> int:
    """Where an action's gripper number is: last, or before ignore_collisions with ignore_collisions_flag."""
    return GRIPPER_INDEX if config.ignore_collisions_flag else -1


def action_bounds(config: EnvConfig) -> tuple[np.ndarray, np.ndarray]:
    """Finite bounds of one action, so that a sample inside them is a valid action (ActionSpace): joint
    velocities within the Panda's limits, absolute joint positions within its joint limits, absolute pose
    positions inside the workspace, deltas within DELTA_JOINT_BOUND or DELTA_POSITION_BOUND, quaternion
    components in [-1, 1]; the gripper within its mode's range; ignore_collisions in [0, 1]."""
    size = action_size(config)
    low, high = np.empty(size, np.float32), np.empty(size, np.float32)
    if config.arm_mode in POSE_ARM_MODES:
        if config.absolute_mode:
            low[:3], high[:3] = WORKSPACE_LOW, WORKSPACE_HIGH
        else:
            low[:3], high[:3] = -DELTA_POSITION_BOUND, DELTA_POSITION_BOUND
        low[QUATERNION], high[QUATERNION] = -1.0, 1.0
    elif config.arm_mode == "joint_velocity":
        low[:-1], high[:-1] = -PANDA_DQ_MAX, PANDA_DQ_MAX
    elif config.absolute_mode:
        low[:-1], high[:-1] = PANDA_Q_MIN, PANDA_Q_MAX
    else:
        low[:-1], high[:-1] = -DELTA_JOINT_BOUND, DELTA_JOINT_BOUND
    gripper = gripper_index(config)
    low[gripper], high[gripper] = GRIPPER_BOUNDS[config.gripper_mode]
    if config.ignore_collisions_flag:
        low[IGNORE_COLLISIONS_INDEX], high[IGNORE_COLLISIONS_INDEX] = 0.0, 1.0
    return low, high


def observation_box(spec: ArraySpec) -> gym.spaces.Box:
    """One observation key's space: images in [0, 255], every other array unbounded."""
    if spec.dtype == np.uint8:
        return gym.spaces.Box(0, 255, spec.shape, np.uint8)
    return gym.spaces.Box(-np.inf, np.inf, spec.shape, spec.dtype)


class ActionSpace(gym.spaces.Box):
    """The actions of one env, or of a batch of envs (leading dimensions), as a Box whose samples are
    valid actions: in the pose modes each sample's quaternion is normalised to unit length (RLBench
    refuses any other), which keeps it inside [-1, 1]. What a sample can still fail at is the robot's
    reach: a pose without an IK solution, or a delta that leaves the workspace, ends that env's episode
    as an invalid action (info["invalid_action"])."""

    def __init__(self, low: np.ndarray, high: np.ndarray, pose: bool, seed: Any = None):
        super().__init__(low, high, dtype=np.float32, seed=seed)
        self.pose = pose

    def sample(self, mask: Any = None, probability: Any = None) -> np.ndarray:
        # gymnasium 1.0's Box.sample takes no probability
        action = super().sample(mask) if probability is None else super().sample(mask, probability)
        if self.pose:
            quaternion = action[..., QUATERNION]
            norm = np.linalg.norm(quaternion, axis=-1, keepdims=True)
            identity = np.array([0.0, 0.0, 0.0, 1.0], np.float32)
            action[..., QUATERNION] = np.where(norm > 1e-6, quaternion / np.maximum(norm, 1e-6), identity)
        return action

    def batched(self, count: int) -> ActionSpace:
        """The same space for `count` envs: (count, A), every row's samples valid."""
        return ActionSpace(np.repeat(self.low[None], count, 0), np.repeat(self.high[None], count, 0), self.pose,
                           seed=int(self.np_random.integers(2**31)))


class BatchedBox(gym.spaces.Box):
    """A Box stacked `count` times on a new leading axis whose bounds are broadcast views of the single
    Box's: no host memory grows with the number of envs. (gymnasium's batch_space writes out every bound
    and its mask: 2.5 GB for 1024 envs of five 128x128 cameras with rgb, depth and mask.)"""

    def __init__(self, single: gym.spaces.Box, count: int, seed: Any = None):
        shape = (count, *single.shape)
        gym.spaces.Space.__init__(self, shape, single.dtype, seed)
        self.single, self.count = single, count
        self.low, self.high = np.broadcast_to(single.low, shape), np.broadcast_to(single.high, shape)
        self.bounded_below = np.broadcast_to(single.bounded_below, shape)
        self.bounded_above = np.broadcast_to(single.bounded_above, shape)
        self.low_repr, self.high_repr = single.low_repr, single.high_repr

    def __reduce__(self) -> tuple:  # pickled as the single Box and the count, never as full bounds
        return BatchedBox, (self.single, self.count)


def batched_observations(single: gym.spaces.Dict, count: int) -> gym.spaces.Dict:
    """The observation space of `count` envs: each key's Box batched without copies of its bounds."""
    return gym.spaces.Dict({key: BatchedBox(cast(gym.spaces.Box, space), count) for key, space in single.items()})


def action_space(config: EnvConfig) -> ActionSpace:
    """One env's action space: action_bounds, with valid samples."""
    low, high = action_bounds(config)
    return ActionSpace(low, high, pose=config.arm_mode in POSE_ARM_MODES)
