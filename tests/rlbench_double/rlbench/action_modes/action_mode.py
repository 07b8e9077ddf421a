from abc import abstractmethod

import numpy as np

from rlbench.action_modes.arm_action_modes import PERACT_FORK


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
        if PERACT_FORK:  # the fork's slicing, as its action_mode.py
            self.arm_action_mode.action(scene, np.array(action[:7]), bool(action[8:9]))
            self.gripper_action_mode.action(scene, np.array(action[7:8]))
            return
        arm_act_size = np.prod(self.arm_action_mode.action_shape(scene))
        arm_action = np.array(action[:arm_act_size])
        ee_action = np.array(action[arm_act_size:])
        self.arm_action_mode.action(scene, arm_action)
        self.gripper_action_mode.action(scene, ee_action)

    def action_shape(self, scene):
        return np.prod(self.arm_action_mode.action_shape(scene)) + np.prod(
            self.gripper_action_mode.action_shape(scene))
