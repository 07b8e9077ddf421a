"""close_jar (PerAct's RLBench: rlbench/tasks/close_jar.py): put the lid on the jar of the variation's
colour (RLBench's 20 colours); the other jar has a distractor colour. As upstream, variation v's jar is
jar `v % 2`.

Success (as RLBench): nothing grasped and the lid detected by the region just above the chosen jar's top.
Departures: jars are cylinders and the lid a flat square box set down on the jar (upstream detects
the lid there, not that it is screwed on); the success region's size is ours (upstream's sensor lives in its
binary scene file). State: lid xyz + quaternion xyzw, then jar0's and jar1's xyz (a fixed order: the
chosen jar is the variation's `v % 2`).
Placement yaw: lid yaw ±π, jars round (upstream: the base ±0.6π, the lid fixed to it and round, the jars
±π on it): every yaw a square lid can show, as wide as upstream's; the spawn area (ours, the table's) does
not turn. Layouts the oracle cannot reach are drawn again."""

from __future__ import annotations

import math

import numpy as np

from ..scene import SCENERY, SPAWN_HIGH, SPAWN_LOW, TABLE_TOP_Z, Scene, axis_angle_quat, geom
from .base import (
    COLORS,
    Task,
    Waypoint,
    World,
    body_position,
    body_quat,
    body_yaw,
    pick_and_place,
    pick_colours,
    sample_apart,
    square_yaw,
    top_down_quat,
)
from .conditions import ConditionSet, DetectedCondition, NothingGrasped
from .objects import free_box, mocap_body, region

JARS = ("jar0", "jar1")  # variation v's is jar v % 2, as upstream's


class CloseJar(Task):
    name = "close_jar"
    variation_count = len(COLORS)
    JAR_RADIUS, JAR_HALF_HEIGHT = 0.035, 0.045
    LID_HALF = (0.03, 0.03, 0.01)

    def build(self, scene: Scene) -> None:
        jars = [mocap_body(scene.worldbody, name) for name in JARS]
        for name, jar in zip(JARS, jars):
            geom(jar, "cylinder", (0.5, 0.5, 0.5, 1.0), SCENERY, name=name,
                 size=(self.JAR_RADIUS, self.JAR_HALF_HEIGHT), pos=(0, 0, self.JAR_HALF_HEIGHT))
        for index, jar in enumerate(jars):  # upstream moves its one sensor onto the chosen jar
            region(jar, f"success{index}", radius=0.02, position=(0, 0, 2 * self.JAR_HALF_HEIGHT + self.LID_HALF[2]))
        free_box(scene.worldbody, "lid", self.LID_HALF, rgba=(0.75, 0.75, 0.78, 1.0), mass=0.05)

    def descriptions(self, variation: int) -> list[str]:
        colour = COLORS[variation][0]
        return [f"close the {colour} jar", f"screw on the {colour} jar lid",
                f"grasping the lid, lift it from the table and use it to seal the {colour} jar",
                f"pick up the lid from the table and put it on the {colour} jar"]

    def init_episode(self, world: World, variation: int, rng: np.random.Generator) -> None:
        positions = sample_apart(rng, len(JARS) + 1, SPAWN_LOW, SPAWN_HIGH, min_distance=0.15)
        colours = pick_colours(rng, variation, 1)  # the variation's colour first
        if variation % 2:
            colours.reverse()
        for name, xy, colour in zip(JARS, positions, colours):
            world.set_pose(name, (*xy, TABLE_TOP_Z))
            world.set_colour(name, colour)
        world.set_pose("lid", (*positions[-1], TABLE_TOP_Z + self.LID_HALF[2]),
                       axis_angle_quat((0, 0, 1), rng.uniform(-math.pi, math.pi)))

    def success(self, variation: int) -> ConditionSet:
        return ConditionSet([NothingGrasped(), DetectedCondition("lid", f"success{variation % 2}")])

    def low_dim_state(self, variation: int):
        return (body_position("lid"), body_quat("lid"), *(body_position(name) for name in JARS))

    def oracle(self, world: World, variation: int) -> list[Waypoint]:
        quat = top_down_quat(square_yaw(body_yaw(world.quat("lid")), math.pi / 2))
        drop = world.position(JARS[variation % 2]) + [0, 0, 2 * self.JAR_HALF_HEIGHT + self.LID_HALF[2] + 0.005]
        return pick_and_place(world.position("lid"), quat, drop)


TASK = CloseJar
