"""slide_block_to_color_target (PerAct's RLBench: rlbench/tasks/slide_block_to_color_target.py): push
the block onto the square of the variation's colour, one of four around it (green, blue, pink, yellow:
4 variations).

Success (as RLBench): the block detected by the chosen square's region (a box over the square; any part of the
block inside it).
Departures: the squares sit at fixed offsets around the block's start (ahead, left, behind, right of
it in the assembly's frame), the block turned up to ±0.2 rad from the assembly. State: block xyz +
quaternion xyzw, then the four squares' xyz. Dense reward (ours, docs/tasks.md): reach the block, bring it
to the chosen square's region.
Placement yaw: the assembly (squares and block) ±π, as upstream's base, so a push may go any way, also
towards the robot; layouts the oracle cannot reach are drawn again."""

from __future__ import annotations

import numpy as np

from ..scene import TABLE_TOP_Z, VISUAL, Scene, axis_angle_quat, geom
from .base import (
    TIP,
    Closeness,
    DenseReward,
    Stage,
    Task,
    Waypoint,
    World,
    body_position,
    body_quat,
    site_position,
    top_down_quat,
)
from .conditions import DetectedCondition
from .objects import free_box, mocap_body, region

TARGETS = (("green", (0.0, 1.0, 0.0)), ("blue", (0.0, 0.0, 1.0)), ("pink", (1.0, 0.4, 0.7)),
           ("yellow", (1.0, 1.0, 0.0)))
OFFSETS = ((0.15, 0.0), (0.0, 0.15), (-0.15, 0.0), (0.0, -0.15))  # each square from the block, assembly frame


class SlideBlockToColorTarget(Task):
    name = "slide_block_to_color_target"
    variation_count = len(TARGETS)
    HALF = 0.025  # the block's half size
    SQUARE = 0.05  # the squares' half size
    PUSHER = 0.012  # the closed fingers' half thickness along the push
    PUSH_STEP = 0.03  # metres per push waypoint
    PUSH_HEIGHT = 0.032  # tool centre above the table while pushing: the fingertips near the block's middle

    def build(self, scene: Scene) -> None:
        free_box(scene.worldbody, "block", (self.HALF,) * 3, rgba=(0.85, 0.2, 0.2, 1.0), friction=(0.6, 0.005, 0.0001))
        squares = mocap_body(scene.worldbody, "targets")
        for i, ((_, rgb), (x, y)) in enumerate(zip(TARGETS, OFFSETS)):
            geom(squares, "box", (*rgb, 1.0), VISUAL, name=f"target{i}", size=(self.SQUARE, self.SQUARE, 0.001),
                 pos=(x, y, 0.001))
            region(squares, f"success{i}", half_size=(0.04, 0.04, 0.04), position=(x, y, 0.03))

    def descriptions(self, variation: int) -> list[str]:
        colour = TARGETS[variation][0]
        return [f"slide the block to {colour} target", f"slide the block onto the {colour} square",
                f"push the block until it is sitting on top of the {colour} target",
                f"slide the block towards the {colour} plane",
                f"cover the {colour} target with the block by pushing the block in its direction"]

    def init_episode(self, world: World, variation: int, rng: np.random.Generator) -> None:
        centre = np.array([rng.uniform(0.12, 0.22), rng.uniform(-0.08, 0.08), TABLE_TOP_Z])
        yaw = rng.uniform(-np.pi, np.pi)
        world.set_pose("targets", centre, axis_angle_quat((0, 0, 1), yaw))
        block_yaw = yaw + rng.uniform(-0.2, 0.2)
        world.set_pose("block", centre + [0, 0, self.HALF], axis_angle_quat((0, 0, 1), block_yaw))

    def success(self, variation: int) -> DetectedCondition:
        return DetectedCondition("block", f"success{variation}")

    def low_dim_state(self, variation: int):
        return (body_position("block"), body_quat("block"), *(site_position(f"success{i}") for i in range(4)))

    def dense_reward(self, variation: int) -> DenseReward:
        block = body_position("block")
        return DenseReward(Stage(Closeness(TIP, block)), Stage(Closeness(block, site_position(f"success{variation}"))))

    def oracle(self, world: World, variation: int) -> list[Waypoint]:
        block = world.position("block")
        goal = world.site_position(f"success{variation}")
        direction = (goal - block) * [1, 1, 0]
        direction /= np.linalg.norm(direction)
        # Fingers closed across the push: the pads make a flat pusher facing the block. The closed hand
        # looks the same turned half a turn: take the yaw within ±90° (the wrist's comfortable range).
        yaw = (float(np.arctan2(direction[1], direction[0])) + np.pi / 2) % np.pi - np.pi / 2
        quat = top_down_quat(yaw)
        height = np.array([0, 0, TABLE_TOP_Z + self.PUSH_HEIGHT])
        behind = block * [1, 1, 0] - (self.HALF + self.PUSHER + 0.03) * direction + height
        pushed = goal * [1, 1, 0] - (self.HALF + self.PUSHER - 0.01) * direction + height
        # Pushed in short moves: a fast push (planning mode moves a whole waypoint at speed) tips the block.
        pieces = max(1, int(np.ceil(np.linalg.norm(pushed - behind) / self.PUSH_STEP)))
        push = [Waypoint(behind + (i / pieces) * (pushed - behind), quat, False, straight=True)
                for i in range(1, pieces + 1)]
        return [Waypoint(behind + [0, 0, 0.1], quat, False), Waypoint(behind, quat, False, straight=True), *push]


TASK = SlideBlockToColorTarget
