"""take_lid_off_saucepan (RLBench: rlbench/tasks/take_lid_off_saucepan.py): lift the lid off the saucepan
by its knob (1 variation).

Success (as RLBench): the lid grasped and detected by the region above the pan. Departures: the pan is
a cylinder, the lid a flat cylinder with a box knob; the pan is placed at random with any yaw. State: lid
xyz + quaternion xyzw, then the pan's xyz. Shaped reward (upstream's reward()): minus the tool centre's
distance to the lid, minus the lid's distance to the success region's centre (the lid: its body's origin,
the disc's centre; upstream: its grasp-point shape's).
Placement yaw: the lid (with its knob) ±π, the pan round: upstream's base ±π. Layouts the oracle cannot
reach are drawn again."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import numpy as np

from ..scene import SCENERY, SPAWN_HIGH, SPAWN_LOW, TABLE_TOP_Z, Scene, axis_angle_quat, geom
from .base import (
    TIP,
    ShapedReward,
    Task,
    Waypoint,
    World,
    body_position,
    body_quat,
    body_yaw,
    site_position,
    square_yaw,
    top_down_quat,
)
from .conditions import ConditionSet, DetectedCondition, GraspedCondition
from .objects import FRICTION, mocap_body, region


class TakeLidOffSaucepan(Task):
    name = "take_lid_off_saucepan"
    variation_count = 1
    PAN_RADIUS, PAN_HALF_HEIGHT = 0.08, 0.04
    LID_RADIUS, LID_HALF_HEIGHT = 0.085, 0.006
    KNOB_HALF = (0.012, 0.012, 0.015)
    LIFT = 0.15  # the region's centre above the pan's rim

    def build(self, scene: Scene) -> None:
        pan = mocap_body(scene.worldbody, "saucepan")
        geom(pan, "cylinder", (0.35, 0.35, 0.38, 1.0), SCENERY, name="saucepan",
             size=(self.PAN_RADIUS, self.PAN_HALF_HEIGHT), pos=(0, 0, self.PAN_HALF_HEIGHT))
        region(pan, "success", radius=0.05, position=(0, 0, 2 * self.PAN_HALF_HEIGHT + self.LIFT))
        lid = ET.SubElement(scene.worldbody, "body", name="lid", pos="0 0 1")
        ET.SubElement(lid, "freejoint", name="lid")
        geom(lid, "cylinder", (0.6, 0.6, 0.65, 1.0), SCENERY, name="lid", size=(self.LID_RADIUS, self.LID_HALF_HEIGHT),
             mass="0.05")
        geom(lid, "box", (0.1, 0.1, 0.1, 1.0), SCENERY, name="lid_knob", size=self.KNOB_HALF, mass="0.01",
             pos=(0, 0, self.LID_HALF_HEIGHT + self.KNOB_HALF[2]), friction=FRICTION, condim="4")

    def descriptions(self, variation: int) -> list[str]:
        return ["take lid off the saucepan", "using the handle, lift the lid off of the pan",
                "remove the lid from the pan", "grip the saucepan's lid and remove it from the pan",
                "leave the pan open", "uncover the saucepan"]

    def init_episode(self, world: World, variation: int, rng: np.random.Generator) -> None:
        xy = rng.uniform(SPAWN_LOW + 0.05, SPAWN_HIGH - 0.05)
        world.set_pose("saucepan", (*xy, TABLE_TOP_Z))
        world.set_pose("lid", (*xy, TABLE_TOP_Z + 2 * self.PAN_HALF_HEIGHT + self.LID_HALF_HEIGHT),
                       axis_angle_quat((0, 0, 1), rng.uniform(-math.pi, math.pi)))

    def success(self, variation: int) -> ConditionSet:
        return ConditionSet([GraspedCondition("lid"), DetectedCondition("lid", "success")])

    def low_dim_state(self, variation: int):
        return (body_position("lid"), body_quat("lid"), body_position("saucepan"))

    def reward(self, variation: int) -> ShapedReward:
        lid = body_position("lid")
        return ShapedReward((lid, TIP), (lid, site_position("success")))

    def oracle(self, world: World, variation: int) -> list[Waypoint]:
        quat = top_down_quat(square_yaw(body_yaw(world.quat("lid")), math.pi / 2))
        knob = world.position("lid") + [0, 0, self.LID_HALF_HEIGHT + self.KNOB_HALF[2]]
        target = world.site_position("success")
        lifted = target + (knob - world.position("lid"))  # the lid's centre at the region's
        return [
            Waypoint(knob + [0, 0, 0.1], quat, True),
            Waypoint(knob, quat, True, straight=True),
            Waypoint(knob, quat, False),
            Waypoint(lifted, quat, False, straight=True),
        ]


TASK = TakeLidOffSaucepan
