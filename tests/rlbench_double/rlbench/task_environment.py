import logging
import os

import numpy as np
from double_log import record

from rlbench import utils
from rlbench.backend.exceptions import BoundaryError, TaskEnvironmentError

_MAX_RESET_ATTEMPTS = 40
_MAX_DEMO_ATTEMPTS = 10
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
        self._static_positions = static_positions
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
        place_demo = demo is not None and getattr(demo, 'num_reset_attempts', None) is not None
        desc = self._scene.init_episode(
            self._variation_number,
            max_attempts=demo.num_reset_attempts if place_demo else _MAX_RESET_ATTEMPTS,
            randomly_place=not self._static_positions, place_demo=place_demo)
        self._reset_called = True
        record("reset", variation=self._variation_number, ok=True, demo=demo is not None)
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
                  callable_each_step=None, max_attempts: int = _MAX_DEMO_ATTEMPTS, random_selection: bool = True,
                  from_episode_number: int = 0):
        if not live_demos and (self._dataset_root is None or len(self._dataset_root) == 0):
            raise RuntimeError("Can't ask for a stored demo when no dataset root provided.")
        record("get_demos", amount=amount, live_demos=live_demos, image_paths=image_paths,
               random_selection=random_selection, from_episode_number=from_episode_number,
               variation=self._variation_number)
        if not live_demos:
            return utils.get_stored_demos(
                amount, image_paths, self._dataset_root, self._variation_number, self._task.get_name(),
                self._obs_config, random_selection, from_episode_number)
        return self._get_live_demos(amount, callable_each_step, max_attempts)

    def _get_live_demos(self, amount: int, callable_each_step=None, max_attempts: int = _MAX_DEMO_ATTEMPTS):
        demos = []
        for _ in range(amount):
            attempts = max_attempts
            while attempts > 0:
                random_seed = np.random.get_state()
                self.reset()
                try:
                    demo = self._scene.get_demo(callable_each_step=callable_each_step)
                    demo.random_seed = random_seed
                    demos.append(demo)
                    break
                except Exception as e:
                    attempts -= 1
                    logging.info('Bad demo. ' + str(e))
            if attempts <= 0:
                raise RuntimeError('Could not collect demos. Maybe a problem with the task?')
        return demos

    def reset_to_demo(self, demo):
        demo.restore_state()
        variation_index = demo._observations[0].misc["variation_index"]
        self.set_variation(variation_index)
        return self.reset(demo)
