"""The rlbench backend's oracle: the episode's own waypoints (the task's `get_waypoints()`, which RLBench's demos
follow), acted through the env's end-effector pose action mode as a keyframe agent acts, in the order of RLBench's
`Scene.get_demo`:

- each waypoint's start-of-path ability runs first (it may move the waypoint, or skip it); its pose is read then;
- a Point waypoint is one pose; a PredefinedPath (a CartesianPath waypoint) PATH_POSES poses along its path;
- arm_mode "planning" sends each pose as it is (RLBench plans the move); "ik" sends straight pieces to it
  (`straight_pieces`), since RLBench's IK mode solves each action by Jacobian steps from where the arm is;
- the gripper acts with the waypoint's last action, after the arm (MoveArmThenGripper, as the demos do): its
  extension string's 'open_gripper(' opens and 'close_gripper(' closes, to the amount in the brackets if any;
- its end-of-path ability runs after its last action; when the waypoints run out, the task's
  should_repeat_waypoints() starts them again (a pass that acts nothing ends the oracle).
Relative action modes get each pose as a delta from the tip's pose at that moment. Runs in the worker: the
waypoint objects are PyRep's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ...config import EnvConfig
from ...spec import GRIPPER_BOUNDS
from ..base import straight_pieces
from .demos import pose_delta, pose_in_frame

PATH_POSES = 5  # poses along a predefined path: a quarter turn of 10 cm radius stays within 1.2 mm of its arc
GRIPPER_WORDS = (("open_gripper(", 1.0), ("close_gripper(", 0.0))  # RLBench's extension strings, open first


def gripper_target(ext: str, current: float, gripper_mode: str) -> float:
    """The gripper action after a waypoint with extension string `ext`: open (1) or closed (0), or the amount in
    the brackets, in the gripper mode's units (joint_position: metres of finger opening); `current` without one."""
    for word, amount in GRIPPER_WORDS:
        if word in ext:
            rest = ext[ext.index(word) + len(word):]
            if not rest.startswith(")"):
                amount = float(rest[:rest.index(")")])
            return amount * GRIPPER_BOUNDS[gripper_mode][1]
    return current


def waypoint_poses(point: Any) -> list[np.ndarray]:
    """The poses (x, y, z, qx, qy, qz, qw) a waypoint is reached through: a Point's own, or PATH_POSES along a
    predefined path (a dummy turns the path's Euler angles into a quaternion, as CoppeliaSim counts them)."""
    from pyrep.objects.dummy import Dummy
    from rlbench.backend.waypoints import PredefinedPath

    target = point.get_waypoint_object()
    if not isinstance(point, PredefinedPath):
        return [np.asarray(target.get_pose(), np.float64)]
    marker = Dummy.create()
    try:
        poses = []
        for k in range(1, PATH_POSES + 1):
            position, orientation = target.get_pose_on_path(k / PATH_POSES)
            marker.set_position(position)
            marker.set_orientation(orientation)
            poses.append(np.asarray(marker.get_pose(), np.float64))
        return poses
    finally:
        marker.remove()


def arm_action(target: np.ndarray, tip: np.ndarray, config: EnvConfig) -> np.ndarray:
    """The pose action that sends the tip from `tip` to `target` in config's action mode."""
    if config.absolute_mode:
        return target
    if config.backend_options.get("frame", "world") == "ee":
        return pose_in_frame(tip, target)
    return pose_delta(tip, target)


def waypoint_actions(task: Any, config: EnvConfig, tip_pose: Callable[[], np.ndarray],
                     gripper: float) -> Iterator[np.ndarray]:
    """Actions (float32) through the waypoints of `task` (RLBench's Task); the caller steps each before asking for
    the next. tip_pose() reads the tip's current pose; `gripper` is the gripper action that holds it as it is."""
    waypoints = task.get_waypoints()
    while True:
        acted = False
        for point in waypoints:
            point.start_of_path()
            if point.skip:
                continue
            poses = waypoint_poses(point)
            for index, pose in enumerate(poses):
                pieces = straight_pieces(tip_pose()[:3], pose[:3]) if config.arm_mode == "ik" else [pose[:3]]
                for count, position in enumerate(pieces, 1):
                    if index == len(poses) - 1 and count == len(pieces):
                        gripper = gripper_target(point.get_ext(), gripper, config.gripper_mode)
                    action = arm_action(np.concatenate([position, pose[3:]]), tip_pose(), config)
                    acted = True
                    # ignore_collisions_flag: the waypoint's own mark (upstream keeps it private)
                    marked = float(getattr(point, "_ignore_collisions", False))
                    extra = [marked] if config.ignore_collisions_flag else []
                    yield np.array([*action, gripper, *extra], np.float32)
            point.end_of_path()
        if not (acted and task.should_repeat_waypoints()):
            return
