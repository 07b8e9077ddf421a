"""pick_up_cup (RLBench: rlbench/tasks/pick_up_cup.py): pick up the cup of the variation's colour (RLBench's
20 colours) and lift it; a second cup has another colour.

Success (as RLBench): the cup grasped and no longer detected by the region where it stood (RLBench's
negated DetectedCondition). Departures: the cups are solid cylinders. State: the two cups' xyz (the chosen
one first).
Placement yaw: none, the cups being round (upstream: base ±π, the cups and detector ±π on it): nothing
a yaw would change; the spawn area (ours, the table's) does not turn. Layouts the oracle cannot reach are
drawn again."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np

from ..scene import SCENERY, SPAWN_HIGH, SPAWN_LOW, TABLE_TOP_Z, Scene, geom
from .base import COLORS, Task, Waypoint, World, body_position, pick_colours, sample_apart, top_down_quat
from .conditions import ConditionSet, DetectedCondition, GraspedCondition
from .objects import FRICTION, mocap_body, region

CUPS = ("cup0", "cup1")  # cup0 is the variation's


class PickUpCup(Task):
    name = "pick_up_cup"
    variation_count = len(COLORS)
    RADIUS, HALF_HEIGHT = 0.028, 0.045

    def build(self, scene: Scene) -> None:
        for name in CUPS:
            cup = ET.SubElement(scene.worldbody, "body", name=name, pos="0 0 1")
            ET.SubElement(cup, "freejoint", name=name)
            geom(cup, "cylinder", (1.0, 0.0, 0.0, 1.0), SCENERY, name=name, size=(self.RADIUS, self.HALF_HEIGHT),
                 mass="0.05", friction=FRICTION, condim="4")
        start = mocap_body(scene.worldbody, "start")  # where the chosen cup stands at the episode's start
        region(start, "success", half_size=(0.05, 0.05, self.HALF_HEIGHT + 0.02), position=(0, 0, self.HALF_HEIGHT))

    def descriptions(self, variation: int) -> list[str]:
        colour = COLORS[variation][0]
        return [f"pick up the {colour} cup", f"grasp the {colour} cup and lift it", f"lift the {colour} cup"]

    def init_episode(self, world: World, variation: int, rng: np.random.Generator) -> None:
        positions = sample_apart(rng, len(CUPS), SPAWN_LOW, SPAWN_HIGH, min_distance=0.15)
        for name, xy, colour in zip(CUPS, positions, pick_colours(rng, variation, 1)):
            world.set_pose(name, (*xy, TABLE_TOP_Z + self.HALF_HEIGHT))
            world.set_colour(name, colour)
        world.set_pose("start", (*positions[0], TABLE_TOP_Z))

    def success(self, variation: int) -> ConditionSet:
        return ConditionSet([DetectedCondition("cup0", "success", negated=True), GraspedCondition("cup0")])

    def low_dim_state(self, variation: int):
        return tuple(body_position(name) for name in CUPS)

    def oracle(self, world: World, variation: int) -> list[Waypoint]:
        cup, quat = world.position("cup0"), top_down_quat(0.0)
        grasp = cup + [0, 0, self.HALF_HEIGHT - 0.02]  # fingers round the cup's upper part
        return [
            Waypoint(grasp + [0, 0, 0.1], quat, True),
            Waypoint(grasp, quat, True, straight=True),
            Waypoint(grasp, quat, False),
            Waypoint(grasp + [0, 0, 0.2], quat, False, straight=True),
        ]


TASK = PickUpCup
