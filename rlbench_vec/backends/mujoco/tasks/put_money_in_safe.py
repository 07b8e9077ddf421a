"""put_money_in_safe (PerAct's RLBench fork, MohitShridhar/RLBench branch `peract`:
rlbench/tasks/put_money_in_safe.py): put the stack of bank notes on the bottom, middle or top
shelf of the safe (the variation, 3).

Success (as RLBench): nothing grasped and the money detected by the chosen shelf's region.
Placement: upstream's `base_rotation_bounds` turn the safe one way only, [0.0, 0.0, 0.0] to
[0.0, 0.0, +0.5 * np.pi]; here it turns 0 to 0.3 rad, one-sided as upstream's (at 0 its opening faces the
robot): at upstream's 0..π/2 this oracle solved 87 of 100 demos, at 0..0.6 rad 87, at 0..0.9 rad 70
(docs/tasks.md; its top-down hand, moved without obstacle avoidance, meets the turned safe or jams the money on
the top shelf's edge). The money
lies with its yaw 0 to π/2 from the safe's, upstream's `SpawnBoundary.sample(min_rotation=(0.00, 0.00,
0.00), max_rotation=(0.00, 0.00, +0.5 * np.pi))`, in the table's spawn area in front of the safe.
Departures: the safe is an open box of boards (no door); the money a 20 x 6 x 2 cm box with high torsional
friction (held by one end, it would pivot in the fingers), which the oracle holds by one end and slides in
with a top-down hand that stays outside the safe (RLBench's demo tilts the hand). State: money xyz +
quaternion xyzw, the safe's xyz, the three shelves' region centres."""

from __future__ import annotations

import math

import numpy as np

from ..geometry import yaw_rotation
from ..scene import SCENERY, TABLE_TOP_Z, Scene, axis_angle_quat, geom
from .bars import grasp_by_end
from .base import Task, Waypoint, World, body_position, body_quat, body_yaw, site_position, top_down_quat
from .conditions import ConditionSet, DetectedCondition, NothingGrasped
from .objects import free_box, mocap_body, region

SHELVES = ("bottom", "middle", "top")


class PutMoneyInSafe(Task):
    name = "put_money_in_safe"
    variation_count = len(SHELVES)
    MONEY_HALF = (0.1, 0.03, 0.01)
    GRIP_INSET = 0.02  # the money is held this far from its end
    DEPTH, WIDTH, BOARD = 0.22, 0.3, 0.01
    BASE, SHELF_PITCH = 0.02, 0.13  # the bottom shelf's floor height, and from floor to floor
    HAND_OUTSIDE = 0.055  # the grip stops this far in front of the safe: hand and wrist stay outside
    CARRY_HEIGHT = 0.025  # the grip above the shelf's floor
    # Upstream's base_rotation_bounds are 0..pi/2; kept to 0..0.3 rad, where this oracle holds (docs/tasks.md has
    # its rate at upstream's range: the ik hand, without obstacle avoidance, meets the turned safe).
    YAW_BOUNDS = (0.0, 0.3)

    def floor(self, shelf: int) -> float:
        """Height of shelf `shelf`'s floor above the safe's base."""
        return self.BASE + shelf * self.SHELF_PITCH

    def build(self, scene: Scene) -> None:
        grey = (0.35, 0.37, 0.4, 1.0)
        d, w = self.DEPTH / 2, self.WIDTH / 2
        height = self.floor(len(SHELVES))
        safe = mocap_body(scene.worldbody, "safe")
        geom(safe, "box", grey, SCENERY, size=(d, w, self.BASE / 2), pos=(0, 0, self.BASE / 2))
        for shelf in range(1, len(SHELVES) + 1):
            geom(safe, "box", grey, SCENERY, size=(d, w, self.BOARD / 2),
                 pos=(0, 0, self.floor(shelf) - self.BOARD / 2))
        for side in (-1, 1):
            geom(safe, "box", grey, SCENERY, size=(d, self.BOARD / 2, height / 2),
                 pos=(0, side * (w - self.BOARD / 2), height / 2))
        geom(safe, "box", grey, SCENERY, size=(self.BOARD / 2, w, height / 2), pos=(d - self.BOARD / 2, 0, height / 2))
        for shelf in range(len(SHELVES)):
            region(safe, f"success_detector{shelf}", half_size=(d, w - self.BOARD, 0.04),
                   position=(0, 0, self.floor(shelf) + 0.04))
        free_box(scene.worldbody, "money", self.MONEY_HALF, rgba=(0.45, 0.65, 0.4, 1.0), mass=0.02,
                 friction=(1.0, 0.05, 0.0001))  # a grippy stack: it does not pivot in the fingers

    def descriptions(self, variation: int) -> list[str]:
        shelf = SHELVES[variation]
        return [f"put the money away in the safe on the {shelf} shelf",
                f"leave the money on the {shelf} shelf on the safe",
                f"place the stack of bank notes on the {shelf} shelf of the safe"]

    def init_episode(self, world: World, variation: int, rng: np.random.Generator) -> None:
        yaw = rng.uniform(*self.YAW_BOUNDS)
        safe = np.array([rng.uniform(0.35, 0.39), rng.uniform(-0.12, 0.12), TABLE_TOP_Z])
        world.set_pose("safe", safe, axis_angle_quat((0, 0, 1), yaw))
        to_safe_frame = yaw_rotation(yaw).T
        while True:  # the money wholly in front of the safe
            money = np.array([rng.uniform(0.06, 0.14), rng.uniform(-0.22, 0.22), TABLE_TOP_Z + self.MONEY_HALF[2]])
            money_yaw = yaw + rng.uniform(0.0, math.pi / 2)
            corners = [money + yaw_rotation(money_yaw) @ [sx * self.MONEY_HALF[0], sy * self.MONEY_HALF[1], 0]
                       for sx in (-1, 1) for sy in (-1, 1)]
            if all((to_safe_frame @ (corner - safe))[0] < -self.DEPTH / 2 - 0.02 for corner in corners):
                break
        world.set_pose("money", money, axis_angle_quat((0, 0, 1), money_yaw))

    def success(self, variation: int) -> ConditionSet:
        return ConditionSet([NothingGrasped(), DetectedCondition("money", f"success_detector{variation}")])

    def low_dim_state(self, variation: int):
        return (body_position("money"), body_quat("money"), body_position("safe"),
                *(site_position(f"success_detector{shelf}") for shelf in range(len(SHELVES))))

    def oracle(self, world: World, variation: int) -> list[Waypoint]:
        safe, safe_yaw = world.position("safe"), body_yaw(world.quat("safe"))
        inward = yaw_rotation(safe_yaw) @ np.array([1.0, 0.0, 0.0])  # through the opening, into the safe
        grasp = grasp_by_end(world.position("money"), body_yaw(world.quat("money")), self.MONEY_HALF[0],
                             self.GRIP_INSET, safe_yaw)
        grasp_quat, insert_quat = top_down_quat(grasp.grasp_yaw), top_down_quat(grasp.turned_yaw)
        front = safe - (self.DEPTH / 2) * inward
        inserted = front - self.HAND_OUTSIDE * inward + [0, 0, self.floor(variation) + self.CARRY_HEIGHT]
        outside = inserted - (2 * self.MONEY_HALF[0]) * inward
        up = np.array([0.0, 0.0, 0.1])
        return [
            Waypoint(grasp.grip + up, grasp_quat, True),
            Waypoint(grasp.grip, grasp_quat, True, straight=True),
            Waypoint(grasp.grip, grasp_quat, False),
            Waypoint(grasp.grip + up, grasp_quat, False, straight=True),
            Waypoint(outside, insert_quat, False, straight=True),  # in short moves: a fast swing tilts the money
            Waypoint(inserted, insert_quat, False, straight=True),
            Waypoint(inserted, insert_quat, True),
            Waypoint(outside, insert_quat, True, straight=True),
        ]


TASK = PutMoneyInSafe
