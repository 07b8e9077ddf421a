"""Upstream's empty_container in miniature, for the oracle: ITEMS items carried one at a time onto a drop point,
through upstream's waypoint machinery. waypoint0 (above the container, skipped after the first pass), waypoint1
(a start ability moves it onto the next item left; 'close_gripper()'), waypoint2 (a predefined path over to the
drop), waypoint3 (the drop; 'open_gripper()'; an end ability counts the pass); the waypoints repeat while items
are left. Success: every item released at the drop."""

from typing import List

import numpy as np
from pyrep.objects.cartesian_path import CartesianPath
from pyrep.objects.dummy import Dummy

from rlbench.backend.task import Task
from rlbench.backend.waypoints import Point, PredefinedPath
from rlbench.tasks.reach_target import COLORS

ITEMS = 2
DOWN = [0.0, 1.0, 0.0, 0.0]  # the hand pointing down (x, y, z, w): the double's start orientation
DOWN_EULER = [0.0, np.pi, 0.0]
DROP_RADIUS = 0.01


class EmptyContainer(Task):

    def init_episode(self, index: int) -> List[str]:
        super().init_episode(index)
        self.items = [Dummy() for _ in range(ITEMS)]
        for item in self.items:
            item.set_position(np.random.uniform([0.1, -0.2, 0.8], [0.3, 0.2, 0.85]))
        self.items_not_done = list(self.items)
        self.register_graspable_objects(self.items)
        drop = np.array([0.4, 0.25, 0.9])
        self.passes = 0
        above = Dummy([0.2, 0.0, 1.1], DOWN)
        grasp = Dummy(quaternion=DOWN, extension='close_gripper()')
        carry = CartesianPath([0.2, 0.0, 1.0], drop + [0.0, 0.0, 0.1], DOWN_EULER)
        release = Dummy(drop, DOWN, extension='open_gripper()')
        self._waypoints = [Point(above, self.robot, start_of_path_func=self._above_once),
                           Point(grasp, self.robot, start_of_path_func=self._onto_next_item),
                           PredefinedPath(carry, self.robot),
                           Point(release, self.robot, end_of_path_func=self._count_pass)]
        self.register_waypoints_should_repeat(lambda: len(self.items_not_done) > 0)
        self.drop = drop
        return ['empty the container in the to %s container' % COLORS[index]]

    def variation_count(self) -> int:
        return len(COLORS)

    def _above_once(self, waypoint) -> None:
        waypoint.skip = self.passes > 0

    def _count_pass(self, waypoint) -> None:
        self.passes += 1

    def _onto_next_item(self, waypoint) -> None:
        waypoint.get_waypoint_object().set_position(self.items_not_done[0].get_position())

    def step(self) -> None:
        for item in list(self.items_not_done):
            if item not in self.robot.grasped and np.linalg.norm(item.get_position() - self.drop) < DROP_RADIUS:
                self.items_not_done.remove(item)

    def success(self):
        done = not self.items_not_done and not self.robot.grasped
        return done, done
