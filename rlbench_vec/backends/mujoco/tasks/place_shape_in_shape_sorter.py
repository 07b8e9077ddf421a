"""place_shape_in_shape_sorter (PerAct's RLBench fork, MohitShridhar/RLBench branch `peract`:
rlbench/tasks/place_shape_in_shape_sorter.py): put the shape of the variation (cube, cylinder, triangular
prism, star, moon: RLBench's order, 5) into the shape sorter.

Success (as RLBench): the shape detected inside the sorter.
Placement: the file has no `base_rotation_bounds`, so the sorter turns Task's default ±3.14; the shapes are
drawn at least 0.05 m apart with yaws ±3.14, as upstream's `SpawnBoundary.sample(s, min_distance=0.05)`
(default rotation ±3.14), in the table's spawn area (which does not turn), drawn again while any lies within
5 cm of the turned sorter (upstream samples them on a boundary in its scene file).
Departures: the five shapes are drawn from primitives (the prism a box turned 45° about its length, the star
four crossed bars, the moon a capsule) and all collide as the same 4 cm box; the sorter is a box-built case
with five 6 cm square holes in its lid, one per shape in the same order, which any shape fits through.
State: the five shapes' xyz in RLBench's order (the chosen one is the variation's), then the sorter's xyz."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import numpy as np

from ..scene import SCENERY, TABLE_TOP_Z, VISUAL, Scene, axis_angle_quat, fmt, geom
from .base import (
    DEFAULT_YAW,
    Task,
    Waypoint,
    World,
    body_position,
    body_yaw,
    clearest_face_yaw,
    closing_direction,
    hand_points,
    pick_and_place,
    sample_apart,
    square_yaw,
    top_down_quat,
)
from .conditions import DetectedCondition
from .objects import FRICTION, mocap_body, region

SHAPE_NAMES = ("cube", "cylinder", "triangular prism", "star", "moon")
SHAPES = tuple(name.replace(" ", "_") for name in SHAPE_NAMES)
HOLE_Y = (-0.14, -0.07, 0.0, 0.07, 0.14)  # sorter frame, one hole per shape
COLOURS = ((0.9, 0.2, 0.2), (0.2, 0.5, 0.9), (0.95, 0.8, 0.1), (0.3, 0.75, 0.3), (0.7, 0.3, 0.8))


class PlaceShapeInShapeSorter(Task):
    name = "place_shape_in_shape_sorter"
    variation_count = len(SHAPE_NAMES)
    HALF = 0.02  # each shape's collision box
    SORTER_HALF = (0.05, 0.18, 0.05)
    HOLE_HALF, WALL = 0.03, 0.005
    MIN_DISTANCE = 0.05  # between the shapes' centres (upstream's SpawnBoundary min_distance)
    FINGER_REACH = 0.052  # from the tool centre to an open finger's pad, along the fingers
    SHAPE_RADIUS = 0.04  # a shape's box (its half-diagonal) and a finger pad's half-width, as a circle

    def build(self, scene: Scene) -> None:
        for name, rgb in zip(SHAPES, COLOURS):
            self.add_shape(scene, name, (*rgb, 1.0))
        grey = (0.6, 0.55, 0.5, 1.0)
        sorter = mocap_body(scene.worldbody, "shape_sorter")
        (dx, dy, dz), wall = self.SORTER_HALF, self.WALL
        for side in (-1, 1):
            geom(sorter, "box", grey, SCENERY, size=(wall, dy, dz), pos=(side * (dx - wall), 0, dz))
            geom(sorter, "box", grey, SCENERY, size=(dx, wall, dz), pos=(0, side * (dy - wall), dz))
            # The lid: strips in front of and behind the holes, and between them.
            strip = (dx - self.HOLE_HALF) / 2
            geom(sorter, "box", grey, SCENERY, size=(strip, dy, wall), pos=(side * (dx - strip), 0, 2 * dz - wall))
        between = [((a + b) / 2, (b - a) / 2 - self.HOLE_HALF) for a, b in zip(HOLE_Y, HOLE_Y[1:])]
        end = (dy - wall - HOLE_Y[-1] - self.HOLE_HALF) / 2  # from the last hole to the side wall
        ends = [(side * (HOLE_Y[-1] + self.HOLE_HALF + end), end) for side in (-1, 1)]
        for y, half_width in (*between, *ends):
            geom(sorter, "box", grey, SCENERY, size=(self.HOLE_HALF, half_width, wall), pos=(0, y, 2 * dz - wall))
        region(sorter, "success", half_size=(dx - 2 * wall, dy - 2 * wall, dz - 2 * wall), position=(0, 0, dz))

    def add_shape(self, scene: Scene, name: str, rgba) -> None:
        """A loose shape colliding as a box (geom group 3, not drawn), drawn as its shape."""
        h = self.HALF
        body = ET.SubElement(scene.worldbody, "body", name=name, pos="0 0 1")
        ET.SubElement(body, "freejoint", name=name)
        geom(body, "box", (0.0, 0.0, 0.0, 0.0), {**SCENERY, "group": "3"}, size=(h, h, h), mass="0.05",
             friction=FRICTION, condim="4")
        if name == "cube":
            geom(body, "box", rgba, VISUAL, size=(h, h, h), mass="0")
        elif name == "cylinder":
            geom(body, "cylinder", rgba, VISUAL, size=(h, h), mass="0")
        elif name == "triangular_prism":
            geom(body, "box", rgba, VISUAL, size=(h, h / math.sqrt(2), h / math.sqrt(2)), mass="0",
                 quat=fmt(axis_angle_quat((1, 0, 0), math.pi / 4)))
        elif name == "star":
            for k in range(4):
                geom(body, "box", rgba, VISUAL, size=(h, 0.006, h), mass="0",
                     quat=fmt(axis_angle_quat((0, 0, 1), k * math.pi / 4)))
        else:
            geom(body, "capsule", rgba, VISUAL, size="0.012", fromto=(-h + 0.012, 0, 0, h - 0.012, 0, 0), mass="0")

    def descriptions(self, variation: int) -> list[str]:
        shape = SHAPE_NAMES[variation]
        return [f"put the {shape} in the shape sorter", f"pick up the {shape} and put it in the sorter",
                f"place the {shape} into its slot in the shape sorter", f"slot the {shape} into the shape sorter"]

    def init_episode(self, world: World, variation: int, rng: np.random.Generator) -> None:
        sorter = np.array([rng.uniform(0.3, 0.35), rng.uniform(-0.05, 0.05)])
        yaw = rng.uniform(-DEFAULT_YAW, DEFAULT_YAW)
        world.set_pose("shape_sorter", (*sorter, TABLE_TOP_Z), axis_angle_quat((0, 0, 1), yaw))
        shapes = sample_apart(rng, len(SHAPES), (0.0, -0.28), (0.17, 0.28), min_distance=self.MIN_DISTANCE)
        while any(self.near_sorter(xy - sorter, yaw) for xy in shapes):  # a turned sorter reaches into the area
            shapes = sample_apart(rng, len(SHAPES), (0.0, -0.28), (0.17, 0.28), min_distance=self.MIN_DISTANCE)
        for name, xy in zip(SHAPES, shapes):
            world.set_pose(name, (*xy, TABLE_TOP_Z + self.HALF),
                           axis_angle_quat((0, 0, 1), rng.uniform(-DEFAULT_YAW, DEFAULT_YAW)))

    def near_sorter(self, offset: np.ndarray, yaw: float) -> bool:
        """Whether a shape `offset` (xy) from the sorter's middle is within 5 cm of the sorter (its frame
        turned by `yaw`), where the hand coming down for it would meet the sorter."""
        along = abs(-math.sin(yaw) * offset[0] + math.cos(yaw) * offset[1])
        across = abs(math.cos(yaw) * offset[0] + math.sin(yaw) * offset[1])
        margin = self.HALF + 0.05
        return across < self.SORTER_HALF[0] + margin and along < self.SORTER_HALF[1] + margin

    def success(self, variation: int) -> DetectedCondition:
        return DetectedCondition(SHAPES[variation], "success")

    def low_dim_state(self, variation: int):
        return (*(body_position(name) for name in SHAPES), body_position("shape_sorter"))

    def grasp_yaw(self, world: World, shape: str) -> float:
        """Of the two gripper yaws with the fingers on the shape's faces, the one whose open fingers and hand
        (its 20 cm long side runs along the fingers) keep further from the other shapes and the sorter."""
        centre = world.position(shape)[:2]
        others = [world.position(name)[:2] for name in SHAPES if name != shape]
        sorter, sorter_yaw = world.position("shape_sorter")[:2], body_yaw(world.quat("shape_sorter"))

        def clearance(yaw: float) -> float:
            fingers = [centre + side * self.FINGER_REACH * closing_direction(yaw) for side in (-1, 1)]
            to_shapes = min(float(np.linalg.norm(finger - other)) for finger in fingers for other in others)
            to_sorter = min(self.sorter_distance(point - sorter, sorter_yaw) for point in hand_points(centre, yaw))
            return min(to_shapes - self.SHAPE_RADIUS, to_sorter)

        return clearest_face_yaw(body_yaw(world.quat(shape)), clearance)

    def sorter_distance(self, offset: np.ndarray, yaw: float) -> float:
        """How far a point `offset` (xy) from the sorter's middle lies outside its footprint (turned by
        `yaw`); negative inside."""
        along = abs(-math.sin(yaw) * offset[0] + math.cos(yaw) * offset[1]) - self.SORTER_HALF[1]
        across = abs(math.cos(yaw) * offset[0] + math.sin(yaw) * offset[1]) - self.SORTER_HALF[0]
        return float(np.hypot(max(along, 0.0), max(across, 0.0)) + min(max(along, across), 0.0))

    def oracle(self, world: World, variation: int) -> list[Waypoint]:
        shape = SHAPES[variation]
        grasp_yaw = self.grasp_yaw(world, shape)
        sorter, yaw = world.position("shape_sorter"), body_yaw(world.quat("shape_sorter"))
        hole = sorter + HOLE_Y[variation] * np.array([-math.sin(yaw), math.cos(yaw), 0.0])
        drop = hole + [0, 0, 2 * self.SORTER_HALF[2] + self.HALF + 0.015]  # let go just above the hole
        # Turned square to the hole (the nearest such yaw), so the shape drops through with room all round.
        drop_yaw = grasp_yaw + square_yaw(yaw - grasp_yaw, math.pi / 2)
        return pick_and_place(world.position(shape), top_down_quat(grasp_yaw), drop, clearance=0.12,
                              drop_quat=top_down_quat(drop_yaw))


TASK = PlaceShapeInShapeSorter
