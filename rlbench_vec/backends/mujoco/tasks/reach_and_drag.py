"""reach_and_drag (PerAct's RLBench fork, MohitShridhar/RLBench branch `peract`:
rlbench/tasks/reach_and_drag.py): pick up the stick and use it to drag the cube onto the target of the
variation's colour (RLBench's 20 colours); as in the fork, three distractor squares take the colours 5, 6
and 7 places further along RLBench's list.

Success (as RLBench): the cube detected by the target's region (any part of it, as RLBench's proximity
sensors).
Placement: the file samples nothing and has no `base_rotation_bounds`: its layout is fixed on the base
(in its scene file, not readable here), which turns Task's default ±3.14. Here the base turns ±3.14 about
the cube and the stick lies fixed on it (26 cm beside the cube, along the base's x, turned with it); the
layout is drawn again until the target and the stick's middle lie within 5 cm of the spawn area.
Departures: the stick is a 30 cm bar and the squares flat boxes; the target lies 12-20 cm from the cube on
the base's -x side, within ±0.6 rad of it (drawn per episode), the distractors elsewhere on the table,
turned as the base; the cube ±π. State: stick xyz + quaternion xyzw, cube xyz, target xyz, the three
distractors' xyz."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ..scene import SPAWN_HIGH, SPAWN_LOW, TABLE_TOP_Z, VISUAL, Scene, axis_angle_quat, geom
from .bars import grasp_by_end, stroke
from .base import (
    COLORS,
    DEFAULT_YAW,
    Task,
    Waypoint,
    World,
    base_offset,
    body_position,
    body_quat,
    body_yaw,
)
from .conditions import DetectedCondition
from .objects import free_box, mocap_body, region

SQUARES = ("target0", "distractor1", "distractor2", "distractor3")
DISTRACTOR_SHIFTS = (5, 6, 7)  # PerAct's fork: distractor k has colour (variation + shift) % 20


class ReachAndDrag(Task):
    name = "reach_and_drag"
    variation_count = len(COLORS)
    CUBE_HALF = 0.02
    STICK_HALF = (0.15, 0.01, 0.01)
    SQUARE_HALF = 0.05
    GRIP_INSET = 0.03  # the stick is grasped this far from its end
    REACH = 0.17  # from the grip to where the stick meets the cube
    GAP = 0.03  # the stick is lowered this far behind the cube
    DRAG_STEP = 0.03
    STICK_OFFSET = (-0.075, 0.26)  # the stick's centre from the cube's, base frame; the stick lies along its x

    def build(self, scene: Scene) -> None:
        free_box(scene.worldbody, "stick", self.STICK_HALF, rgba=(0.45, 0.3, 0.15, 1.0), mass=0.05)
        free_box(scene.worldbody, "cube", (self.CUBE_HALF,) * 3, rgba=(0.2, 0.2, 0.8, 1.0), mass=0.05,
                 friction=(0.6, 0.005, 0.0001))
        for name in SQUARES:
            square = mocap_body(scene.worldbody, name)
            geom(square, "box", (1.0, 0.0, 0.0, 1.0), VISUAL, name=name,
                 size=(self.SQUARE_HALF, self.SQUARE_HALF, 0.001), pos=(0, 0, 0.001))
            if name == "target0":
                region(square, "success0", half_size=(0.04, 0.04, 0.04), position=(0, 0, 0.03))

    def descriptions(self, variation: int) -> list[str]:
        colour = COLORS[variation][0]
        return [f"use the stick to drag the cube onto the {colour} target",
                f"pick up the stick and use it to push or pull the cube onto the {colour} target",
                f"drag the block towards the {colour} square on the table top",
                f"grasping the stick by one end, pick it up and use the its other end to move the block onto the "
                f"{colour} target"]

    def init_episode(self, world: World, variation: int, rng: np.random.Generator) -> None:
        # The cube, target and stick laid out in a base frame (the target behind the cube, the stick beside
        # them), the base turned about the cube with any yaw.
        yaw, cube, target, stick = self.draw_layout(rng)
        while not all(self.in_reach(xy) for xy in (target, stick)):
            yaw, cube, target, stick = self.draw_layout(rng)
        world.set_pose("cube", (*cube, TABLE_TOP_Z + self.CUBE_HALF),
                       axis_angle_quat((0, 0, 1), rng.uniform(-math.pi, math.pi)))
        world.set_pose("stick", (*stick, TABLE_TOP_Z + self.STICK_HALF[2]), axis_angle_quat((0, 0, 1), yaw))
        placed = [cube, target, stick]
        squares = [target]
        while len(squares) < len(SQUARES):
            xy = rng.uniform((0.0, -0.3), (0.4, 0.3))
            if all(np.linalg.norm(xy - p) >= 0.15 for p in placed):
                placed.append(xy)
                squares.append(xy)
        shifts = (0, *DISTRACTOR_SHIFTS)
        for name, xy, shift in zip(SQUARES, squares, shifts):
            world.set_pose(name, (*xy, TABLE_TOP_Z), axis_angle_quat((0, 0, 1), yaw))
            world.set_colour(name, COLORS[(variation + shift) % len(COLORS)][1])

    @staticmethod
    def draw_layout(rng: np.random.Generator) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
        """Base yaw and the cube's, target's and stick's xy."""
        yaw = rng.uniform(-DEFAULT_YAW, DEFAULT_YAW)
        heading = math.pi + rng.uniform(-0.6, 0.6)
        target_offset = rng.uniform(0.12, 0.2) * np.array([math.cos(heading), math.sin(heading)])
        cube = np.array([rng.uniform(0.15, 0.3), rng.uniform(-0.1, 0.1)])
        target, stick = (cube + base_offset(yaw, offset)[:2] for offset in (target_offset, ReachAndDrag.STICK_OFFSET))
        return yaw, cube, target, stick

    @staticmethod
    def in_reach(xy: np.ndarray) -> bool:
        """Within 5 cm of the spawn area: clear of the robot's base and the table's edge."""
        return bool(np.all(xy >= SPAWN_LOW - 0.05) and np.all(xy <= SPAWN_HIGH + 0.05))

    def success(self, variation: int) -> DetectedCondition:
        return DetectedCondition("cube", "success0")

    def low_dim_state(self, variation: int):
        return (body_position("stick"), body_quat("stick"), body_position("cube"),
                *(body_position(name) for name in SQUARES))

    def oracle(self, world: World, variation: int) -> list[Waypoint]:
        stick, stick_yaw = world.position("stick"), body_yaw(world.quat("stick"))
        cube, target = world.position("cube"), world.position("target0")
        drag = (target - cube) * [1, 1, 0]
        distance = float(np.linalg.norm(drag))
        drag /= distance
        behind = cube - (self.CUBE_HALF + self.STICK_HALF[1] + self.GAP) * drag
        # The stick held across the drag, its free end either way round: the plan whose hand is nearer the
        # robot's midline.
        plans, left = [], np.array([-drag[1], drag[0], 0.0])
        for across in (left, -left):
            hand = behind - self.REACH * across
            grasp = grasp_by_end(stick, stick_yaw, self.STICK_HALF[0], self.GRIP_INSET,
                                 math.atan2(across[1], across[0]))
            plans.append((abs(hand[1]), hand, grasp))
        _, hand, grasp = min(plans, key=lambda plan: plan[0])
        grip = grasp.grip.copy()
        grip[2] = hand[2] = TABLE_TOP_Z + self.STICK_HALF[2] + 0.003
        return stroke(replace(grasp, grip=grip), hand, hand + (distance + self.GAP) * drag, self.DRAG_STEP, lift=0.12)


TASK = ReachAndDrag
