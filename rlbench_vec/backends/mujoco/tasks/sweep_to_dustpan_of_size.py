"""sweep_to_dustpan_of_size (PerAct's RLBench fork, MohitShridhar/RLBench branch `peract`:
rlbench/tasks/sweep_to_dustpan_of_size.py): sweep the dirt into the tall or the short dustpan (the
variation, 2, in the fork's order) with the broom.

Success (as RLBench): each of the 5 dirt pieces detected by the chosen dustpan's region.
Placement: the fork's file defines no `base_rotation_bounds`, so its base turns Task's default ±3.14; here
the whole layout (pans, dirt, broom) lies in a base frame on the dirt's centre turned ±3.14: the pans side
by side on one side of the dirt facing it, the broom beside the dirt on the other side with its head towards
them (upstream's layout is in its scene file; which side and which pan lies further along are drawn per
episode here). Layouts the oracle cannot reach are drawn again, which thins the yaws that put the pans far
from the robot (docs/tasks.md).
Departures: the broom is a T of two boxes (handle and head), the dirt 1.2 cm cubes in a cluster, the
dustpans flat pans with low walls told apart by their handles' height (tall 25 cm, short 8 cm).
State: broom xyz + quaternion xyzw, the five dirt pieces' xyz, the two pans' xyz (tall first)."""

from __future__ import annotations

import math

import numpy as np

from ..scene import SCENERY, TABLE_TOP_Z, VISUAL, Scene, axis_angle_quat, geom
from .bars import EndGrasp, stroke, wrap
from .base import DEFAULT_YAW, Task, Waypoint, World, body_position, body_quat, body_yaw, square_yaw
from .conditions import ConditionSet, DetectedCondition
from .objects import free_box, mocap_body, region

SIZES = ("tall", "short")
HANDLE_HEIGHTS = {"tall": 0.25, "short": 0.08}
DIRT = tuple(f"dirt{i}" for i in range(5))  # DIRT_NUM = 5


class SweepToDustpanOfSize(Task):
    name = "sweep_to_dustpan_of_size"
    variation_count = len(SIZES)
    HANDLE_HALF = (0.12, 0.01, 0.01)
    HEAD_HALF = (0.015, 0.06, 0.015)
    DIRT_HALF = 0.006
    PAN_HALF = (0.07, 0.1)  # depth, width
    PAN_OFFSET = 0.26  # across, from the dirt's centre to the pans'
    PAN_SPACING = 0.22  # between the two pans' centres
    GRIP_INSET = 0.03  # from the handle's end
    GAP = 0.04  # the head is lowered this far short of the dirt
    STEP = 0.03
    CENTRE_X = (0.18, 0.24)  # the dirt's centre
    BROOM = (-0.15, 0.12)  # the broom's centre from the dirt's, base frame: along, across away from the pans

    def build(self, scene: Scene) -> None:
        broom = free_box(scene.worldbody, "broom", self.HANDLE_HALF, rgba=(0.55, 0.4, 0.2, 1.0), mass=0.05)
        geom(broom, "box", (0.2, 0.2, 0.25, 1.0), SCENERY, size=self.HEAD_HALF, mass="0.02",
             pos=(self.HANDLE_HALF[0] + self.HEAD_HALF[0], 0, self.HEAD_HALF[2] - self.HANDLE_HALF[2]))
        for name in DIRT:
            free_box(scene.worldbody, name, (self.DIRT_HALF,) * 3, rgba=(0.3, 0.22, 0.12, 1.0), mass=0.002,
                     friction=(0.5, 0.005, 0.0001))
        depth, width = self.PAN_HALF
        for size in SIZES:  # the pan's opening faces its -x
            pan = mocap_body(scene.worldbody, f"dustpan_{size}")
            geom(pan, "box", (0.25, 0.25, 0.3, 1.0), VISUAL, size=(depth, width, 0.001), pos=(0, 0, 0.001))
            geom(pan, "box", (0.25, 0.25, 0.3, 1.0), SCENERY, size=(0.005, width, 0.02), pos=(depth, 0, 0.02))
            for side in (-1, 1):
                geom(pan, "box", (0.25, 0.25, 0.3, 1.0), SCENERY, size=(depth, 0.005, 0.02),
                     pos=(0, side * width, 0.02))
            height = HANDLE_HEIGHTS[size]
            geom(pan, "cylinder", (0.1, 0.1, 0.1, 1.0), VISUAL, size=(0.008, height / 2), pos=(depth, 0, height / 2))
            region(pan, f"success_{size}", half_size=(depth, width, 0.03), position=(0, 0, 0.03))

    def descriptions(self, variation: int) -> list[str]:
        size = SIZES[variation]
        return [f"sweep dirt to the {size} dustpan", f"sweep the dirt up into the {size} dustpan",
                f"use the broom to brush the dirt into the {size} dustpan", f"clean up the dirt with the {size} pan"]

    def init_episode(self, world: World, variation: int, rng: np.random.Generator) -> None:
        # A base frame on the dirt's centre, turned with any yaw: its y across the sweep, the pans on one side.
        yaw = rng.uniform(-DEFAULT_YAW, DEFAULT_YAW)  # the fork's file has no base_rotation_bounds
        along, across = np.array([math.cos(yaw), math.sin(yaw), 0.0]), np.array([-math.sin(yaw), math.cos(yaw), 0.0])
        centre = np.array([rng.uniform(*self.CENTRE_X), rng.uniform(-0.05, 0.05), TABLE_TOP_Z])
        side = rng.choice([-1.0, 1.0])  # the pans stand side by side on this side of the dirt
        order = rng.permutation(len(SIZES))  # which of them lies further along
        for size, slot in zip(SIZES, order):
            pan = centre + side * self.PAN_OFFSET * across + (slot - 0.5) * self.PAN_SPACING * along
            facing = pan - centre  # the pan's -x, its opening, faces the dirt
            world.set_pose(f"dustpan_{size}", pan, axis_angle_quat((0, 0, 1), math.atan2(facing[1], facing[0])))
        for name in DIRT:
            offset = rng.uniform(-0.025, 0.025, 2)
            world.set_pose(name, centre + [offset[0], offset[1], self.DIRT_HALF],
                           axis_angle_quat((0, 0, 1), rng.uniform(-math.pi, math.pi)))
        # Beside the dirt on the other side, its head towards the pans' side.
        broom = centre + self.BROOM[0] * along - side * self.BROOM[1] * across
        broom[2] = TABLE_TOP_Z + self.HANDLE_HALF[2]
        world.set_pose("broom", broom, axis_angle_quat((0, 0, 1), yaw + side * math.pi / 2))

    def success(self, variation: int) -> ConditionSet:
        return ConditionSet([DetectedCondition(name, f"success_{SIZES[variation]}") for name in DIRT])

    def low_dim_state(self, variation: int):
        return (body_position("broom"), body_quat("broom"), *(body_position(name) for name in DIRT),
                *(body_position(f"dustpan_{size}") for size in SIZES))

    def oracle(self, world: World, variation: int) -> list[Waypoint]:
        broom, broom_yaw = world.position("broom"), body_yaw(world.quat("broom"))
        dirt = np.mean([world.position(name) for name in DIRT], axis=0)
        pan = world.position(f"dustpan_{SIZES[variation]}")
        sweep = (pan - dirt) * [1, 1, 0]
        distance = float(np.linalg.norm(sweep))
        sweep /= distance
        # Held at the handle's end with the head leading: the wrist turns the handle onto the sweep.
        axis = np.array([math.cos(broom_yaw), math.sin(broom_yaw), 0.0])
        grip = broom - (self.HANDLE_HALF[0] - self.GRIP_INSET) * axis
        grasp_yaw = square_yaw(broom_yaw, math.pi)
        sweep_yaw = grasp_yaw + wrap(math.atan2(sweep[1], sweep[0]) - broom_yaw)
        reach = 2 * self.HANDLE_HALF[0] - self.GRIP_INSET  # from the grip to the head's face
        start = dirt - (reach + self.GAP + 0.03) * sweep
        start[2] = grip[2] = TABLE_TOP_Z + self.HANDLE_HALF[2] + 0.003
        end = pan - reach * sweep - 0.02 * sweep
        end[2] = start[2]
        return stroke(EndGrasp(grip, grasp_yaw, sweep_yaw), start, end, self.STEP, lift=0.1)


TASK = SweepToDustpanOfSize
