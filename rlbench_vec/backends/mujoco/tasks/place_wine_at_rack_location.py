"""place_wine_at_rack_location (PerAct's RLBench fork, MohitShridhar/RLBench branch `peract`:
rlbench/tasks/place_wine_at_rack_location.py): put the wine bottle in the middle, left or right place of the
rack (the variation, 3, in the fork's order).

Success (as RLBench): the bottle detected at the chosen place and nothing grasped.
Placement: the rack turns ±π/4, upstream's `base_rotation_bounds` ([0, 0, -np.pi / 4.], [0, 0, np.pi / 4.]),
so its left place stays on the robot's left of the middle one; the bottle stands with yaw ±π in the table's
spawn area, clear of the rack (upstream's bottle lies in its scene file, on the base).
Departures: the rack is a tray of three slots between dividers (left is +y in the rack's frame), and the
bottle goes in standing up rather than lying down; the bottle is a cylinder with a neck, colliding as a box
inside its body (flat pads squeeze a cylinder out). State: bottle xyz + quaternion xyzw, the three places'
centres."""

from __future__ import annotations

import math

import numpy as np

from ..scene import SCENERY, SPAWN_HIGH, SPAWN_LOW, TABLE_TOP_Z, VISUAL, Scene, axis_angle_quat, geom
from .base import (
    Task,
    Waypoint,
    World,
    body_position,
    body_quat,
    body_yaw,
    pick_and_place,
    site_position,
    square_yaw,
    top_down_quat,
)
from .conditions import ConditionSet, DetectedCondition, NothingGrasped
from .objects import held_cylinder, mocap_body, region

LOCATIONS = ("middle", "left", "right")
SLOT_Y = {"middle": 0.0, "left": 0.11, "right": -0.11}  # rack frame


class PlaceWineAtRackLocation(Task):
    name = "place_wine_at_rack_location"
    variation_count = len(LOCATIONS)
    RADIUS, HALF_HEIGHT, NECK = 0.035, 0.09, 0.05
    GRASP_BELOW_TOP = 0.03  # of the bottle's body
    TRAY_HALF = (0.07, 0.17, 0.005)
    DIVIDER_HEIGHT = 0.06
    YAW_BOUND = math.pi / 4  # upstream's base_rotation_bounds

    def build(self, scene: Scene) -> None:
        green = (0.1, 0.35, 0.15, 1.0)
        bottle = held_cylinder(scene.worldbody, "wine_bottle", self.RADIUS, self.HALF_HEIGHT, green, mass=0.1)
        geom(bottle, "cylinder", green, VISUAL, size=(0.012, self.NECK / 2), mass="0.001",
             pos=(0, 0, self.HALF_HEIGHT + self.NECK / 2))
        wood = (0.55, 0.38, 0.25, 1.0)
        rack = mocap_body(scene.worldbody, "rack")
        half = self.TRAY_HALF
        geom(rack, "box", wood, SCENERY, size=half, pos=(0, 0, half[2]))
        for y in (-0.165, -0.055, 0.055, 0.165):
            geom(rack, "box", wood, SCENERY, size=(half[0], 0.005, self.DIVIDER_HEIGHT / 2),
                 pos=(0, y, self.DIVIDER_HEIGHT / 2))
        for location in LOCATIONS:
            region(rack, f"success_{location}", half_size=(0.04, 0.04, 0.05),
                   position=(0, SLOT_Y[location], 2 * half[2] + self.HALF_HEIGHT))

    def descriptions(self, variation: int) -> list[str]:
        location = LOCATIONS[variation]
        return [f"stack the wine bottle to the {location} of the rack",
                f"slide the bottle onto the {location} part of the rack", f"put the wine on the {location}",
                f"leave the wine on the {location} section of the shelf",
                f"grasp the bottle and put it away on the {location}"]

    def init_episode(self, world: World, variation: int, rng: np.random.Generator) -> None:
        rack = np.array([rng.uniform(0.3, 0.35), rng.uniform(-0.12, 0.12), TABLE_TOP_Z])
        world.set_pose("rack", rack, axis_angle_quat((0, 0, 1), rng.uniform(-self.YAW_BOUND, self.YAW_BOUND)))
        while True:  # the bottle clear of the rack
            xy = rng.uniform(SPAWN_LOW, SPAWN_HIGH - [0.15, 0.0])
            if np.linalg.norm(xy - rack[:2]) > 0.25:
                break
        world.set_pose("wine_bottle", (*xy, TABLE_TOP_Z + self.HALF_HEIGHT),
                       axis_angle_quat((0, 0, 1), rng.uniform(-math.pi, math.pi)))

    def success(self, variation: int) -> ConditionSet:
        return ConditionSet([DetectedCondition("wine_bottle", f"success_{LOCATIONS[variation]}"), NothingGrasped()])

    def low_dim_state(self, variation: int):
        return (body_position("wine_bottle"), body_quat("wine_bottle"),
                *(site_position(f"success_{location}") for location in LOCATIONS))

    def oracle(self, world: World, variation: int) -> list[Waypoint]:
        quat = top_down_quat(square_yaw(body_yaw(world.quat("wine_bottle")), math.pi))  # fingers on the flat sides
        grip = np.array([0.0, 0.0, self.HALF_HEIGHT - self.GRASP_BELOW_TOP])
        place = world.site_position(f"success_{LOCATIONS[variation]}")
        drop = np.array([place[0], place[1], TABLE_TOP_Z + 2 * self.TRAY_HALF[2] + self.HALF_HEIGHT + 0.01])
        return pick_and_place(world.position("wine_bottle") + grip, quat, drop + grip,
                              clearance=self.DIVIDER_HEIGHT + 0.08)


TASK = PlaceWineAtRackLocation
