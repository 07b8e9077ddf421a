"""Observation and action layout, computed from the config alone (no simulator is imported), and their
gymnasium spaces: the action space, whose samples are valid actions, and batched spaces whose bounds take
no memory per env.

Shapes and dtypes follow RLBench's `Observation`: see ../shared/RLBENCH_API.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, cast

import gymnasium as gym
import numpy as np

from .backends import backend_class
from .config import POSE_ARM_MODES, EnvConfig

PANDA_JOINTS = 7
# The Panda's joint limits (rad) and velocity limits (rad/s), as in Franka's datasheet and RLBench's model
PANDA_Q_MIN = np.array([-2.8973, -1.7628, -2.8973, -3.0718, -2.8973, -0.0175, -2.8973])
PANDA_Q_MAX = np.array([2.8973, 1.7628, 2.8973, -0.0698, 2.8973, 3.7525, 2.8973])
PANDA_DQ_MAX = np.array([2.175, 2.175, 2.175, 2.175, 2.61, 2.61, 2.61])
PANDA_TAU_MAX = np.array([87.0, 87.0, 87.0, 87.0, 12.0, 12.0, 12.0])  # joint torque limits (N m)
FINGER_MAX = 0.04  # each finger opens 0..0.04 m
PANDA_REACH = 1.5  # m from its base: more than the stretched arm with its hand (1.4 m)
GRIPPER_BOUNDS = {"discrete": (0.0, 1.0), "joint_position": (0.0, FINGER_MAX)}
# RLBench's table (top height, centre and half extent in x, y) and the box a pose target must lie in: the
# table's box widened by 0.2 m and up to 1 m above it, like RLBench's planning workspace
TABLE_TOP_Z = 0.752
TABLE_CENTER = (0.2, 0.0)
TABLE_HALF = (0.6, 0.55)
WORKSPACE_LOW = np.array([TABLE_CENTER[0] - TABLE_HALF[0] - 0.2, -TABLE_HALF[1] - 0.2, TABLE_TOP_Z - 0.05])
WORKSPACE_HIGH = np.array([TABLE_CENTER[0] + TABLE_HALF[0] + 0.2, TABLE_HALF[1] + 0.2, TABLE_TOP_Z + 1.0])
# Where a random pose action goes (ActionSpace.sample): the Panda stands at ROBOT_BASE, on the table's edge; its
# gripper reaches the box in front of it, above the table, pointing down (DOWN, xyzw) give or take MAX_TILT and
# turned about the vertical by up to MAX_YAW. RLBench's workspace is wider, but much of it is out of reach.
ROBOT_BASE = np.array([-0.3, 0.0, TABLE_TOP_Z])
REACH_LOW = ROBOT_BASE + [0.25, -0.35, 0.1]
REACH_HIGH = ROBOT_BASE + [0.65, 0.35, 0.5]
DOWN = (1.0, 0.0, 0.0, 0.0)
MAX_TILT = 0.3
MAX_YAW = math.pi / 2
DELTA_TURN = 0.1  # a random delta pose turns by up to this (rad) each way: its turns add up over an episode
# A delta action's bounds: RLBench's JointPositionActionMode moves a joint at most 0.1 rad per action;
# RLBench bounds no delta pose, so a move is bounded by the workspace's extent (a longer one must leave it);
# random delta poses move up to DELTA_MOVE per axis
DELTA_JOINT_BOUND = 0.1
DELTA_POSITION_BOUND = WORKSPACE_HIGH - WORKSPACE_LOW
DELTA_MOVE = 0.05
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


MASK_IDS = 2**24  # a mask holds ids in 24 bits of colour (RLBench's rgb_handles_to_mask)
LIMIT_GIVE = 0.01  # rad or m past a joint's limit that a simulator's soft limit lets it go (MuJoCo's: ~0.1 mm)


def observation_bounds(name: str, spec: ArraySpec, config: EnvConfig) -> tuple[Any, Any]:
    """One observation key's physical limits, or (-inf, inf) where it has none (joint velocities, which
    impacts may push past the Panda's rated ones; point clouds; task_low_dim_state; the cameras' misc)."""
    reach_low, reach_high = ROBOT_BASE - PANDA_REACH, ROBOT_BASE + PANDA_REACH
    if spec.dtype == np.uint8:
        return 0, 255
    if name.endswith("_depth"):  # RLBench's depth is normalised from near to far unless in metres
        return 0.0, np.inf if config.depth_in_meters else 1.0
    if name.endswith("_mask"):
        return 0.0, MASK_IDS - 1
    if name == "gripper_matrix":
        low, high = np.full((4, 4), -1.0), np.full((4, 4), 1.0)
        low[:3, 3], high[:3, 3] = reach_low, reach_high
        low[3], high[3] = (0.0, 0.0, 0.0, 1.0), (0.0, 0.0, 0.0, 1.0)
        return low, high
    return {
        "joint_positions": (PANDA_Q_MIN - LIMIT_GIVE, PANDA_Q_MAX + LIMIT_GIVE),
        "joint_forces": (-PANDA_TAU_MAX, PANDA_TAU_MAX),
        "gripper_open": (0.0, 1.0),
        "gripper_pose": (np.r_[reach_low, -np.ones(4)], np.r_[reach_high, np.ones(4)]),
        "gripper_joint_positions": (-LIMIT_GIVE, FINGER_MAX + LIMIT_GIVE),
    }.get(name, (-np.inf, np.inf))


def observation_space(config: EnvConfig, layout: dict[str, ArraySpec]) -> gym.spaces.Dict:
    """One env's observation space: a Box per key of the layout, within observation_bounds."""
    return gym.spaces.Dict({name: gym.spaces.Box(*observation_bounds(name, spec, config), spec.shape,
                                                 spec.dtype.type) for name, spec in layout.items()})


class ActionSpace(gym.spaces.Box):
    """The actions of one env, or of a batch of envs (leading dimensions), as a Box whose samples are
    valid actions. In the pose modes (`pose`) a sample is a pose the robot reaches: an absolute position
    inside REACH_LOW..REACH_HIGH or a move of up to DELTA_MOVE (where the bounds meet them), a unit quaternion
    within MAX_TILT of the gripper pointing down and turned by up to MAX_YAW about the vertical (absolute),
    or a turn of up to DELTA_TURN each way (a delta); the other numbers (the gripper's, any flag) are
    uniform in their bounds."""

    def __init__(self, low: np.ndarray, high: np.ndarray, pose: bool, seed: Any = None, absolute: bool = True):
        super().__init__(low, high, dtype=np.float32, seed=seed)
        self.pose, self.absolute = pose, absolute

    def sample(self, mask: Any = None, probability: Any = None) -> np.ndarray:
        # gymnasium 1.0's Box.sample takes no probability
        action = super().sample(mask) if probability is None else super().sample(mask, probability)
        if self.pose:
            rng, rows = self.np_random, action.shape[:-1]
            reach_low, reach_high = (REACH_LOW, REACH_HIGH) if self.absolute else (-DELTA_MOVE, DELTA_MOVE)
            low, high = np.maximum(self.low[..., :3], reach_low), np.minimum(self.high[..., :3], reach_high)
            apart = low > high  # bounds narrowed off the reach (SB3VecEnv's arm_limit): the bounds' own range
            low, high = np.where(apart, self.low[..., :3], low), np.where(apart, self.high[..., :3], high)
            action[..., :3] = rng.uniform(low, high, (*rows, 3))
            tilt, yaw, centre = (MAX_TILT, MAX_YAW, DOWN) if self.absolute else (DELTA_TURN, DELTA_TURN, (0, 0, 0, 1))
            turns = [random_turn(rng, tilt, yaw) for _ in range(int(np.prod(rows, dtype=np.int64)))]
            action[..., QUATERNION] = np.reshape([quaternion_product(turn, centre) for turn in turns], (*rows, 4))
        return action

    def batched(self, count: int) -> ActionSpace:
        """The same space for `count` envs: (count, A), every row's samples valid."""
        return ActionSpace(np.repeat(self.low[None], count, 0), np.repeat(self.high[None], count, 0), self.pose,
                           seed=int(self.np_random.integers(2**31)), absolute=self.absolute)


def quaternion_product(a: Any, b: Any) -> np.ndarray:
    """a * b of quaternions x y z w: the rotation b, then a."""
    ax, ay, az, aw = a
    bx, by, bz, bw = b
    return np.array([aw * bx + ax * bw + ay * bz - az * by, aw * by - ax * bz + ay * bw + az * bx,
                     aw * bz + ax * by - ay * bx + az * bw, aw * bw - ax * bx - ay * by - az * bz])


def random_turn(rng: np.random.Generator, max_tilt: float, max_yaw: float) -> np.ndarray:
    """A rotation (xyzw) about a random horizontal axis by up to max_tilt, then about the vertical by up to
    max_yaw."""
    axis, tilt, yaw = rng.uniform(0.0, 2 * math.pi), rng.uniform(0.0, max_tilt), rng.uniform(-max_yaw, max_yaw)
    tilted = (math.cos(axis) * math.sin(tilt / 2), math.sin(axis) * math.sin(tilt / 2), 0.0, math.cos(tilt / 2))
    return quaternion_product((0.0, 0.0, math.sin(yaw / 2), math.cos(yaw / 2)), tilted)


class BatchedBox(gym.spaces.Box):
    """A Box stacked `count` times on a new leading axis whose bounds are broadcast views of the single
    Box's: no host memory grows with the number of envs. (gymnasium's batch_space writes out every bound
    and its mask: 2.5 GB for 1024 envs of five 128x128 cameras with rgb, depth and mask.)"""

    def __init__(self, single: gym.spaces.Box, count: int, seed: Any = None):
        shape = (count, *single.shape)
        gym.spaces.Space.__init__(self, shape, single.dtype, seed)
        self.single, self.count = single, count
        self.low, self.high = repeated(single.low, count), repeated(single.high, count)
        self.bounded_below = repeated(single.bounded_below, count)
        self.bounded_above = repeated(single.bounded_above, count)
        self.low_repr, self.high_repr = single.low_repr, single.high_repr

    def __reduce__(self) -> tuple:  # pickled as the single Box and the count, never as full bounds
        return BatchedBox, (self.single, self.count)


def repeated(array: np.ndarray, count: int) -> np.ndarray:
    """`array` stacked `count` times as a view (stride 0): writable like a Box's own bounds, since torch warns
    at read-only arrays (TorchRL's spec conversion reads them). Writing one row would write them all."""
    return np.lib.stride_tricks.as_strided(array, (count, *array.shape), (0, *array.strides), writeable=True)


def batched_observations(single: gym.spaces.Dict, count: int) -> gym.spaces.Dict:
    """The observation space of `count` envs: each key's Box batched without copies of its bounds."""
    return gym.spaces.Dict({key: BatchedBox(cast(gym.spaces.Box, space), count) for key, space in single.items()})


def action_space(config: EnvConfig) -> ActionSpace:
    """One env's action space: action_bounds, with valid samples."""
    low, high = action_bounds(config)
    return ActionSpace(low, high, pose=config.arm_mode in POSE_ARM_MODES, absolute=config.absolute_mode)
