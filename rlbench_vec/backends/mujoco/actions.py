"""RLBench's MoveArmThenGripper in the embedded simulator: the arm part of an action runs first, then
the gripper part.

Arm modes:
  joint_velocity  one control step at the given joint velocities (clipped to the velocity limits).
  joint_position  absolute targets, or deltas from the current joint positions; one control step
                  towards them at the joint velocity limits, as RLBench (big moves take several steps).
  ik              end-effector pose (xyz + quaternion xyzw; a delta is added to the position and
                  composed before the current orientation, as RLBench). Damped least squares solves
                  the joints in the worker; the arm then moves in joint space until it reaches them
                  or stops, within a step budget.
  planning        like ik, but the TCP follows the straight line (and slerped orientation) from its
                  current pose to the target: IK at waypoints every 2 cm / 0.1 rad, joint moves between
                  them. Where the line leaves the arm's reach (or would flip its configuration) the
                  motion falls back to ik's joint-space move. This stands in for RLBench's
                  sampling-based planner: there is no obstacle avoidance.
Gripper modes: discrete (> 0.5 opens, else closes) and joint_position (each finger's target, 0..0.04).
A gripper change runs until the fingers stop, as RLBench's gripper actuation.

action_timing="fixed" makes every action one control step instead: the gripper heads for its goal
from the start, alongside the arm, and keeps going in the next steps until the fingers stop; pose and
joint-position moves run one control step towards their target. `arm_moving` / `gripper_moving` then
say whether the last move or gripper change is still under way.

Invalid actions raise InvalidAction with what was wrong; the backend turns that into the end of the
episode.
"""

from __future__ import annotations

import math

import numpy as np

from ...config import EnvConfig
from ...spec import WORKSPACE_HIGH, WORKSPACE_LOW, action_size
from .geometry import quat_conjugate, quat_multiply, rotation_error, slerp, wxyz_to_xyzw, xyzw_to_wxyz
from .robot import MAX_MOTION_STEPS, Panda
from .scene import FINGER_MAX

UNIT_QUATERNION_TOLERANCE = 1e-3  # float32 actions carry ~1e-7 of rounding
PLANNING_STEP = 0.02  # metres between straight-line waypoints
PLANNING_TURN = 0.1  # radians between straight-line waypoints
MAX_WAYPOINT_JUMP = 0.5  # radians a joint may move between neighbouring waypoints (else IK flipped)


class InvalidAction(Exception):
    """An action that cannot be executed (RLBench's InvalidActionError)."""


class ActionExecutor:
    def __init__(self, config: EnvConfig, panda: Panda):
        self.config = config
        self.panda = panda
        self.size = action_size(config)
        self.pose_mode = config.arm_mode in ("ik", "planning")
        self.fixed = config.action_timing == "fixed"
        self.arm_moving = False  # fixed timing: the last move has not reached its target yet

    def apply(self, action: np.ndarray) -> None:
        action = np.asarray(action, dtype=np.float64)
        if action.shape != (self.size,):
            raise InvalidAction(f"expected an action of shape ({self.size},), got {action.shape}")
        if not np.all(np.isfinite(action)):
            raise InvalidAction(f"action contains NaN or infinity: {action.tolist()}")
        arm, gripper = action[:-1], float(action[-1])
        opening = (FINGER_MAX if gripper > 0.5 else 0.0) if self.config.gripper_mode == "discrete" else gripper
        path: list[np.ndarray] = []
        if self.pose_mode:
            position, quat = self.target_pose(arm)
            path = self._ik_goal(position, quat)  # raises when the target itself is unreachable
            if self.config.arm_mode == "planning":
                path = self._straight_line(position, quat) or path
        if self.fixed:
            self.panda.set_gripper_goal(opening)
        arrived = True
        if self.config.arm_mode == "joint_velocity":
            self.panda.run_velocities(arm)
        elif self.config.arm_mode == "joint_position":
            arrived = self.panda.step_towards(arm if self.config.absolute_mode else self.panda.qpos + arm)
        else:
            arrived = self.panda.follow(path, max_steps=1 if self.fixed else MAX_MOTION_STEPS)
        if self.fixed:
            self.arm_moving = not arrived
            self.panda.settle_gripper()
        else:
            self.panda.actuate_gripper(opening)

    def target_pose(self, arm: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """World-frame target (position, quaternion wxyz) of a pose action, checked."""
        norm = np.linalg.norm(arm[3:7])
        if abs(norm - 1.0) > UNIT_QUATERNION_TOLERANCE:
            raise InvalidAction(f"action contained a non-unit quaternion (norm {norm:.4f})")
        quat = xyzw_to_wxyz(arm[3:7] / norm)
        position = arm[:3]
        if not self.config.absolute_mode:
            current_pos, current_quat, _ = self.panda.tcp_pose()
            position, quat = current_pos + position, quat_multiply(quat, current_quat)
        if np.any(position < WORKSPACE_LOW) or np.any(position > WORKSPACE_HIGH):
            raise InvalidAction(
                f"target position {np.round(position, 3).tolist()} is outside the workspace "
                f"{np.round(WORKSPACE_LOW, 3).tolist()}..{np.round(WORKSPACE_HIGH, 3).tolist()}"
            )
        return position, quat

    def encode_pose(self, position: np.ndarray, quat_wxyz: np.ndarray) -> np.ndarray:
        """The arm part of a pose action reaching (position, quat_wxyz) from the current TCP pose."""
        if self.config.absolute_mode:
            return np.concatenate([position, wxyz_to_xyzw(quat_wxyz)])
        current_pos, current_quat, _ = self.panda.tcp_pose()
        delta = quat_multiply(quat_wxyz, quat_conjugate(current_quat))
        return np.concatenate([position - current_pos, wxyz_to_xyzw(delta)])

    def _ik_goal(self, position: np.ndarray, quat: np.ndarray) -> list[np.ndarray]:
        result = self.panda.kinematics.solve_near(self.panda.qpos, position, quat)
        if not result.converged:
            raise InvalidAction(
                f"IK found no joint configuration for position {np.round(position, 3).tolist()} "
                f"quaternion xyzw {np.round(wxyz_to_xyzw(quat), 3).tolist()} (closest: "
                f"{result.position_error * 1000:.1f} mm, {math.degrees(result.rotation_error):.1f} deg away)"
            )
        return [result.qpos]

    def _straight_line(self, position: np.ndarray, quat: np.ndarray) -> list[np.ndarray]:
        """Joint waypoints moving the TCP along the straight line to the pose; [] where IK cannot follow it."""
        kinematics = self.panda.kinematics
        start_pos, start_quat, _ = self.panda.tcp_pose()
        distance = np.linalg.norm(position - start_pos)
        turn = np.linalg.norm(rotation_error(quat, start_quat))
        count = max(1, math.ceil(distance / PLANNING_STEP), math.ceil(turn / PLANNING_TURN))
        path, q = [], self.panda.qpos.copy()
        for i in range(1, count + 1):
            t = i / count
            result = kinematics.solve(q, start_pos + t * (position - start_pos), slerp(start_quat, quat, t))
            if not result.converged or np.max(np.abs(result.qpos - q)) > MAX_WAYPOINT_JUMP:
                return []
            q = result.qpos
            path.append(q)
        return path
