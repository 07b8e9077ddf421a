"""insert_onto_square_peg (PerAct's RLBench: rlbench/tasks/insert_onto_square_peg.py): put the square ring
onto the spoke of the variation's colour (RLBench's 20 colours); the other two spokes have distractor colours.
As upstream, the spoke given the variation's colour is drawn per episode, and the success centre moved to it.

Success (as RLBench): the ring detected around the chosen spoke (RLBench's four detectors round the spoke's
foot become one box region there, on the success centre, detecting any part of the ring). Departures: the ring
is a frame of four boxes (a 6 cm square hole), the spokes square pegs on a common bar. State: ring xyz +
quaternion xyzw, then spoke0's, spoke1's and spoke2's xyz, in their order along the bar (the chosen one is
drawn per episode, so the order does not tell it).
Placement yaw: the base (the spoke bar and the area the ring is drawn in beside it) ±π about its middle, as
upstream's, and the ring ±π on it; layouts the oracle cannot reach are drawn again.
Oracle: grasp a bar, carry the ring turned square with the spoke, let it go round the spoke with the palm above
the spoke's top (lower, the palm meets it) and the ring off centre towards the grasped bar (the finger inside
the ring stalls against the spoke as it opens), then push that bar towards the spoke with the closed fingers:
the region (2 cm round the spoke's axis) misses a ring lying centred on the spoke, whose bars are 3 cm away."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import numpy as np

from ..scene import SCENERY, TABLE_TOP_Z, Scene, axis_angle_quat, geom
from .base import (
    COLORS,
    Task,
    Waypoint,
    World,
    base_offset,
    body_position,
    body_quat,
    body_yaw,
    pick_and_place,
    pick_colours,
    square_yaw,
    top_down_quat,
)
from .conditions import DetectedCondition
from .objects import FRICTION, mocap_body, region

SPOKES = ("spoke0", "spoke1", "spoke2")  # in their order along the bar; the chosen one is drawn per episode
CENTRE = "success_centre"  # upstream's success_centre: the chosen spoke's foot, where the region is


class InsertOntoSquarePeg(Task):
    name = "insert_onto_square_peg"
    variation_count = len(COLORS)
    RING_OUTER, RING_BAR, RING_HALF_HEIGHT = 0.05, 0.01, 0.015  # half sizes: the hole is 6 cm wide
    SPOKE_HALF, SPOKE_HALF_HEIGHT = 0.012, 0.06
    SPACING = 0.12  # between spokes
    BAR = (0.06, -0.14)  # the spoke bar's middle, base frame (from the base's middle)
    RING_AREA = ((-0.12, 0.08), (0.0, 0.2))  # where the ring's centre is drawn, base frame
    CLEARANCE = 2 * SPOKE_HALF_HEIGHT + 0.06  # the oracle's carry and push approach, above the let-go pose
    LET_GO_HEIGHT = 0.09  # the TCP above the table where the ring is let go: the palm above the spoke's top
    LET_GO_OFF_CENTRE = 0.014  # the ring's centre let go this far from the spoke, towards the grasped bar
    PUSH_HEIGHT = 0.015  # the closed fingers push the ring's bar this high above the table ...
    PUSH_FROM, PUSH_TO = 0.095, 0.047  # ... from this far from the spoke's axis to this far

    def build(self, scene: Scene) -> None:
        for name in SPOKES:
            geom(mocap_body(scene.worldbody, name), "box", (0.5, 0.5, 0.5, 1.0), SCENERY, name=name,
                 size=(self.SPOKE_HALF, self.SPOKE_HALF, self.SPOKE_HALF_HEIGHT), pos=(0, 0, self.SPOKE_HALF_HEIGHT))
        region(mocap_body(scene.worldbody, CENTRE), "success", half_size=(0.02, 0.02, 0.03), position=(0, 0, 0.03))
        ring = ET.SubElement(scene.worldbody, "body", name="ring", pos="0 0 1")
        ET.SubElement(ring, "freejoint", name="ring")
        middle = self.RING_OUTER - self.RING_BAR
        across, along = (self.RING_BAR, self.RING_OUTER), (self.RING_OUTER, self.RING_BAR)
        for x, y, half in ((middle, 0, across), (-middle, 0, across), (0, middle, along), (0, -middle, along)):
            geom(ring, "box", (0.9, 0.6, 0.2, 1.0), SCENERY, size=(*half, self.RING_HALF_HEIGHT), pos=(x, y, 0),
                 mass="0.01", friction=FRICTION, condim="4")

    def descriptions(self, variation: int) -> list[str]:
        colour = COLORS[variation][0]
        return [f"put the ring on the {colour} spoke", f"slide the ring onto the {colour} colored spoke",
                f"place the ring onto the {colour} spoke"]

    def init_episode(self, world: World, variation: int, rng: np.random.Generator) -> None:
        yaw = rng.uniform(-math.pi, math.pi)
        middle = np.array([rng.uniform(0.15, 0.22), rng.uniform(-0.05, 0.05), TABLE_TOP_Z])
        turned = axis_angle_quat((0, 0, 1), yaw)
        slots = rng.permutation(3)  # slots[0]: the chosen spoke, which takes the variation's colour
        for slot, colour in zip(slots, pick_colours(rng, variation, 2)):
            world.set_pose(SPOKES[slot], middle + base_offset(yaw, self.bar_place(slot)), turned)
            world.set_colour(SPOKES[slot], colour)
        world.set_pose(CENTRE, middle + base_offset(yaw, self.bar_place(slots[0])), turned)
        ring = middle + base_offset(yaw, rng.uniform(*self.RING_AREA)) + [0, 0, self.RING_HALF_HEIGHT]
        world.set_pose("ring", ring, axis_angle_quat((0, 0, 1), yaw + rng.uniform(-math.pi, math.pi)))

    def bar_place(self, slot: int) -> np.ndarray:
        """Where spoke `slot` stands, base frame."""
        return np.array(self.BAR) + [0.0, (slot - 1) * self.SPACING]

    def success(self, variation: int) -> DetectedCondition:
        return DetectedCondition("ring", "success")

    def low_dim_state(self, variation: int):
        return (body_position("ring"), body_quat("ring"), *(body_position(name) for name in SPOKES))

    def oracle(self, world: World, variation: int) -> list[Waypoint]:
        ring, ring_yaw = world.position("ring"), body_yaw(world.quat("ring"))
        spoke, spoke_yaw = world.position(CENTRE), body_yaw(world.quat(CENTRE))
        middle = self.RING_OUTER - self.RING_BAR
        # fingers close across the bar at the ring's +x, along the ring's x axis: the hand's yaw is the ring's minus
        # 90 degrees; carried, the hand turns the ring square with the spoke (the success region's axes)
        hand_yaw = square_yaw(ring_yaw - math.pi / 2, math.pi)
        turn = square_yaw(spoke_yaw - ring_yaw, math.pi / 2)
        along = np.array([math.cos(ring_yaw + turn), math.sin(ring_yaw + turn), 0.0])  # the grasped bar, let go
        drop = spoke + (middle + self.LET_GO_OFF_CENTRE) * along + [0.0, 0.0, self.LET_GO_HEIGHT]
        grasp = ring + middle * np.array([math.cos(ring_yaw), math.sin(ring_yaw), 0.0])
        placed = pick_and_place(grasp, top_down_quat(hand_yaw), drop, clearance=self.CLEARANCE,
                                drop_quat=top_down_quat(hand_yaw + turn))
        return placed + self.seat(spoke, spoke_yaw, drop)

    def seat(self, spoke: np.ndarray, spoke_yaw: float, hand: np.ndarray) -> list[Waypoint]:
        """The closed fingers, across the ring's bar on the side of the spoke nearer the hand (never along the
        spoke bar, where the other spokes stand), push that bar towards the spoke: the ring, wherever it fell
        round the spoke, comes to rest against it, its bar inside the success region."""
        side = np.array([math.cos(spoke_yaw), math.sin(spoke_yaw), 0.0])
        side = side if side @ (hand - spoke) >= 0 else -side
        quat = top_down_quat(square_yaw(spoke_yaw, math.pi))  # the fingers along the spoke bar
        low = np.array([spoke[0], spoke[1], TABLE_TOP_Z + self.PUSH_HEIGHT])
        start, end = low + self.PUSH_FROM * side, low + self.PUSH_TO * side
        above = start + [0.0, 0.0, self.CLEARANCE]
        return [
            Waypoint(above, quat, False),
            Waypoint(start, quat, False, straight=True),
            Waypoint(end, quat, False, straight=True),
            Waypoint(end + [0.0, 0.0, self.CLEARANCE], quat, False, straight=True),
        ]


TASK = InsertOntoSquarePeg
