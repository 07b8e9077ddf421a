import os
from enum import Enum

import numpy as np
from double_log import record
from pyrep.errors import ConfigurationPathError, IKError

from rlbench.backend.exceptions import InvalidActionError
from rlbench.backend.scene import pose_matrix

DT = 0.05
PERACT_FORK = os.environ.get("RLBENCH_DOUBLE_PERACT_FORK") == "1"  # mimic MohitShridhar/RLBench branch peract


def assert_action_shape(action: np.ndarray, expected_shape: tuple):
    if np.shape(action) != expected_shape:
        raise InvalidActionError('Expected the action shape to be: %s, but was shape: %s' % (
            str(expected_shape), str(np.shape(action))))


def assert_unit_quaternion(quat):
    if not np.isclose(np.linalg.norm(quat), 1.0):
        raise InvalidActionError('Action contained non unit quaternion!')


def _raw_pyrep_error(action):
    """The double's stand-in for errors that escape unwrapped (see double_log)."""
    if np.isclose(action[0], -0.0111, rtol=0, atol=1e-6):
        raise IKError('IK failed (double)')
    if np.isclose(action[0], -0.0222, rtol=0, atol=1e-6):
        raise ConfigurationPathError('no path (double)')


def _quaternion_wxyz(a, b):
    """pyquaternion's Quaternion(w, x, y, z) * Quaternion(w, x, y, z)."""
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return [aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw]


def calculate_delta_pose(scene, action: np.ndarray):
    a_x, a_y, a_z, a_qx, a_qy, a_qz, a_qw = action
    x, y, z, qx, qy, qz, qw = scene.gripper_pose
    qw, qx, qy, qz = _quaternion_wxyz([a_qw, a_qx, a_qy, a_qz], [qw, qx, qy, qz])
    return [a_x + x, a_y + y, a_z + z] + [qx, qy, qz, qw]


def _relative_to_tip(scene, pose):
    """World pose of `pose` given in the tip's frame: position R_tip p + p_tip, rotation q_tip * q."""
    qx, qy, qz, qw = scene.gripper_pose[3:]
    tip = pose_matrix(scene.gripper_pose)
    position = tip[:3, :3] @ np.asarray(pose[:3]) + tip[:3, 3]
    w, x, y, z = _quaternion_wxyz([qw, qx, qy, qz], [pose[6], pose[3], pose[4], pose[5]])
    return list(position) + [x, y, z, w]


class RelativeFrame(Enum):
    WORLD = 0
    EE = 1


class ArmActionMode(object):

    def action_shape(self, scene) -> tuple:
        return 7,


class JointVelocity(ArmActionMode):

    def action(self, scene, action: np.ndarray):
        assert_action_shape(action, self.action_shape(scene))
        _raw_pyrep_error(action)
        scene.joint_velocities = np.array(action, dtype=np.float64)
        scene.joint_positions = scene.joint_positions + DT * scene.joint_velocities
        scene.step()


class JointPosition(ArmActionMode):
    """One simulation step towards the joint targets (absolute, or the current positions plus the action)."""

    def __init__(self, absolute_mode: bool = True):
        self._absolute_mode = absolute_mode

    def action(self, scene, action: np.ndarray):
        assert_action_shape(action, self.action_shape(scene))
        _raw_pyrep_error(action)
        scene.track_joint_targets(action if self._absolute_mode else scene.joint_positions + action)
        scene.step()


class _EndEffectorPose(ArmActionMode):

    def __init__(self, absolute_mode: bool = True, frame: RelativeFrame = RelativeFrame.WORLD,
                 collision_checking: bool = False):
        self._absolute_mode = absolute_mode
        self._frame = frame
        self._collision_checking = collision_checking

    def _target(self, scene, action):
        """The world pose the arm is sent to. In the EE frame the action is a pose relative to the current
        tip (upstream passes relative_to=tip to IK / planning), whatever absolute_mode says."""
        assert_action_shape(action, (7,))
        assert_unit_quaternion(action[3:])
        _raw_pyrep_error(action)
        if not self._absolute_mode and self._frame != RelativeFrame.EE:
            action = calculate_delta_pose(scene, action)
        if self._frame == RelativeFrame.EE:
            action = _relative_to_tip(scene, action)
        return np.array(action, dtype=np.float64)

    def _move(self, scene, action, ignore_collisions):
        record("arm_move", ignore_collisions=ignore_collisions, collision_checking=self._collision_checking)
        scene.gripper_pose = self._target(scene, action)
        scene.step()

    if PERACT_FORK:  # the fork's pose arm modes take the 9th action element
        def action(self, scene, action: np.ndarray, ignore_collisions: bool = True):
            self._move(scene, action, ignore_collisions)
    else:
        def action(self, scene, action: np.ndarray):
            self._move(scene, action, None)


class EndEffectorPoseViaPlanning(_EndEffectorPose):

    def _target(self, scene, action):
        target = super()._target(scene, action)
        if not (-1.0 < target[0] < 1.0 and -1.0 < target[1] < 1.0 and 0.75 < target[2] < 1.75):
            raise InvalidActionError('A path could not be found because the target is outside of workspace.')
        return target


class EndEffectorPoseViaIK(_EndEffectorPose):
    pass
