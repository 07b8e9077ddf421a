"""reach_target (RLBench: rlbench/tasks/reach_target.py): reach the sphere of the variation's colour;
two distractor spheres of other colours. 20 variations (RLBench's colours).

Success: the tool centre inside the target's 4 cm sphere (RLBench: the tip detected by the target's
proximity sensor). Spheres at least 0.2 m apart (upstream's min_distance). State: the target's xyz, as
upstream's get_low_dim_state. Shaped reward (upstream's reward()): minus the tool centre's distance to
the target's centre. Dense reward (ours, docs/tasks.md): reach the target.
Placement yaw: none, as upstream (a static workspace);
layouts the oracle cannot reach are drawn again."""

from __future__ import annotations

import numpy as np

from ..scene import SPAWN_HIGH, SPAWN_LOW, TABLE_TOP_Z, VISUAL, Scene, geom
from .base import (
    COLORS,
    TIP,
    Closeness,
    DenseReward,
    ShapedReward,
    Stage,
    Task,
    Waypoint,
    World,
    body_position,
    pick_colours,
    sample_apart,
)
from .conditions import TCP, DetectedCondition
from .objects import mocap_body, region

SPHERES = ("target", "distractor0", "distractor1")


class ReachTarget(Task):
    name = "reach_target"
    variation_count = len(COLORS)
    RADIUS = 0.025
    SUCCESS_DISTANCE = 0.04  # TCP to the target's centre, metres
    SPAWN_Z = (0.1, 0.4)  # above the table
    MIN_DISTANCE = 0.2  # between spheres' centres, upstream's SpawnBoundary.sample min_distance

    def build(self, scene: Scene) -> None:
        for name in SPHERES:
            body = mocap_body(scene.worldbody, name)
            geom(body, "sphere", (1, 0, 0, 1), VISUAL, name=name, size=self.RADIUS)
            if name == "target":
                region(body, "success", radius=self.SUCCESS_DISTANCE)

    def descriptions(self, variation: int) -> list[str]:
        colour = COLORS[variation][0]
        return [f"reach the {colour} target", f"touch the {colour} ball with the panda gripper",
                f"reach the {colour} sphere"]

    def init_episode(self, world: World, variation: int, rng: np.random.Generator) -> None:
        low = np.array([*SPAWN_LOW, TABLE_TOP_Z + self.SPAWN_Z[0]])
        high = np.array([*SPAWN_HIGH, TABLE_TOP_Z + self.SPAWN_Z[1]])
        positions = sample_apart(rng, len(SPHERES), low, high, min_distance=self.MIN_DISTANCE)
        for name, position, colour in zip(SPHERES, positions, pick_colours(rng, variation, 2)):
            world.set_pose(name, position)
            world.set_colour(name, colour)

    def success(self, variation: int) -> DetectedCondition:
        return DetectedCondition(TCP, "success")

    def low_dim_state(self, variation: int):
        return (body_position("target"),)

    def reward(self, variation: int) -> ShapedReward:
        return ShapedReward((body_position("target"), TIP))

    def dense_reward(self, variation: int) -> DenseReward:
        return DenseReward(Stage(Closeness(TIP, body_position("target"))))

    def oracle(self, world: World, variation: int) -> list[Waypoint]:
        _, quat = world.tcp_pose()
        return [Waypoint(world.position("target"), quat, True)]


TASK = ReachTarget
