"""stack_blocks (PerAct's RLBench: rlbench/tasks/stack_blocks.py): stack 2, 3 or 4 of the four blocks of
the variation's colour on the target plane; four distractor blocks of one other colour (as upstream, whose
indexing draws two colours and gives all four distractors the first). 60 variations: colour `v // 3` of
RLBench's 20, `2 + v % 3` blocks.

Success (as RLBench): `count` of the four target blocks detected by the region over the plane
(RLBench's DetectedSeveralCondition, written here as OrConditions over every choice of `count` blocks)
and nothing grasped. Departures: the blocks are 5 cm cubes and the plane a flat square. State: the eight
blocks' xyz (targets first), then the plane's xyz.
Placement yaw: the plane (with its region) ±π, as upstream's base, blocks ±π (upstream: ±π in boundaries
on the base; the boundaries turning with the base is not modelled: ours is the table's spawn area);
layouts the oracle cannot reach are drawn again."""

from __future__ import annotations

import itertools
import math

import numpy as np

from ..scene import SPAWN_HIGH, SPAWN_LOW, TABLE_TOP_Z, VISUAL, Scene, axis_angle_quat, geom
from .base import (
    COLORS,
    Task,
    Waypoint,
    World,
    body_position,
    body_yaw,
    clearest_face_yaw,
    hand_points,
    pick_and_place,
    pick_colours,
    sample_apart,
    top_down_quat,
)
from .conditions import ConditionSet, DetectedCondition, NothingGrasped, OrConditions
from .objects import free_box, mocap_body, region

TARGETS = tuple(f"target{i}" for i in range(4))
DISTRACTORS = tuple(f"distractor{i}" for i in range(4))
MAX_STACKED = 3  # counts 2, 3, 4


class StackBlocks(Task):
    name = "stack_blocks"
    variation_count = len(COLORS) * MAX_STACKED
    HALF = 0.025
    STACK_HALF = (0.04, 0.04, 0.13)  # the region over the plane

    def build(self, scene: Scene) -> None:
        for name in TARGETS + DISTRACTORS:
            free_box(scene.worldbody, name, (self.HALF,) * 3)
        plane = mocap_body(scene.worldbody, "plane")
        geom(plane, "box", (0.2, 0.8, 0.2, 1.0), VISUAL, size=(0.05, 0.05, 0.001), pos=(0, 0, 0.001))
        region(plane, "stack", half_size=self.STACK_HALF, position=(0, 0, self.STACK_HALF[2]))

    @staticmethod
    def plan(variation: int) -> tuple[int, int]:
        """The variation's colour index and how many blocks to stack."""
        return variation // MAX_STACKED, 2 + variation % MAX_STACKED

    def descriptions(self, variation: int) -> list[str]:
        colour_index, count = self.plan(variation)
        colour = COLORS[colour_index][0]
        return [f"stack {count} {colour} blocks", f"place {count} of the {colour} cubes on top of each other",
                f"pick up and set down {count} {colour} blocks on top of each other",
                f"build a tall tower out of {count} {colour} cubes",
                f"arrange {count} {colour} blocks in a vertical stack on the table top",
                f"set {count} {colour} cubes on top of each other"]

    def init_episode(self, world: World, variation: int, rng: np.random.Generator) -> None:
        colour_index, _ = self.plan(variation)
        target, distractor, _ = pick_colours(rng, colour_index, 2)
        positions = sample_apart(rng, len(TARGETS) + len(DISTRACTORS) + 1, SPAWN_LOW, SPAWN_HIGH, min_distance=0.09)
        colours = [target] * len(TARGETS) + [distractor] * len(DISTRACTORS)
        for name, xy, colour in zip(TARGETS + DISTRACTORS, positions, colours):
            world.set_pose(name, (*xy, TABLE_TOP_Z + self.HALF),
                           axis_angle_quat((0, 0, 1), rng.uniform(-math.pi, math.pi)))
            world.set_colour(name, colour)
        plane_yaw = rng.uniform(-math.pi, math.pi)
        world.set_pose("plane", (*positions[-1], TABLE_TOP_Z), axis_angle_quat((0, 0, 1), plane_yaw))

    def success(self, variation: int) -> ConditionSet:
        _, count = self.plan(variation)
        stacks = [ConditionSet([DetectedCondition(name, "stack") for name in chosen])
                  for chosen in itertools.combinations(TARGETS, count)]
        return ConditionSet([OrConditions(stacks), NothingGrasped()])

    def low_dim_state(self, variation: int):
        return (*(body_position(name) for name in TARGETS + DISTRACTORS), body_position("plane"))

    def grasp_yaw(self, world: World, name: str) -> float:
        """Of the two gripper yaws with the fingers on the block's faces, the one whose hand (20 cm long along
        the fingers, low enough at the grasp to meet a stack) keeps further from the plane and the other blocks."""
        centre = world.position(name)[:2]
        others = [world.position(other)[:2] for other in (*TARGETS, *DISTRACTORS, "plane") if other != name]

        def clearance(yaw: float) -> float:
            return min(float(np.linalg.norm(point - other)) for point in hand_points(centre, yaw) for other in others)

        return clearest_face_yaw(body_yaw(world.quat(name)), clearance)

    def oracle(self, world: World, variation: int) -> list[Waypoint]:
        _, count = self.plan(variation)
        plane = world.position("plane")
        waypoints: list[Waypoint] = []
        for level, name in enumerate(TARGETS[:count]):
            quat = top_down_quat(self.grasp_yaw(world, name))
            drop = plane + [0, 0, self.HALF * (2 * level + 1) + 0.006]
            waypoints += pick_and_place(world.position(name), quat, drop, clearance=0.1 + 2 * self.HALF * level)
        return waypoints


TASK = StackBlocks
