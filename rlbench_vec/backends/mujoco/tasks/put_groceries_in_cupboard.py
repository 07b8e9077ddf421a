"""put_groceries_in_cupboard (PerAct's RLBench fork, MohitShridhar/RLBench branch `peract`:
rlbench/tasks/put_groceries_in_cupboard.py): put the grocery of the variation (9: crackers, chocolate jello,
strawberry jello, soup, tuna, spam, coffee, mustard, sugar) on the cupboard's bottom shelf.

Success (as RLBench): the chosen grocery detected by the region over the bottom shelf and nothing grasped.
Placement: the cupboard turns ±1.0 rad about its centre, upstream's `base_rotation_bounds` ((0.0, 0.0, -1.),
(0.0, 0.0, 1.)); each grocery is turned on its own by ±3.14 from the cupboard's yaw, as upstream's
`SpawnBoundary.sample(g, min_distance=0.1)` (whose default rotation is ±3.14) turns each, and the nine stand
at least 10 cm apart (its min_distance).
Departures: primitives for meshes: the groceries are boxes and cylinders of grocery sizes (a cylinder
collides as a box inside it, flat pads squeezing a cylinder out), the cupboard an open-front box of boards
with a bottom compartment 28 cm high, its floor 2 cm above the table. The groceries are drawn in the
table's spawn area (which does not turn) clear of the cupboard and of the corridor in front of its opening,
where the oracle's hand comes down (upstream's workspace shape is in its scene file). The oracle grasps
across the grocery's width with its hand pitched 45° down (a top-down hand cannot enter the shelf, a
horizontal one hits the table at a grocery's height), heading along the grocery's depth whichever way is
nearer the cupboard's (the other way where that keeps the hand clearer of the other groceries), turns it in
place onto the cupboard's heading in steps of 0.3 rad, and slides it onto the shelf. State: the nine groceries' xyz
in upstream's order, the cupboard's xyz and quaternion xyzw."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..geometry import frame_quat, yaw_rotation
from ..scene import SCENERY, SPAWN_HIGH, SPAWN_LOW, TABLE_TOP_Z, Scene, axis_angle_quat, geom
from .base import DEFAULT_YAW, Task, Waypoint, World, body_position, body_quat, body_yaw, hand_points, square_yaw
from .conditions import ConditionSet, DetectedCondition, NothingGrasped
from .objects import free_box, held_cylinder, mocap_body, region


@dataclass(frozen=True)
class Grocery:
    """half_size: (depth along the cupboard's inward axis, across the fingers, height); a cylinder's
    radius is its half width across the fingers."""

    name: str
    half_size: tuple[float, float, float]
    rgba: tuple[float, float, float, float]
    cylinder: bool = False

    @property
    def body(self) -> str:
        return self.name.replace(" ", "_")


GROCERIES = (
    Grocery("crackers", (0.045, 0.022, 0.06), (0.85, 0.25, 0.15, 1.0)),
    Grocery("chocolate jello", (0.03, 0.02, 0.025), (0.4, 0.22, 0.1, 1.0)),
    Grocery("strawberry jello", (0.03, 0.02, 0.025), (0.95, 0.45, 0.55, 1.0)),
    Grocery("soup", (0.028, 0.028, 0.045), (0.8, 0.1, 0.1, 1.0), cylinder=True),
    Grocery("tuna", (0.03, 0.03, 0.018), (0.2, 0.35, 0.75, 1.0), cylinder=True),
    Grocery("spam", (0.03, 0.02, 0.04), (0.15, 0.25, 0.6, 1.0)),
    Grocery("coffee", (0.03, 0.03, 0.05), (0.3, 0.2, 0.15, 1.0), cylinder=True),
    Grocery("mustard", (0.025, 0.018, 0.06), (0.95, 0.8, 0.1, 1.0)),
    Grocery("sugar", (0.035, 0.02, 0.05), (0.95, 0.95, 0.9, 1.0)),
)


class PutGroceriesInCupboard(Task):
    name = "put_groceries_in_cupboard"
    variation_count = len(GROCERIES)
    YAW_BOUND = 1.0  # upstream's base_rotation_bounds
    DEPTH, WIDTH, BOARD = 0.22, 0.42, 0.01
    FLOOR, COMPARTMENT, UPPER = 0.02, 0.28, 0.15  # the bottom shelf's floor height; the two compartments' heights
    FACING = np.array([0.17, 0.0])  # the cupboard faces this point (the spawn area's middle) ...
    DISTANCE = 0.42  # ... from this far (its centre), give or take JITTER
    JITTER = 0.02
    MIN_DISTANCE = 0.1  # between groceries (upstream's)
    CORRIDOR = 0.2  # kept free of groceries in front of the opening
    OUTSIDE = 0.12  # the carried grocery's centre comes down this far in front of the opening
    PITCH = math.radians(45)  # the oracle's hand, down from horizontal
    GRIP_BELOW_TOP = 0.02
    SHELF_DEPTH = 0.1  # the grocery's centre is set down this far behind the cupboard's front
    TURN_STEP = 0.3  # radians: the carried grocery's heading turns in steps this large
    CARRY = 0.15  # the grocery's bottom above the table when carried over the others
    # Before the grasp the hand waits this far back along its approach and this much higher: the hand clear of
    # tall neighbours 10 cm away (the tip of a hand 12 cm back along the approach to a tuna can was 10 cm up)
    BACK_OFF, RAISE = 0.08, 0.06
    HAND_BEHIND = 0.05  # m: the pitched hand's body lies this far behind the grasp, seen from above ...
    HAND_CLEARANCE = 0.08  # ... and should keep this far from the other groceries' centres

    def build(self, scene: Scene) -> None:
        wood = (0.62, 0.45, 0.3, 1.0)
        d, w, board = self.DEPTH / 2, self.WIDTH / 2, self.BOARD
        height = self.FLOOR + self.COMPARTMENT + board + self.UPPER + board
        cupboard = mocap_body(scene.worldbody, "cupboard")
        geom(cupboard, "box", wood, SCENERY, size=(d, w, self.FLOOR / 2), pos=(0, 0, self.FLOOR / 2))
        for top in (self.FLOOR + self.COMPARTMENT + board, height):
            geom(cupboard, "box", wood, SCENERY, size=(d, w, board / 2), pos=(0, 0, top - board / 2))
        for side in (-1, 1):
            geom(cupboard, "box", wood, SCENERY, size=(d, board / 2, height / 2),
                 pos=(0, side * (w - board / 2), height / 2))
        geom(cupboard, "box", wood, SCENERY, size=(board / 2, w, height / 2), pos=(d - board / 2, 0, height / 2))
        region(cupboard, "success", half_size=(d - board, w - board, 0.06), position=(0, 0, self.FLOOR + 0.06))
        for grocery in GROCERIES:
            if grocery.cylinder:
                held_cylinder(scene.worldbody, grocery.body, grocery.half_size[1], grocery.half_size[2], grocery.rgba)
            else:
                free_box(scene.worldbody, grocery.body, grocery.half_size, grocery.rgba, mass=0.05)

    def descriptions(self, variation: int) -> list[str]:
        item = GROCERIES[variation].name
        return [f"put the {item} in the cupboard", f"pick up the {item} and place it in the cupboard",
                f"move the {item} to the bottom shelf", f"put away the {item} in the cupboard"]

    def init_episode(self, world: World, variation: int, rng: np.random.Generator) -> None:
        yaw = rng.uniform(-self.YAW_BOUND, self.YAW_BOUND)
        heading = np.array([math.cos(yaw), math.sin(yaw)])
        centre = np.array([*(self.FACING + self.DISTANCE * heading + rng.uniform(-self.JITTER, self.JITTER, 2)),
                           TABLE_TOP_Z])
        quat = axis_angle_quat((0, 0, 1), yaw)
        world.set_pose("cupboard", centre, quat)
        for grocery, xy in zip(GROCERIES, self._spots(rng, centre, yaw)):  # each turned on its own (SpawnBoundary)
            own = axis_angle_quat((0, 0, 1), yaw + rng.uniform(-DEFAULT_YAW, DEFAULT_YAW))
            world.set_pose(grocery.body, (*xy, TABLE_TOP_Z + grocery.half_size[2]), own)

    def _spots(self, rng: np.random.Generator, centre: np.ndarray, yaw: float) -> list[np.ndarray]:
        """A spot per grocery in the spawn area, MIN_DISTANCE apart, in front of the cupboard's opening and
        its corridor (drawn again from the first when the groceries drawn leave no room)."""
        to_cupboard = yaw_rotation(yaw).T
        limit = -self.DEPTH / 2 - self.CORRIDOR - 0.05  # a grocery's largest half extent
        spots: list[np.ndarray] = []
        for _ in range(100 * len(GROCERIES)):
            xy = rng.uniform(SPAWN_LOW, SPAWN_HIGH)
            in_front = (to_cupboard @ [*(xy - centre[:2]), 0.0])[0] < limit
            if in_front and all(np.linalg.norm(xy - spot) >= self.MIN_DISTANCE for spot in spots):
                spots.append(xy)
                if len(spots) == len(GROCERIES):
                    return spots
        return self._spots(rng, centre, yaw)

    def success(self, variation: int) -> ConditionSet:
        return ConditionSet([DetectedCondition(GROCERIES[variation].body, "success"), NothingGrasped()])

    def low_dim_state(self, variation: int):
        return (*(body_position(grocery.body) for grocery in GROCERIES), body_position("cupboard"),
                body_quat("cupboard"))

    def hand_quat(self, yaw: float) -> np.ndarray:
        """The hand pitched PITCH down while heading along `yaw`, fingers closing horizontally."""
        across = np.array([-math.sin(yaw), math.cos(yaw), 0.0])
        return frame_quat(np.cross(across, self.approach(yaw)), across)

    def approach(self, yaw: float) -> np.ndarray:
        """The direction the hand of hand_quat(yaw) points."""
        return math.cos(self.PITCH) * np.array([math.cos(yaw), math.sin(yaw), 0.0]) + [0.0, 0.0, -math.sin(self.PITCH)]

    def grasp_heading(self, world: World, grocery: Grocery, yaw: float) -> float:
        """The hand's heading for the grasp, along the grocery's depth: the way nearer the cupboard's heading `yaw`,
        unless the pitched hand's body (behind the grasp, 20 cm long across it) would come nearer the other groceries
        than HAND_CLEARANCE and the other way keeps it further from them."""
        nearer = yaw + square_yaw(body_yaw(world.quat(grocery.body)) - yaw, math.pi)
        flipped = nearer - math.copysign(math.pi, nearer - yaw)
        centre = world.position(grocery.body)[:2]
        others = [world.position(other.body)[:2] for other in GROCERIES if other is not grocery]

        def clearance(heading: float) -> float:
            behind = centre - self.HAND_BEHIND * np.array([math.cos(heading), math.sin(heading)])
            points = hand_points(behind, heading)
            return min(float(np.linalg.norm(point - other)) for point in points for other in others)

        near = clearance(nearer)
        return nearer if near >= self.HAND_CLEARANCE or near >= clearance(flipped) else flipped

    def oracle(self, world: World, variation: int) -> list[Waypoint]:
        grocery = GROCERIES[variation]
        cupboard, yaw = world.position("cupboard"), body_yaw(world.quat("cupboard"))
        inward = yaw_rotation(yaw) @ np.array([1.0, 0.0, 0.0])
        quat = self.hand_quat(yaw)
        # Grasped across its width, heading along its depth (grasp_heading), then turned onto the inward heading
        # while carried.
        grasp_yaw = self.grasp_heading(world, grocery, yaw)
        grasp_quat = self.hand_quat(grasp_yaw)
        half_height = grocery.half_size[2]
        grip = np.array([0.0, 0.0, half_height - min(self.GRIP_BELOW_TOP, half_height)])
        grasp = world.position(grocery.body) + grip
        shelf = cupboard + (self.SHELF_DEPTH - self.DEPTH / 2) * inward + [0, 0, self.FLOOR + half_height + 0.01]
        inside = shelf + grip
        outside = inside - (self.SHELF_DEPTH + self.OUTSIDE) * inward
        carry = np.array([0.0, 0.0, self.CARRY])
        # Turned in place in small steps: one joint move through a large turn of the pitched hand swings it wide.
        steps = math.ceil(abs(yaw - grasp_yaw) / self.TURN_STEP)
        turns = [grasp_yaw + (i / steps) * (yaw - grasp_yaw) for i in range(1, steps + 1)]
        return [
            Waypoint(grasp - self.BACK_OFF * self.approach(grasp_yaw) + [0.0, 0.0, self.RAISE], grasp_quat, True),
            Waypoint(grasp, grasp_quat, True, straight=True),
            Waypoint(grasp, grasp_quat, False),
            Waypoint(grasp + carry, grasp_quat, False, straight=True),
            *(Waypoint(grasp + carry, self.hand_quat(heading), False) for heading in turns),
            Waypoint(outside + carry, quat, False),
            Waypoint(outside, quat, False, straight=True),
            Waypoint(inside, quat, False, straight=True),
            Waypoint(inside, quat, True),
            Waypoint(outside, quat, True, straight=True),
        ]


TASK = PutGroceriesInCupboard
