import numpy as np

from rlbench.backend.exceptions import InvalidActionError


def assert_action_shape(action: np.ndarray, expected_shape: tuple):
    if np.shape(action) != expected_shape:
        raise InvalidActionError('Expected the action shape to be: %s, but was shape: %s' % (
            str(expected_shape), str(np.shape(action))))


class GripperActionMode(object):

    def action_shape(self, scene) -> tuple:
        return 1,


class Discrete(GripperActionMode):

    def __init__(self, attach_grasped_objects: bool = True, detach_before_open: bool = True):
        self._attach_grasped_objects = attach_grasped_objects
        self._detach_before_open = detach_before_open

    def action(self, scene, action: np.ndarray):
        """As upstream: a change of state grasps the task's graspable objects in reach (closing) or releases
        (opening); the fingers move within the simulation steps of this action."""
        assert_action_shape(action, self.action_shape(scene))
        is_open = float(scene.gripper_is_open())
        action = float(action[0] > 0.5)
        if action != is_open:
            if action == 0.0 and self._attach_grasped_objects:
                for obj in scene.task.get_graspable_objects():
                    scene.grasp(obj)
            else:
                scene.release()
            scene.gripper_joints = np.full(2, 0.04 * action)
            scene.pyrep.step()
            scene.task.step()


class GripperJointPosition(GripperActionMode):

    def __init__(self, attach_grasped_objects: bool = True, detach_before_open: bool = True,
                 absolute_mode: bool = True):
        self._attach_grasped_objects = attach_grasped_objects
        self._detach_before_open = detach_before_open
        self._absolute_mode = absolute_mode

    def action(self, scene, action: np.ndarray):
        assert_action_shape(action, self.action_shape(scene))
        scene.gripper_joints = action.repeat(2).astype(np.float64)
