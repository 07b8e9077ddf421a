from abc import abstractmethod

import numpy as np


class ActionMode(object):

    def __init__(self, arm_action_mode, gripper_action_mode):
        self.arm_action_mode = arm_action_mode
        self.gripper_action_mode = gripper_action_mode

    @abstractmethod
    def action(self, scene, action: np.ndarray):
        pass

    @abstractmethod
    def action_shape(self, scene):
        pass


class MoveArmThenGripper(ActionMode):

    def action(self, scene, action: np.ndarray):
        arm_act_size = np.prod(self.arm_action_mode.action_shape(scene))
        arm_action = np.array(action[:arm_act_size])
        ee_action = np.array(action[arm_act_size:])
        self.arm_action_mode.action(scene, arm_action)
        self.gripper_action_mode.action(scene, ee_action)

    def action_shape(self, scene):
        return np.prod(self.arm_action_mode.action_shape(scene)) + np.prod(
            self.gripper_action_mode.action_shape(scene))
