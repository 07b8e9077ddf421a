"""pick_and_lift (RLBench: rlbench/tasks/pick_and_lift.py): grasp the block of the variation's colour
and lift it into the target sphere; two distractor blocks. 20 variations (RLBench's colours).

Success (as RLBench): the block grasped and detected by the target's region (any part of it within 5 cm
of the target's centre). State: the block's xyz, then the success detector's (the region's centre), as
upstream's get_low_dim_state. Dense reward (ours, docs/tasks.md): reach the block, grasp it, once grasped
bring it to the target.
Placement yaw: blocks ±π, the region a sphere (upstream: base ±π, blocks ±π on it, the detector without
yaw of its own): as wide as upstream's; the spawn area (ours, the table's) does not turn. Layouts the oracle
cannot reach are drawn again."""

from __future__ import annotations

import math

import numpy as np

from ..scene import SPAWN_HIGH, SPAWN_LOW, TABLE_TOP_Z, VISUAL, Scene, axis_angle_quat, geom
from .base import (
    COLORS,
    TIP,
    Closeness,
    DenseReward,
    Met,
    Stage,
    Task,
    Waypoint,
    World,
    body_position,
    body_yaw,
    pick_colours,
    sample_apart,
    site_position,
    square_yaw,
    top_down_quat,
)
from .conditions import ConditionSet, DetectedCondition, GraspedCondition
from .objects import free_box, mocap_body, region

BLOCKS = ("block", "distractor0", "distractor1")


class PickAndLift(Task):
    name = "pick_and_lift"
    variation_count = len(COLORS)
    HALF_SIZE = 0.025
    SUCCESS_DISTANCE = 0.05  # block centre to the target's centre, metres
    TARGET_Z = (0.2, 0.35)  # above the table

    def build(self, scene: Scene) -> None:
        for name in BLOCKS:
            free_box(scene.worldbody, name, (self.HALF_SIZE,) * 3)
        target = mocap_body(scene.worldbody, "lift_target")
        geom(target, "sphere", (0.1, 0.8, 0.1, 0.6), VISUAL, name="lift_target", size="0.02")
        region(target, "success", radius=self.SUCCESS_DISTANCE)

    def descriptions(self, variation: int) -> list[str]:
        colour = COLORS[variation][0]
        return [f"pick up the {colour} block and lift it up to the target", f"grasp the {colour} block to the target",
                f"lift the {colour} block up to the target"]

    def init_episode(self, world: World, variation: int, rng: np.random.Generator) -> None:
        positions = sample_apart(rng, len(BLOCKS), SPAWN_LOW, SPAWN_HIGH, min_distance=0.15)
        for name, xy, colour in zip(BLOCKS, positions, pick_colours(rng, variation, 2)):
            yaw = rng.uniform(-math.pi, math.pi)
            world.set_pose(name, (*xy, TABLE_TOP_Z + self.HALF_SIZE), axis_angle_quat((0, 0, 1), yaw))
            world.set_colour(name, colour)
        target_xy = rng.uniform(SPAWN_LOW, SPAWN_HIGH)
        world.set_pose("lift_target", (*target_xy, TABLE_TOP_Z + rng.uniform(*self.TARGET_Z)))

    def success(self, variation: int) -> ConditionSet:
        return ConditionSet([GraspedCondition("block"), DetectedCondition("block", "success")])

    def low_dim_state(self, variation: int):
        return (body_position("block"), site_position("success"))

    def dense_reward(self, variation: int) -> DenseReward:
        grasped = GraspedCondition("block")
        return DenseReward(Stage(Closeness(TIP, body_position("block"))), Stage(Met(grasped)),
                           Stage(Closeness(body_position("block"), site_position("success")), once=grasped))

    def oracle(self, world: World, variation: int) -> list[Waypoint]:
        block = world.position("block")
        # A cube looks the same every 90 degrees: grasp at the equivalent yaw closest to the gripper's.
        yaw = square_yaw(body_yaw(world.quat("block")), math.pi / 2)
        quat = top_down_quat(yaw)
        target = world.position("lift_target")
        lifted = np.array([block[0], block[1], target[2]])
        return [
            Waypoint(block + [0, 0, 0.12], quat, True),
            Waypoint(block, quat, True, straight=True),
            Waypoint(block, quat, False),
            Waypoint(lifted, quat, False, straight=True),
            Waypoint(target, quat, False, straight=True),
        ]


TASK = PickAndLift
