"""open_drawer (RLBench: rlbench/tasks/open_drawer.py): open the bottom, middle or top drawer (the
variation, 3) of a cabinet placed at random (±22.5° yaw, upstream's base bounds).

Success (as RLBench): the chosen drawer's joint moved more than 0.15 m. State: the three handles' xyz,
then the three drawers' openings (metres), bottom to top (the variation tells which is the chosen one).
Dense reward (ours, docs/tasks.md): reach the chosen handle, grasp its drawer, pull it open.
The handles sit at different heights and sideways offsets (bottom right, middle centre, top left as the
robot sees them), so a hand on one handle clears the others.
Placement yaw: cabinet yaw ±π/8 (as upstream's base_rotation_bounds);
layouts the oracle cannot reach are drawn again."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import numpy as np

from ..geometry import frame_quat, yaw_rotation
from ..scene import ARTICULATED, SCENERY, TABLE_TOP_Z, Scene, axis_angle_quat, fmt, geom
from .base import (
    TIP,
    Closeness,
    DenseReward,
    Met,
    Progress,
    Stage,
    Task,
    Waypoint,
    World,
    body_yaw,
    geom_position,
    joint_position,
)
from .conditions import Condition, GraspedCondition, JointCondition
from .objects import mocap_body

OPTIONS = ("bottom", "middle", "top")


class OpenDrawer(Task):
    name = "open_drawer"
    variation_count = len(OPTIONS)
    SUCCESS_OPENING = 0.15  # metres, RLBench's JointCondition on the drawer joint
    DEPTH, WIDTH = 0.30, 0.40
    PLINTH, SLOT, TOP = 0.10, 0.11, 0.02
    HANDLE_STANDOFF = 0.05
    HANDLE_OFFSETS = (-0.1, 0.0, 0.1)  # sideways, per drawer
    HANDLE_HALF_LENGTH = 0.04
    TRAVEL = 0.25
    YAW_BOUND = math.pi / 8  # upstream's base_rotation_bounds
    HANDLE_PITCH = math.radians(45)  # the oracle's hand, down from horizontal
    CENTRE_X = (0.48, 0.56)  # the range of the cabinet centre's x, metres

    def build(self, scene: Scene) -> None:
        wood, front = (0.55, 0.38, 0.25, 1.0), (0.82, 0.7, 0.55, 1.0)
        d, w = self.DEPTH / 2, self.WIDTH / 2
        height = self.PLINTH + 3 * self.SLOT + self.TOP
        cabinet = mocap_body(scene.worldbody, "cabinet")
        geom(cabinet, "box", wood, SCENERY, size=(d, w, self.PLINTH / 2), pos=(0, 0, self.PLINTH / 2))
        geom(cabinet, "box", wood, SCENERY, size=(d, w, self.TOP / 2), pos=(0, 0, height - self.TOP / 2))
        for side in (-1, 1):
            geom(cabinet, "box", wood, SCENERY, size=(d, 0.01, height / 2), pos=(0, side * (w - 0.01), height / 2))
        geom(cabinet, "box", wood, SCENERY, size=(0.01, w, height / 2), pos=(d - 0.01, 0, height / 2))
        for i, option in enumerate(OPTIONS):
            centre_z = self.PLINTH + (i + 0.5) * self.SLOT
            drawer = ET.SubElement(cabinet, "body", name=f"drawer_{option}", pos=fmt([-d, 0, centre_z]))
            ET.SubElement(drawer, "joint", name=f"drawer_{option}", type="slide", axis="-1 0 0",
                          range=fmt([0, self.TRAVEL]), damping="5", armature="0.1")
            half_h, inner_w = self.SLOT / 2 - 0.004, w - 0.025
            geom(drawer, "box", front, ARTICULATED, size=(0.01, w - 0.022, half_h), pos=(0.01, 0, 0), mass="0.3")
            geom(drawer, "box", wood, ARTICULATED, size=(d - 0.03, inner_w, 0.004), pos=(d - 0.01, 0, 0.01 - half_h))
            for side in (-1, 1):
                geom(drawer, "box", wood, ARTICULATED, size=(d - 0.03, 0.004, half_h - 0.01),
                     pos=(d - 0.01, side * inner_w, 0))
            geom(drawer, "box", wood, ARTICULATED, size=(0.004, inner_w, half_h - 0.01), pos=(2 * d - 0.04, 0, 0))
            x, y, half = -self.HANDLE_STANDOFF, self.HANDLE_OFFSETS[i], self.HANDLE_HALF_LENGTH
            geom(drawer, "capsule", (0.3, 0.3, 0.32, 1), ARTICULATED, name=f"handle_{option}",
                 fromto=(x, y - half, 0, x, y + half, 0), size="0.01", friction=(1.5, 0.01, 0.0005))
            for end in (y - half, y + half):
                geom(drawer, "box", (0.3, 0.3, 0.32, 1), ARTICULATED, size=(self.HANDLE_STANDOFF / 2, 0.006, 0.006),
                     pos=(x / 2, end, 0))

    def descriptions(self, variation: int) -> list[str]:
        option = OPTIONS[variation]
        return [f"open the {option} drawer", f"grip the {option} handle and pull the {option} drawer open",
                f"slide the {option} drawer open"]

    def init_episode(self, world: World, variation: int, rng: np.random.Generator) -> None:
        self.place_cabinet(world, rng)

    def place_cabinet(self, world: World, rng: np.random.Generator) -> tuple[np.ndarray, float]:
        """The cabinet at random, drawers shut; returns its centre and yaw."""
        yaw = rng.uniform(-self.YAW_BOUND, self.YAW_BOUND)
        centre = np.array([rng.uniform(*self.CENTRE_X), rng.uniform(-0.12, 0.12), TABLE_TOP_Z])
        world.set_pose("cabinet", centre, axis_angle_quat((0, 0, 1), yaw))
        for option in OPTIONS:
            world.set_joint(f"drawer_{option}", 0.0)
        return centre, yaw

    def success(self, variation: int) -> Condition:
        return JointCondition(f"drawer_{OPTIONS[variation]}", self.SUCCESS_OPENING)

    def low_dim_state(self, variation: int):
        return (*(geom_position(f"handle_{o}") for o in OPTIONS), *(joint_position(f"drawer_{o}") for o in OPTIONS))

    def dense_reward(self, variation: int) -> DenseReward:
        option = OPTIONS[variation]
        return DenseReward(Stage(Closeness(TIP, geom_position(f"handle_{option}"))),
                           Stage(Met(GraspedCondition(f"drawer_{option}"))),
                           Stage(Progress(f"drawer_{option}", self.SUCCESS_OPENING)))

    def oracle(self, world: World, variation: int) -> list[Waypoint]:
        pull = yaw_rotation(body_yaw(world.quat("cabinet"))) @ np.array([-1.0, 0.0, 0.0])  # out of the front
        handle = world.geom_position(f"handle_{OPTIONS[variation]}")
        # Approach into the cabinet pitched HANDLE_PITCH down (a horizontal gripper is out of the Panda's
        # reach at these heights), fingers closing across the horizontal bar.
        pitch = self.HANDLE_PITCH
        approach = -math.cos(pitch) * pull + [0.0, 0.0, -math.sin(pitch)]
        finger_axis = -math.sin(pitch) * pull + [0.0, 0.0, math.cos(pitch)]
        quat = frame_quat(np.cross(finger_axis, approach), finger_axis)
        return [
            Waypoint(handle - 0.12 * approach, quat, True),
            Waypoint(handle, quat, True, straight=True),
            Waypoint(handle, quat, False),
            Waypoint(handle + 0.22 * pull, quat, False, straight=True),
        ]


TASK = OpenDrawer
