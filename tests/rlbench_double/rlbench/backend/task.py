import re
from os.path import abspath, dirname, join

import numpy as np

TASKS_PATH = join(dirname(abspath(__file__)), '../tasks')
SUCCESS_STEPS = 5  # the double's tasks succeed on the 5th step of an episode


class Task(object):

    def __init__(self, pyrep, robot, name: str = None):
        self.pyrep = pyrep
        self.name = name if name else re.sub('(?<!^)(?=[A-Z])', '_', self.__class__.__name__).lower()
        self.robot = robot  # the double's Scene
        self.target = np.zeros(3)
        self._waypoints = []  # upstream finds dummies named waypoint0, waypoint1, ... in the scene
        self._waypoint_abilities_start = {}
        self._waypoint_abilities_end = {}
        self._waypoints_should_repeat = lambda: False
        self._graspable_objects = []

    def get_name(self) -> str:
        return self.name

    def init_episode(self, index: int):
        self.target = np.random.uniform([0.1, -0.3, 0.8], [0.4, 0.3, 1.2])
        return ['%s, variation %d' % (self.name.replace('_', ' '), index)]

    def variation_count(self) -> int:
        raise NotImplementedError

    def success(self):
        done = self.robot.episode_steps >= SUCCESS_STEPS
        return done, np.all([done])

    def get_low_dim_state(self) -> np.ndarray:
        # upstream: the poses of the scene's objects; the double pretends its scene has 17 values
        return np.arange(17, dtype=np.float64)

    def reward(self):
        return None

    def decorate_observation(self, observation):
        return observation

    def step(self) -> None:
        pass

    def register_waypoint_ability_start(self, waypoint_index: int, func) -> None:
        self._waypoint_abilities_start[waypoint_index] = func

    def register_waypoint_ability_end(self, waypoint_index: int, func) -> None:
        self._waypoint_abilities_end[waypoint_index] = func

    def register_waypoints_should_repeat(self, func) -> None:
        self._waypoints_should_repeat = func

    def register_graspable_objects(self, objects) -> None:
        self._graspable_objects = objects

    def get_graspable_objects(self):
        return self._graspable_objects

    def get_waypoints(self):
        return self._waypoints

    def should_repeat_waypoints(self):
        return self._waypoints_should_repeat()
