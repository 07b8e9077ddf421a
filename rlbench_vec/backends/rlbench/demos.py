"""Demo actions from RLBench's recorded demos: the action in the env's action mode that takes each recorded
step to the next, and the quaternion arithmetic of RLBench's delta poses. Pure numpy: no simulator."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...config import EnvConfig

# Low-dim fields that demo actions are derived from: always recorded (a few joint reads, no rendering).
ARM_ACTION_SOURCE = {
    "ik": "gripper_pose", "planning": "gripper_pose",
    "joint_position": "joint_positions", "joint_velocity": "joint_velocities",
}
GRIPPER_ACTION_SOURCE = {"discrete": "gripper_open", "joint_position": "gripper_joint_positions"}


def recorded_commands(steps: Sequence[Any]) -> np.ndarray | None:
    """(T-1, joints + 1): misc["joint_position_action"] of steps 1.., what RLBench's planner commanded
    while the demo played (joint targets, then the gripper's open amount); None where the demo lacks it
    (recorded before RLBench had it)."""
    commands = [obs.misc.get("joint_position_action") for obs in steps[1:]]
    if not commands or any(command is None for command in commands):
        return None
    return np.array(commands, dtype=np.float64)


def demo_actions(steps: Sequence[Any], config: EnvConfig) -> np.ndarray:
    """float32 (T-1, action_size): the action in config's action mode that takes each recorded step to the
    next. Joint-position arm actions and discrete gripper actions are the commands RLBench recorded
    (`recorded_commands`, as robobase and RLBench's own tests replay them); the rest, and demos without
    recorded commands, are derived from the next recorded state."""
    def field(name: str) -> np.ndarray:
        return np.array([getattr(obs, name) for obs in steps], dtype=np.float64)

    commands = recorded_commands(steps)
    if config.arm_mode == "joint_position" and commands is not None:
        arm = commands[:, :-1]
        if not config.absolute_mode:
            arm = arm - field("joint_positions")[:-1]
    else:
        arm = field(ARM_ACTION_SOURCE[config.arm_mode])
        if config.absolute_mode or config.arm_mode == "joint_velocity":
            arm = arm[1:]  # the next state is the target (a velocity action lasts one 0.05 s sim step)
        elif config.arm_mode == "joint_position":
            arm = np.diff(arm, axis=0)
        elif config.backend_options.get("frame", "world") == "ee":
            arm = pose_in_frame(arm[:-1], arm[1:])
        else:
            arm = pose_delta(arm[:-1], arm[1:])
    if config.gripper_mode == "discrete" and commands is not None:
        gripper = commands[:, -1]
    else:
        gripper = field(GRIPPER_ACTION_SOURCE[config.gripper_mode])[1:]
        if gripper.ndim == 2:
            gripper = gripper.mean(axis=1)  # finger joint positions: one target drives both fingers
    columns = [arm, gripper[:, None]]
    if config.ignore_collisions_flag:  # the next step's Observation.ignore_collisions, as PerAct's replay buffer
        columns.append(np.array([float(getattr(obs, "ignore_collisions", 0.0)) for obs in steps[1:]])[:, None])
    return np.concatenate(columns, axis=1).astype(np.float32)


def quaternion_multiply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product a * b of quaternions stored x, y, z, w (RLBench's order)."""
    ax, ay, az, aw = np.moveaxis(a, -1, 0)
    bx, by, bz, bw = np.moveaxis(b, -1, 0)
    return np.stack([
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
        aw * bw - ax * bx - ay * by - az * bz,
    ], axis=-1)


def conjugate(q: np.ndarray) -> np.ndarray:
    """The inverse of a unit quaternion (x, y, z, w)."""
    return q * np.array([-1.0, -1.0, -1.0, 1.0])


def pose_delta(current: np.ndarray, target: np.ndarray) -> np.ndarray:
    """The delta pose action that RLBench's calculate_delta_pose turns `current` into `target` with:
    position target - current, rotation q with q * current = target."""
    rotation = quaternion_multiply(target[..., 3:], conjugate(current[..., 3:]))
    return np.concatenate([target[..., :3] - current[..., :3], rotation], axis=-1)


def pose_in_frame(current: np.ndarray, target: np.ndarray) -> np.ndarray:
    """`target` as a pose in the frame of `current` (RLBench's RelativeFrame.EE, which solves IK relative
    to the tip): position R(q)^T (target - current), rotation q^-1 * target."""
    inverse = conjugate(current[..., 3:])
    offset = np.concatenate([target[..., :3] - current[..., :3], np.zeros_like(target[..., :1])], axis=-1)
    position = quaternion_multiply(quaternion_multiply(inverse, offset), current[..., 3:])[..., :3]
    return np.concatenate([position, quaternion_multiply(inverse, target[..., 3:])], axis=-1)
