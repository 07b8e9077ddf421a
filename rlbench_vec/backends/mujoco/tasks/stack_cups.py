"""stack_cups (RLBench: rlbench/tasks/stack_cups.py): stack the other two cups on the cup of the
variation's colour (RLBench's 20 colours); the other two cups take colours other than the variation's,
each drawn on its own as RLBench does (they may match each other).

Success (as RLBench): cup1 and cup3 detected by the region over cup2 (the base) and nothing grasped.
Departures: the cups are solid cylinders (colliding as a box inside them) stacked on top of each other
rather than hollow cups nested in each other; the region is a column over the base cup. State: the three
cups' xyz (cup1, cup2, cup3)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ..scene import SPAWN_HIGH, SPAWN_LOW, TABLE_TOP_Z, Scene
from .base import COLORS, Task, Waypoint, World, body_position, pick_and_place, sample_apart, top_down_quat
from .conditions import ConditionSet, DetectedCondition, NothingGrasped
from .objects import held_cylinder, region

CUPS = ("cup1", "cup2", "cup3")  # cup2 is the base, in the variation's colour
BASE = "cup2"


class StackCups(Task):
    name = "stack_cups"
    variation_count = len(COLORS)
    RADIUS, HALF_HEIGHT = 0.028, 0.04
    GRASP_BELOW_TOP = 0.035  # the tool centre this far below a cup's top: fingers round its upper part
    # While a cup is held, the arm comes to rest at least this often (metres): in one long full-speed move (planning
    # mode's path per waypoint) the cup slides along the pads, 2 cm over the lift and carry, past the edge of the
    # base's top (its box is 2 cm from centre to side), and topples off; short moves never reach that speed.
    HELD_MOVE = 0.1

    def build(self, scene: Scene) -> None:
        for name in CUPS:
            cup = held_cylinder(scene.worldbody, name, self.RADIUS, self.HALF_HEIGHT)
            if name == BASE:
                column = 2 * self.HALF_HEIGHT
                region(cup, "success", half_size=(0.03, 0.03, column), position=(0, 0, self.HALF_HEIGHT + column))

    def descriptions(self, variation: int) -> list[str]:
        colour = COLORS[variation][0]
        return [f"stack the other cups on top of the {colour} cup", "place two of the cups onto the odd cup out",
                f"put the remaining two cups on top of the {colour} cup",
                f"pick up and set the cups down into the {colour} cup",
                f"create a stack of cups with the {colour} cup as its base",
                f"keeping the {colour} cup on the table, stack the other two onto it"]

    def init_episode(self, world: World, variation: int, rng: np.random.Generator) -> None:
        others = [i for i in range(len(COLORS)) if i != variation]
        colours = {"cup2": variation, "cup1": rng.choice(others), "cup3": rng.choice(others)}
        for name, xy in zip(CUPS, sample_apart(rng, len(CUPS), SPAWN_LOW, SPAWN_HIGH, min_distance=0.15)):
            world.set_pose(name, (*xy, TABLE_TOP_Z + self.HALF_HEIGHT))
            world.set_colour(name, COLORS[colours[name]][1])

    def success(self, variation: int) -> ConditionSet:
        return ConditionSet([DetectedCondition("cup1", "success"), DetectedCondition("cup3", "success"),
                             NothingGrasped()])

    def low_dim_state(self, variation: int):
        return tuple(body_position(name) for name in CUPS)

    def oracle(self, world: World, variation: int) -> list[Waypoint]:
        quat, grip = top_down_quat(0.0), np.array([0.0, 0.0, self.HALF_HEIGHT - self.GRASP_BELOW_TOP])
        base = world.position(BASE)
        waypoints: list[Waypoint] = []
        for level, name in enumerate(("cup1", "cup3"), start=1):
            drop = base + [0, 0, 2 * self.HALF_HEIGHT * level + 0.006]
            waypoints += pick_and_place(world.position(name) + grip, quat, drop + grip,
                                        clearance=0.1 + 2 * self.HALF_HEIGHT * level)
        return self._resting_while_held(waypoints)

    def _resting_while_held(self, waypoints: list[Waypoint]) -> list[Waypoint]:
        """The waypoints, with each move between two closed-gripper waypoints cut into pieces at most HELD_MOVE
        long along its straight line (each piece marked as the move's end)."""
        rested = waypoints[:1]
        for previous, waypoint in zip(waypoints, waypoints[1:]):
            if not (previous.gripper_open or waypoint.gripper_open):
                delta = waypoint.position - previous.position
                count = max(1, math.ceil(float(np.linalg.norm(delta)) / self.HELD_MOVE))
                rested += [replace(waypoint, position=previous.position + i / count * delta) for i in range(1, count)]
            rested.append(waypoint)
        return rested


TASK = StackCups
