"""close_drawer (RLBench: rlbench/tasks/close_drawer.py): close the bottom, middle or top drawer (the
variation, 3) of open_drawer's cabinet; the chosen drawer starts 0.1 m open, as in RLBench.

Success (as RLBench): the chosen drawer's joint moved more than 0.06 m from where the episode started it.
State: as open_drawer's (the three handles' xyz, the three drawers' openings). The oracle grasps the
handle as open_drawer's does and pushes it home.
Placement yaw: cabinet yaw ±π/8 (as upstream's base_rotation_bounds);
layouts the oracle cannot reach are drawn again."""

from __future__ import annotations

import numpy as np

from ..geometry import yaw_rotation
from .base import Waypoint, World, body_yaw
from .conditions import JointCondition
from .open_drawer import OPTIONS, OpenDrawer


class CloseDrawer(OpenDrawer):
    name = "close_drawer"
    START_OPENING = 0.1  # metres, RLBench's starting joint position
    SUCCESS_CLOSING = 0.06  # metres, RLBench's JointCondition

    def descriptions(self, variation: int) -> list[str]:
        option = OPTIONS[variation]
        return [f"close {option} drawer", f"shut the {option} drawer", f"slide the {option} drawer shut"]

    def init_episode(self, world: World, variation: int, rng: np.random.Generator) -> None:
        super().init_episode(world, variation, rng)
        world.set_joint(f"drawer_{OPTIONS[variation]}", self.START_OPENING)

    def success(self, variation: int) -> JointCondition:
        return JointCondition(f"drawer_{OPTIONS[variation]}", self.SUCCESS_CLOSING)

    def oracle(self, world: World, variation: int) -> list[Waypoint]:
        grasp = super().oracle(world, variation)[:3]  # approach, reach the handle, close the fingers on it
        pull = yaw_rotation(body_yaw(world.quat("cabinet"))) @ np.array([-1.0, 0.0, 0.0])
        handle = grasp[-1]
        return [*grasp, Waypoint(handle.position - (self.START_OPENING - 0.01) * pull, handle.quat, False,
                                 straight=True)]


TASK = CloseDrawer
