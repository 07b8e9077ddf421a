"""Scripted oracles: a task's waypoints (its `oracle`, planned from the episode's first state with
privileged information) turned into actions of the env's action mode, to make demos:
  ik           one pose action per waypoint (straight segments split into pieces: base.straight_pieces);
  planning     one pose action per waypoint (the mode moves in straight lines itself);
  joint modes  IK to each waypoint, then joint actions until the arm is there.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from ...errors import ConfigError
from ..base import straight_pieces
from .actions import MAX_WAYPOINT_JUMP, ActionExecutor
from .robot import CONTROL_DT, PATH_ACCELERATION, Panda, line_duration
from .scene import FINGER_MAX
from .tasks.base import Waypoint

JOINT_TOLERANCE = 0.003  # rad: a joint-space oracle moves on when every joint is this close to a waypoint
PASSING_TOLERANCE = 0.03  # rad: ... or this close to a point on the way to one (so it does not stop there)
MAX_ACTIONS_PER_WAYPOINT = 60


def reachable(waypoints: Sequence[Waypoint], panda: Panda) -> bool:
    """Whether IK finds the arm a configuration for every target the ik-mode oracle gives in turn (each
    waypoint, after the pieces of its straight line from the previous one: what oracle_actions executes),
    each from the previous one's, starting from the arm's current configuration (RLBench's validate: the
    demo's waypoints reachable). Along a straight line (its pieces after the first, which also turns the hand
    to the waypoint's orientation) no joint may jump more than MAX_WAYPOINT_JUMP from piece to piece: there IK
    has flipped the arm, which would swing it wide instead of along the line."""
    q, position = panda.qpos.copy(), panda.tcp_pose()[0]
    for waypoint in waypoints:
        for index, (target, quat) in enumerate(_pose_targets(position, waypoint, split=True)):
            result = panda.kinematics.solve_near(q, target, quat)
            flipped = index > 0 and np.max(np.abs(result.qpos - q)) > MAX_WAYPOINT_JUMP
            if not result.converged or flipped:
                return False
            q = result.qpos
        position = waypoint.position
    return True


def gripper_value(executor: ActionExecutor, is_open: bool) -> float:
    if executor.config.gripper_mode == "discrete":
        return float(is_open)
    return FINGER_MAX if is_open else 0.0


def _pose_targets(start: np.ndarray, waypoint: Waypoint, split: bool) -> list[tuple[np.ndarray, np.ndarray]]:
    """The waypoint's pose, preceded by intermediate poses on the straight line from `start` when `split`."""
    if not (split and waypoint.straight):
        return [(waypoint.position, waypoint.quat)]
    return [(position, waypoint.quat) for position in straight_pieces(start, waypoint.position)]


def _braking_velocity(delta: np.ndarray) -> np.ndarray:
    """Joint velocities covering `delta` along a straight line: as fast as the arm can while braking at
    half its deceleration, and proportional near the end (the servos lag a velocity change by about a
    control step, so full braking would overshoot)."""
    duration = line_duration(delta)
    speed = min(1.0, np.sqrt(PATH_ACCELERATION * duration), duration / (3 * CONTROL_DT))
    return delta / duration * speed


def oracle_actions(waypoints: Sequence[Waypoint], panda: Panda, executor: ActionExecutor) -> Iterator[np.ndarray]:
    """Actions (float32) through the waypoints; the caller steps each before asking for the next."""
    config = executor.config
    if config.action_timing != "rlbench":
        raise ConfigError("the oracles plan one action per waypoint, each run until it is done: demos need "
                          "action_timing='rlbench' (make the env that collects them with it).")
    for waypoint in waypoints:
        executor.waypoint_ignores_collisions = waypoint.touches  # the frames of the move carry its mark
        gripper = gripper_value(executor, waypoint.gripper_open)
        moved = False
        targets = _pose_targets(panda.tcp_pose()[0], waypoint, split=config.arm_mode != "planning")
        for index, (position, quat) in enumerate(targets):
            if executor.pose_mode:
                moved = True
                yield executor.pose_action(position, quat, gripper, waypoint.touches)
                continue
            goal = panda.kinematics.solve_near(panda.qpos, position, quat).qpos
            tolerance = JOINT_TOLERANCE if index == len(targets) - 1 else PASSING_TOLERANCE
            for _ in range(MAX_ACTIONS_PER_WAYPOINT):
                error = goal - panda.qpos
                if np.all(np.abs(error) < tolerance):
                    break
                if config.arm_mode == "joint_velocity":
                    arm = _braking_velocity(error)
                else:
                    arm = goal if config.absolute_mode else error
                moved = True
                yield np.append(arm, gripper).astype(np.float32)
        if not moved:
            # Nothing to move (a gripper-only waypoint in a joint mode): hold the arm, act the gripper.
            hold = panda.qpos.copy() if config.arm_mode == "joint_position" and config.absolute_mode else np.zeros(7)
            yield np.append(hold, gripper).astype(np.float32)
