"""meat_off_grill (PerAct's RLBench fork, MohitShridhar/RLBench branch `peract`:
rlbench/tasks/meat_off_grill.py): take the chicken or the steak (the variation, 2) off the grill and set it
down beside it.

Success (as RLBench): nothing grasped and the chosen piece detected by the region beside the grill.
Placement: the file has no `base_rotation_bounds`, so its base turns Task's default ±3.14; here the assembly
(grill, meat, region) turns ±3.14 about its middle. Layouts the oracle cannot execute are drawn again (the
reset's check solves each straight move's pieces as the oracle gives them).
Departures: the grill is a dark box, the chicken and steak flat boxes of their colours lying on it (each
turned up to ±0.2 rad on it), the region at a fixed offset to the grill's side. State: chicken xyz +
quaternion xyzw, steak xyz + quaternion xyzw, the region's xyz."""

from __future__ import annotations

import math

import numpy as np

from ..scene import SCENERY, TABLE_TOP_Z, VISUAL, Scene, axis_angle_quat, geom
from .base import (
    DEFAULT_YAW,
    Task,
    Waypoint,
    World,
    base_offset,
    body_position,
    body_quat,
    body_yaw,
    pick_and_place,
    site_position,
    square_yaw,
    top_down_quat,
)
from .conditions import ConditionSet, DetectedCondition, NothingGrasped
from .objects import free_box, mocap_body, region

MEAT = (("chicken", (0.85, 0.62, 0.4, 1.0)), ("steak", (0.45, 0.1, 0.08, 1.0)))


class MeatOffGrill(Task):
    name = "meat_off_grill"
    variation_count = len(MEAT)
    GRILL_HALF = (0.1, 0.16, 0.03)
    MEAT_HALF = (0.045, 0.025, 0.012)  # grasped across its 5 cm width
    MEAT_Y = (-0.07, 0.07)  # on the grill, grill frame
    SIDE = (0.0, 0.32)  # the region's centre from the grill's, grill frame
    SIDE_HALF = (0.07, 0.07, 0.04)

    def build(self, scene: Scene) -> None:
        grill = mocap_body(scene.worldbody, "grill")
        geom(grill, "box", (0.15, 0.15, 0.15, 1.0), SCENERY, name="grill", size=self.GRILL_HALF,
             pos=(0, 0, self.GRILL_HALF[2]))
        geom(grill, "box", (0.55, 0.55, 0.6, 1.0), VISUAL, size=(*self.SIDE_HALF[:2], 0.001),
             pos=(*self.SIDE, 0.001))  # a plate marking where the meat goes
        region(grill, "success", half_size=self.SIDE_HALF, position=(*self.SIDE, self.SIDE_HALF[2]))
        for name, rgba in MEAT:
            free_box(scene.worldbody, name, self.MEAT_HALF, rgba=rgba, mass=0.05)

    def descriptions(self, variation: int) -> list[str]:
        meat = MEAT[variation][0]
        return [f"take the {meat} off the grill", f"pick up the {meat} and place it next to the grill",
                f"remove the {meat} from the grill and set it down to the side"]

    def init_episode(self, world: World, variation: int, rng: np.random.Generator) -> None:
        yaw = rng.uniform(-DEFAULT_YAW, DEFAULT_YAW)
        middle = np.array([rng.uniform(0.1, 0.2), rng.uniform(-0.1, 0.1), TABLE_TOP_Z])
        grill = middle - base_offset(yaw, np.array(self.SIDE) / 2)  # the assembly turns about its middle
        world.set_pose("grill", grill, axis_angle_quat((0, 0, 1), yaw))
        for (name, _), y in zip(MEAT, self.MEAT_Y):
            position = grill + base_offset(yaw, (0, y)) + [0, 0, 2 * self.GRILL_HALF[2] + self.MEAT_HALF[2]]
            world.set_pose(name, position, axis_angle_quat((0, 0, 1), yaw + rng.uniform(-0.2, 0.2)))

    def success(self, variation: int) -> ConditionSet:
        return ConditionSet([NothingGrasped(), DetectedCondition(MEAT[variation][0], "success")])

    def low_dim_state(self, variation: int):
        return (body_position("chicken"), body_quat("chicken"), body_position("steak"), body_quat("steak"),
                site_position("success"))

    def oracle(self, world: World, variation: int) -> list[Waypoint]:
        meat = MEAT[variation][0]
        yaw = square_yaw(body_yaw(world.quat(meat)), math.pi)  # fingers across the piece's width (its y axis)
        side = world.site_position("success")
        down = np.array([side[0], side[1], TABLE_TOP_Z + self.MEAT_HALF[2] + 0.005])
        return pick_and_place(world.position(meat), top_down_quat(yaw), down)


TASK = MeatOffGrill
