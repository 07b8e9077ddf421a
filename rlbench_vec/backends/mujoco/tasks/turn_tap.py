"""turn_tap (PerAct's RLBench: rlbench/tasks/turn_tap.py): turn the left or the right tap (the variation,
2) of a faucet.

Success (as RLBench): the chosen tap's joint turned more than 1.57 rad from where the episode started it.
Departures: the faucet is a box with two taps, each a lever on a vertical hinge. State: the two levers'
xyz, then the two taps' angles (rad).
Placement yaw: faucet yaw ±π, as upstream's base (the left tap is the faucet's left, so it can be on either
side of the robot); layouts the oracle cannot reach are drawn again. The oracle grasps the lever across,
a gripper yaw that repeats every half turn: it takes the one whose turn sweeps the middle of the wrist's
range where the lever stands."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import numpy as np

from ..scene import ARTICULATED, ROBOT_BASE, SCENERY, TABLE_TOP_Z, Scene, axis_angle_quat, fmt, geom
from .base import Task, Waypoint, World, body_yaw, geom_position, joint_position, top_down_quat
from .conditions import JointCondition
from .objects import mocap_body

OPTIONS = ("left", "right")


class TurnTap(Task):
    name = "turn_tap"
    variation_count = len(OPTIONS)
    TURNED = 1.57  # rad, RLBench's JointCondition
    TURN = 1.85  # rad the oracle turns
    TURN_STEP = 0.25  # rad per oracle waypoint
    BASE_HALF = (0.05, 0.16, 0.05)
    TAP_Y = (0.09, -0.09)  # left, right (as the robot sees them), faucet frame
    LEVER_HALF = (0.05, 0.011, 0.011)
    LEVER_Z = 0.13  # above the table
    START_YAW = -0.95  # the levers' yaw at joint 0 (plus the faucet's)
    # The top-down gripper's yaw at which the wrist (joint 7) is mid-range, less the lever's azimuth from the
    # robot base, then half the turn back: the grasp yaw whose turn is centred in the wrist's range.
    WRIST_MIDDLE = math.pi / 4 - TURN / 2

    def build(self, scene: Scene) -> None:
        faucet = mocap_body(scene.worldbody, "faucet")
        geom(faucet, "box", (0.7, 0.7, 0.75, 1.0), SCENERY, size=self.BASE_HALF, pos=(0, 0, self.BASE_HALF[2]))
        for option, y in zip(OPTIONS, self.TAP_Y):
            tap = ET.SubElement(faucet, "body", name=f"tap_{option}", pos=fmt([0, y, self.LEVER_Z]),
                                quat=fmt(axis_angle_quat((0, 0, 1), self.START_YAW)))
            ET.SubElement(tap, "joint", name=f"tap_{option}", type="hinge", axis="0 0 1", range="-0.5 3",
                          damping="0.2", armature="0.01")
            stem_half = (self.LEVER_Z - 2 * self.BASE_HALF[2]) / 2
            geom(tap, "cylinder", (0.8, 0.8, 0.85, 1.0), ARTICULATED, size=(0.012, stem_half), pos=(0, 0, -stem_half),
                 mass="0.02")
            geom(tap, "box", (0.2, 0.4, 0.9, 1.0) if option == "left" else (0.9, 0.2, 0.2, 1.0), ARTICULATED,
                 name=f"lever_{option}", size=self.LEVER_HALF, mass="0.02", friction=(1.5, 0.01, 0.0005))

    def descriptions(self, variation: int) -> list[str]:
        option = OPTIONS[variation]
        return [f"turn {option} tap", f"rotate the {option} tap", f"grasp the {option} tap and turn it"]

    def init_episode(self, world: World, variation: int, rng: np.random.Generator) -> None:
        centre = (rng.uniform(0.15, 0.25), rng.uniform(-0.1, 0.1), TABLE_TOP_Z)
        world.set_pose("faucet", centre, axis_angle_quat((0, 0, 1), rng.uniform(-math.pi, math.pi)))
        for option in OPTIONS:
            world.set_joint(f"tap_{option}", 0.0)

    def success(self, variation: int) -> JointCondition:
        return JointCondition(f"tap_{OPTIONS[variation]}", self.TURNED)

    def low_dim_state(self, variation: int):
        return (*(geom_position(f"lever_{o}") for o in OPTIONS), *(joint_position(f"tap_{o}") for o in OPTIONS))

    def oracle(self, world: World, variation: int) -> list[Waypoint]:
        lever = world.geom_position(f"lever_{OPTIONS[variation]}")
        # fingers close across the lever: the gripper's yaw is the lever's, or half a turn on
        lever_yaw = body_yaw(world.quat("faucet")) + self.START_YAW
        middle = math.atan2(lever[1] - ROBOT_BASE[1], lever[0] - ROBOT_BASE[0]) + self.WRIST_MIDDLE
        start = lever_yaw + math.pi * round((middle - lever_yaw) / math.pi)
        steps = math.ceil(self.TURN / self.TURN_STEP)
        turn = [Waypoint(lever, top_down_quat(start + self.TURN * i / steps), False, straight=True)
                for i in range(1, steps + 1)]
        return [Waypoint(lever + [0, 0, 0.1], top_down_quat(start), True),
                Waypoint(lever, top_down_quat(start), True, straight=True),
                Waypoint(lever, top_down_quat(start), False), *turn]


TASK = TurnTap
