import os

import numpy as np
from double_log import record

from rlbench.backend.exceptions import BoundaryError, TaskEnvironmentError
from rlbench.backend.task import SUCCESS_STEPS
from rlbench.demo import Demo

_failed_resets = 0  # per process, for RLBENCH_DOUBLE_FAIL_RESETS


class TaskEnvironment(object):

    def __init__(self, pyrep, robot, scene, task, action_mode, dataset_root, obs_config,
                 static_positions: bool = False, attach_grasped_objects: bool = True,
                 shaped_rewards: bool = False):
        self._pyrep = pyrep
        self._robot = robot
        self._scene = scene
        self._task = task
        self._variation_number = 0
        self._action_mode = action_mode
        self._dataset_root = dataset_root
        self._obs_config = obs_config
        self._shaped_rewards = shaped_rewards
        self._reset_called = False
        self._scene.task = task

    def get_name(self) -> str:
        return self._task.get_name()

    def sample_variation(self) -> int:
        self._variation_number = np.random.randint(0, self._task.variation_count())
        return self._variation_number

    def set_variation(self, v: int) -> None:
        if v >= self.variation_count():
            raise TaskEnvironmentError('Requested variation %d, but there are only %d variations.' % (
                v, self.variation_count()))
        self._variation_number = v

    def variation_count(self) -> int:
        return self._task.variation_count()

    def reset(self, demo=None):
        global _failed_resets
        self._pyrep.check_thread()
        self._scene.reset()
        if _failed_resets < int(os.environ.get("RLBENCH_DOUBLE_FAIL_RESETS", "0")):
            _failed_resets += 1
            record("reset", variation=self._variation_number, ok=False)
            raise TaskEnvironmentError('Could not place the task %s in the scene.' % self._task.get_name()) \
                from BoundaryError()
        desc = self._task.init_episode(self._variation_number)
        self._scene._variation_index = self._variation_number
        self._reset_called = True
        record("reset", variation=self._variation_number, ok=True)
        return desc, self._scene.get_observation()

    def get_observation(self):
        return self._scene.get_observation()

    def step(self, action):
        self._pyrep.check_thread()
        if not self._reset_called:
            raise RuntimeError("Call 'reset' before calling 'step' on a task.")
        self._action_mode.action(self._scene, action)
        success, terminate = self._task.success()
        reward = float(success)
        if self._shaped_rewards:
            reward = self._task.reward()
            if reward is None:
                raise RuntimeError('User requested shaped rewards, but task %s does not have '
                                   'a defined reward() function.' % self._task.get_name())
        return self._scene.get_observation(), reward, terminate

    def get_demos(self, amount: int, live_demos: bool = False, image_paths: bool = False,
                  callable_each_step=None, max_attempts: int = 10, random_selection: bool = True,
                  from_episode_number: int = 0):
        if not live_demos and (self._dataset_root is None or len(self._dataset_root) == 0):
            raise RuntimeError("Can't ask for a stored demo when no dataset root provided.")
        record("get_demos", amount=amount, live_demos=live_demos)
        return [self._live_demo() for _ in range(amount)]

    def _live_demo(self) -> Demo:
        """The double's motion planner: straight to the target in SUCCESS_STEPS steps, closing the gripper
        on the last one, turning the hand about z on the way."""
        self.reset()
        scene = self._scene
        observations = [scene.get_observation()]
        start_pose, start_joints = scene.gripper_pose.copy(), scene.joint_positions.copy()
        goal_joints = start_joints + np.linspace(-0.3, 0.3, 7)
        for i in range(1, SUCCESS_STEPS + 1):
            f = i / SUCCESS_STEPS
            angle = 0.2 * f
            turn = np.array([0.0, 0.0, np.sin(angle / 2), np.cos(angle / 2)])  # about z, x y z w
            x, y, z, w = turn
            qx, qy, qz, qw = start_pose[3:]
            rotated = [w * qx + x * qw + y * qz - z * qy, w * qy - x * qz + y * qw + z * qx,
                       w * qz + x * qy - y * qx + z * qw, w * qw - x * qx - y * qy - z * qz]
            previous = scene.joint_positions
            scene.joint_positions = start_joints + f * (goal_joints - start_joints)
            scene.joint_velocities = (scene.joint_positions - previous) / 0.05
            scene.gripper_pose = np.concatenate([start_pose[:3] + f * (self._task.target - start_pose[:3]), rotated])
            scene.gripper_joints = np.full(2, 0.0 if i == SUCCESS_STEPS else 0.04)
            scene.step()
            observations.append(scene.get_observation())
        return Demo(observations)
