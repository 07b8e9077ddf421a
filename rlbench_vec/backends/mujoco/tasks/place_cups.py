"""place_cups (PerAct's RLBench fork, MohitShridhar/RLBench branch `peract`: rlbench/tasks/place_cups.py):
put 1, 2 or 3 of the three mugs (the variation, 3: variation i places mugs 0..i) on the spokes of a mug tree.

Success (as RLBench): nothing grasped and each of the first i + 1 mugs detected at one of the three
spokes (an OrConditions over the spokes' detectors per mug).
Placement: the tree turns ±π/2, upstream's `base_rotation_bounds` ([0.0, 0.0, -np.pi / 2],
[0.0, 0.0, np.pi / 2]); each mug is turned on its own by ±3.14 from the tree's yaw, as upstream's
`SpawnBoundary.sample(c, min_distance=0.10)` (whose default rotation is ±3.14) turns each, the mugs 10 cm
apart at least (its min_distance), in the table's spawn area clear of the tree.
Departures: primitives for meshes, and the mugs are set upright on saucers at the spokes' ends instead of
hung by their handles (not tried here: it needs a grasp of the handle and a move threading the handle onto
the spoke, which the top-down friction grasps of the other tasks do not give); the detectors sit on the
saucers. The mugs are cylinders (colliding as a box inside, flat pads squeezing a cylinder out) with a
handle that is only drawn; the oracle holds a mug by its body. State: the three mugs' xyz, the three
detectors' centres."""

from __future__ import annotations

import math

import numpy as np

from ..scene import SCENERY, SPAWN_HIGH, SPAWN_LOW, TABLE_TOP_Z, VISUAL, Scene, axis_angle_quat, geom
from .base import (
    DEFAULT_YAW,
    Task,
    Waypoint,
    World,
    body_position,
    body_yaw,
    site_position,
    square_yaw,
    top_down_quat,
)
from .conditions import ConditionSet, DetectedCondition, NothingGrasped, OrConditions
from .objects import held_cylinder, mocap_body, region

MUGS = ("mug0", "mug1", "mug2")
SPOKES = 3


class PlaceCups(Task):
    name = "place_cups"
    variation_count = 3
    YAW_BOUND = math.pi / 2  # upstream's base_rotation_bounds
    RADIUS, HALF_HEIGHT = 0.03, 0.04
    GRASP_BELOW_TOP = 0.035
    POLE_HEIGHT, REACH = 0.22, 0.11  # the tree's pole; the saucers' centres from the pole's axis
    SAUCER_RADIUS, SAUCER_HALF = 0.045, 0.004
    SAUCER_HEIGHTS = (0.09, 0.115, 0.14)  # the saucers' tops above the table, per spoke
    CENTRE_X, CENTRE_Y = (0.28, 0.36), (-0.1, 0.1)
    CLEAR_OF_TREE = 0.27  # mugs' centres from the tree's axis, at least

    def spoke_yaw(self, spoke: int) -> float:
        """The spoke's direction in the tree's frame."""
        return 2 * math.pi * spoke / SPOKES

    def build(self, scene: Scene) -> None:
        wood, white = (0.55, 0.38, 0.25, 1.0), (0.92, 0.9, 0.85, 1.0)
        tree = mocap_body(scene.worldbody, "mug_tree")
        geom(tree, "cylinder", wood, SCENERY, size=(0.06, 0.006), pos=(0, 0, 0.006))
        geom(tree, "cylinder", wood, SCENERY, size=(0.012, self.POLE_HEIGHT / 2), pos=(0, 0, self.POLE_HEIGHT / 2))
        for spoke, height in enumerate(self.SAUCER_HEIGHTS):
            direction = np.array([math.cos(self.spoke_yaw(spoke)), math.sin(self.spoke_yaw(spoke)), 0.0])
            end = self.REACH * direction + [0, 0, height - 2 * self.SAUCER_HALF - 0.008]
            geom(tree, "capsule", wood, SCENERY, fromto=(0, 0, end[2], *end), size="0.008")
            saucer = end + [0, 0, 0.008 + self.SAUCER_HALF]
            geom(tree, "cylinder", white, SCENERY, size=(self.SAUCER_RADIUS, self.SAUCER_HALF), pos=saucer)
            region(tree, f"success_detector{spoke}", radius=0.04, position=saucer + [0, 0, 0.04])
        for name in MUGS:
            mug = held_cylinder(scene.worldbody, name, self.RADIUS, self.HALF_HEIGHT, (0.8, 0.8, 0.85, 1.0))
            geom(mug, "box", (0.8, 0.8, 0.85, 1.0), VISUAL, size=(0.012, 0.005, 0.025),
                 pos=(self.RADIUS + 0.01, 0, 0), mass="0.001")

    def descriptions(self, variation: int) -> list[str]:
        if variation == 0:
            return ["place 1 cup on the cup holder", "pick up one cup and put it on the mug tree",
                    "move 1 mug from the table to the cup holder",
                    "pick up one cup and slide its handle onto a spoke on the mug holder"]
        count = variation + 1
        return [f"place {count} cups on the cup holder", f"pick up {count} cups and place them on the holder",
                f"move {count} cups from the table to the mug tree",
                f"pick up {count} mugs and slide their handles onto the cup holder spokes"]

    def init_episode(self, world: World, variation: int, rng: np.random.Generator) -> None:
        yaw = rng.uniform(-self.YAW_BOUND, self.YAW_BOUND)
        tree = np.array([rng.uniform(*self.CENTRE_X), rng.uniform(*self.CENTRE_Y), TABLE_TOP_Z])
        quat = axis_angle_quat((0, 0, 1), yaw)
        world.set_pose("mug_tree", tree, quat)
        spots: list[np.ndarray] = []
        while len(spots) < len(MUGS):
            xy = rng.uniform(SPAWN_LOW, SPAWN_HIGH)
            if (np.linalg.norm(xy - tree[:2]) >= self.CLEAR_OF_TREE
                    and all(np.linalg.norm(xy - spot) >= 0.1 for spot in spots)):
                spots.append(xy)
        for name, xy in zip(MUGS, spots):  # each turned on its own, as upstream's SpawnBoundary.sample
            own = axis_angle_quat((0, 0, 1), yaw + rng.uniform(-DEFAULT_YAW, DEFAULT_YAW))
            world.set_pose(name, (*xy, TABLE_TOP_Z + self.HALF_HEIGHT), own)

    def success(self, variation: int) -> ConditionSet:
        on_spokes = [OrConditions([DetectedCondition(mug, f"success_detector{spoke}") for spoke in range(SPOKES)])
                     for mug in MUGS[:variation + 1]]
        return ConditionSet([NothingGrasped(), *on_spokes])

    def low_dim_state(self, variation: int):
        return (*(body_position(mug) for mug in MUGS),
                *(site_position(f"success_detector{spoke}") for spoke in range(SPOKES)))

    def oracle(self, world: World, variation: int) -> list[Waypoint]:
        tree_yaw = body_yaw(world.quat("mug_tree"))
        grip = np.array([0.0, 0.0, self.HALF_HEIGHT - self.GRASP_BELOW_TOP])
        waypoints: list[Waypoint] = []
        for spoke, mug in enumerate(MUGS[:variation + 1]):
            grasp = world.position(mug) + grip
            grasp_quat = top_down_quat(square_yaw(body_yaw(world.quat(mug)), math.pi))  # fingers on the flat sides
            # Over the saucer the hand's long side runs across the spoke, clear of the pole.
            place_quat = top_down_quat(square_yaw(tree_yaw + self.spoke_yaw(spoke), math.pi))
            saucer = world.site_position(f"success_detector{spoke}") - [0, 0, 0.04]
            drop = saucer + [0, 0, self.HALF_HEIGHT + 0.006] + grip
            carry = TABLE_TOP_Z + max(self.SAUCER_HEIGHTS) + 2 * self.HALF_HEIGHT + 0.03  # the mug's bottom over all
            lifted = np.array([grasp[0], grasp[1], carry + self.HALF_HEIGHT + grip[2]])
            above = np.array([drop[0], drop[1], lifted[2]])
            waypoints += [
                Waypoint(grasp + [0, 0, 0.1], grasp_quat, True),
                Waypoint(grasp, grasp_quat, True, straight=True),
                Waypoint(grasp, grasp_quat, False),
                Waypoint(lifted, grasp_quat, False, straight=True),
                Waypoint(above, place_quat, False, straight=True),
                Waypoint(drop, place_quat, False, straight=True),
                Waypoint(drop, place_quat, True),
                Waypoint(above, place_quat, True, straight=True),
            ]
        return waypoints


TASK = PlaceCups
