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
  planning        RLBench's EndEffectorPoseViaPlanning: the straight path first, the TCP along the
                  straight line (and slerped orientation) from its current pose to the target (IK at
                  waypoints every 2 cm / 0.1 rad, joint moves between them; where the line leaves the
                  arm's reach or would flip its configuration, ik's joint-space move). With collision
                  checking (ignore_collisions_flag: the 9th number <= 0.5; else backend_options'
                  collision_checking) a straight path that collides is replaced by RRTConnect's
                  (planner.py); none: ConfigurationPathError, or with backend_options'
                  retry_ignoring_collisions (PerAct's fork) the straight path. clip_to_workspace (RVT)
                  clips the target into the workspace first. The path runs inside the one step and
                  stops where the task succeeds, as RLBench's.
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
import time
from collections.abc import Callable

import numpy as np

from ...config import EnvConfig
from ...spec import WORKSPACE_HIGH, WORKSPACE_LOW, action_size, gripper_index
from .geometry import quat_conjugate, quat_multiply, rotation_error, slerp, wxyz_to_xyzw, xyzw_to_wxyz
from .planner import NoPath, Planner
from .robot import MAX_MOTION_STEPS, Panda
from .scene import FINGER_MAX

UNIT_QUATERNION_TOLERANCE = 1e-3  # float32 actions carry ~1e-7 of rounding
PLANNING_STEP = 0.02  # metres between straight-line waypoints
PLANNING_TURN = 0.1  # radians between straight-line waypoints
MAX_WAYPOINT_JUMP = 0.5  # radians a joint may move between neighbouring waypoints (else IK flipped)


class InvalidAction(Exception):
    """An action that cannot be executed (RLBench's InvalidActionError)."""

    kind = "InvalidActionError"


class PathNotFound(InvalidAction):
    """No collision-free path to a planning target (RLBench's ConfigurationPathError)."""

    kind = "ConfigurationPathError"


class ActionExecutor:
    def __init__(self, config: EnvConfig, panda: Panda):
        self.config = config
        self.panda = panda
        self.size = action_size(config)
        self.pose_mode = config.arm_mode in ("ik", "planning")
        self.fixed = config.action_timing == "fixed"
        self.gripper_at = gripper_index(config)
        self.arm_moving = False  # fixed timing: the last move has not reached its target yet
        options = config.backend_options
        self.collision_checking = bool(options.get("collision_checking", False))
        self.retry_ignoring_collisions = bool(options.get("retry_ignoring_collisions", False))
        self.clip_to_workspace = bool(options.get("clip_to_workspace", False))
        self.planner = Planner(panda) if config.arm_mode == "planning" else None
        self.succeeded: Callable[[], bool] | None = None  # planning: the path stops once this holds (the task's)
        self.planning_s: dict[str, list[float]] = {}  # host seconds per path chosen, by how (Planner.last; unchecked)
        self.waypoint_ignores_collisions = False  # an oracle's: its current waypoint's mark (demos record it)

    def apply(self, action: np.ndarray) -> None:
        action = np.asarray(action, dtype=np.float64)
        if action.shape != (self.size,):
            raise InvalidAction(f"expected an action of shape ({self.size},), got {action.shape}")
        if not np.all(np.isfinite(action)):
            raise InvalidAction(f"action contains NaN or infinity: {action.tolist()}")
        arm, gripper = action[:self.gripper_at], float(action[self.gripper_at])
        ignore_collisions = self.config.ignore_collisions_flag and bool(action[-1] > 0.5)
        opening = (FINGER_MAX if gripper > 0.5 else 0.0) if self.config.gripper_mode == "discrete" else gripper
        path: list[np.ndarray] = []
        if self.pose_mode:
            started = time.perf_counter()
            position, quat = self.target_pose(arm)
            path = self._ik_goal(position, quat)  # raises when the target itself is unreachable
            if self.planner is not None:
                check = not ignore_collisions if self.config.ignore_collisions_flag else self.collision_checking
                self.planner.last = "unchecked"
                try:
                    path = self._planned(position, quat, path[0], check)
                finally:
                    self.planning_s.setdefault(self.planner.last, []).append(time.perf_counter() - started)
        if self.fixed:
            self.panda.set_gripper_goal(opening)
        arrived = True
        if self.config.arm_mode == "joint_velocity":
            self.panda.run_velocities(arm)
        elif self.config.arm_mode == "joint_position":
            arrived = self.panda.step_towards(arm if self.config.absolute_mode else self.panda.qpos + arm)
        else:
            stop = self.succeeded if self.planner is not None else None
            arrived = self.panda.follow(path, max_steps=1 if self.fixed else MAX_MOTION_STEPS, stop=stop)
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
        if self.clip_to_workspace:  # RVT's EndEffectorPoseViaPlanning2
            position = np.clip(position, WORKSPACE_LOW, WORKSPACE_HIGH)
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

    def pose_action(self, position: np.ndarray, quat_wxyz: np.ndarray, gripper: float,
                    ignore_collisions: bool) -> np.ndarray:
        """A whole pose action (float32): the arm part, the gripper and, with ignore_collisions_flag, the 9th."""
        extra = [float(ignore_collisions)] if self.config.ignore_collisions_flag else []
        return np.array([*self.encode_pose(position, quat_wxyz), gripper, *extra], np.float32)

    def _ik_goal(self, position: np.ndarray, quat: np.ndarray) -> list[np.ndarray]:
        result = self.panda.kinematics.solve_near(self.panda.qpos, position, quat)
        if not result.converged and self.planner is not None:  # the planner samples configurations, as PyRep's
            found = self.planner.configurations(position, quat, None)
            if found:
                return [min(found, key=lambda q: float(np.max(np.abs(q - self.panda.qpos))))]
        if not result.converged:
            raise InvalidAction(
                f"IK found no joint configuration for position {np.round(position, 3).tolist()} "
                f"quaternion xyzw {np.round(wxyz_to_xyzw(quat), 3).tolist()} (closest: "
                f"{result.position_error * 1000:.1f} mm, {math.degrees(result.rotation_error):.1f} deg away)"
            )
        return [result.qpos]

    def _planned(self, position: np.ndarray, quat: np.ndarray, goal: np.ndarray, check: bool) -> list[np.ndarray]:
        """Planning mode's joint path to the target: the straight one, unless `check` finds it colliding (then
        the planner's; where there is none, PathNotFound or, retrying as PerAct's fork, the straight one)."""
        straight = self._straight_line(position, quat) or [goal]
        if not check:
            return straight
        assert self.planner is not None
        try:
            return self.planner.around(straight, position, quat, goal)
        except NoPath as error:
            if self.retry_ignoring_collisions:
                return straight
            raise PathNotFound(f"A path could not be found: {error}") from None

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
