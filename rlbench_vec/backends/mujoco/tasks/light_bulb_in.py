"""light_bulb_in (PerAct's RLBench: rlbench/tasks/light_bulb_in.py): take the bulb from the holder of the
variation's colour (RLBench's 20 colours; the other holder has a distractor colour) and put it into the lamp.
As upstream, variation v's holder is holder `v % 2`.

Success (as RLBench): nothing grasped and the chosen bulb detected by the lamp's socket region. As
upstream's step(), the chosen bulb's glass turns yellow once it is detected there (held or not), white
again at the next episode. Departures: bulbs are small boxes (the glass) resting on cylindrical holders,
the lamp a cylinder with a socket cup; the bulb is set into the socket, not screwed in. State: bulb0's and
bulb1's xyz, then the lamp's xyz (a fixed order: the chosen bulb is the variation's `v % 2`).
Placement yaw: bulbs ±π, holders and lamp round (upstream: base ±π, holders ±π on it): as wide as
upstream's; the spawn area (ours, the table's) does not turn. Layouts the oracle cannot reach are drawn
again."""

from __future__ import annotations

import math

import numpy as np

from ..scene import SCENERY, SPAWN_HIGH, SPAWN_LOW, TABLE_TOP_Z, Scene, axis_angle_quat, geom
from .base import (
    COLORS,
    Indicator,
    Task,
    Waypoint,
    World,
    body_position,
    body_yaw,
    pick_and_place,
    pick_colours,
    sample_apart,
    square_yaw,
    top_down_quat,
)
from .conditions import ConditionSet, DetectedCondition, NothingGrasped
from .objects import free_box, mocap_body, region

HOLDERS = ("holder0", "holder1")  # variation v's is holder v % 2, as upstream's
BULBS = ("bulb0", "bulb1")
GLASS_WHITE, GLASS_LIT = (1.0, 1.0, 1.0), (1.0, 1.0, 0.0)  # upstream's bulb glass before and once in the lamp


def chosen(variation: int) -> int:
    """The index of the variation's holder and bulb."""
    return variation % 2


class LightBulbIn(Task):
    name = "light_bulb_in"
    variation_count = len(COLORS)
    HOLDER_RADIUS, HOLDER_HALF_HEIGHT = 0.03, 0.02
    LAMP_RADIUS, LAMP_HALF_HEIGHT = 0.045, 0.05
    BULB_HALF = (0.018, 0.018, 0.025)

    def build(self, scene: Scene) -> None:
        for name in HOLDERS:
            holder = mocap_body(scene.worldbody, name)
            geom(holder, "cylinder", (0.5, 0.5, 0.5, 1.0), SCENERY, name=name,
                 size=(self.HOLDER_RADIUS, self.HOLDER_HALF_HEIGHT), pos=(0, 0, self.HOLDER_HALF_HEIGHT))
        lamp = mocap_body(scene.worldbody, "lamp")
        geom(lamp, "cylinder", (0.2, 0.2, 0.25, 1.0), SCENERY, name="lamp",
             size=(self.LAMP_RADIUS, self.LAMP_HALF_HEIGHT), pos=(0, 0, self.LAMP_HALF_HEIGHT))
        region(lamp, "success", radius=0.02, position=(0, 0, 2 * self.LAMP_HALF_HEIGHT + self.BULB_HALF[2]))
        for name in BULBS:
            free_box(scene.worldbody, name, self.BULB_HALF, rgba=(*GLASS_WHITE, 1.0), mass=0.03)

    def descriptions(self, variation: int) -> list[str]:
        colour = COLORS[variation][0]
        return [f"screw in the {colour} light bulb", f"screw the light bulb from the {colour} holder into the lamp",
                f"pick up the light bulb from the {colour} stand, lift it up to just above the lamp, then screw it "
                "down into the lamp in a clockwise fashion",
                f"put the light bulb from the {colour} casing into the lamp"]

    def init_episode(self, world: World, variation: int, rng: np.random.Generator) -> None:
        positions = sample_apart(rng, len(HOLDERS) + 1, SPAWN_LOW, SPAWN_HIGH, min_distance=0.15)
        colours = pick_colours(rng, variation, 1)  # the variation's colour first
        if chosen(variation):
            colours.reverse()
        for holder, bulb, xy, colour in zip(HOLDERS, BULBS, positions, colours):
            world.set_pose(holder, (*xy, TABLE_TOP_Z))
            world.set_colour(holder, colour)
            world.set_colour(bulb, GLASS_WHITE)
            world.set_pose(bulb, (*xy, TABLE_TOP_Z + 2 * self.HOLDER_HALF_HEIGHT + self.BULB_HALF[2]),
                           axis_angle_quat((0, 0, 1), rng.uniform(-math.pi, math.pi)))
        world.set_pose("lamp", (*positions[-1], TABLE_TOP_Z))

    def success(self, variation: int) -> ConditionSet:
        return ConditionSet([self.in_lamp(variation), NothingGrasped()])

    def in_lamp(self, variation: int) -> DetectedCondition:
        return DetectedCondition(BULBS[chosen(variation)], "success")

    def indicators(self, variation: int) -> tuple[Indicator, ...]:
        return (Indicator(self.in_lamp(variation), (BULBS[chosen(variation)],), GLASS_LIT),)

    def low_dim_state(self, variation: int):
        return (*(body_position(name) for name in BULBS), body_position("lamp"))

    def oracle(self, world: World, variation: int) -> list[Waypoint]:
        bulb = BULBS[chosen(variation)]
        quat = top_down_quat(square_yaw(body_yaw(world.quat(bulb)), math.pi / 2))
        drop = world.position("lamp") + [0, 0, 2 * self.LAMP_HALF_HEIGHT + self.BULB_HALF[2] + 0.005]
        return pick_and_place(world.position(bulb), quat, drop)


TASK = LightBulbIn
