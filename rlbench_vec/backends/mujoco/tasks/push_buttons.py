"""push_buttons (PerAct's RLBench: rlbench/tasks/push_buttons.py): push 1, 2 or 3 coloured buttons in
order. 50 variations (RLBench's cap): variation v pushes `1 + v % 3` buttons whose base colours are the
`v // 3`-th permutation of three of RLBench's 18 button colours; the other buttons get spare colours.

Success (as PerAct's fork): an ordered ConditionSet of JointConditions, each button's plunger pressed more
than 1 mm (stepjam's RLBench: 3 mm), in the described order (a button may spring back once counted). As
RLBench, a button's red plate turns green once it is pressed, until the episode ends. Departures: buttons
are boxes with a cylindrical plunger (the plate) on a spring. State: the three buttons' xyz, then their
plungers' positions (metres, negative when pressed).
Placement yaw: each button ±π (upstream: base ±π and each button ±π on it, which comes to the same
button yaws; its spawn area turning with the base is not modelled: ours is the table's spawn area);
layouts the oracle cannot reach are drawn again."""

from __future__ import annotations

import itertools
import math
import xml.etree.ElementTree as ET

import numpy as np

from ..scene import ARTICULATED, SCENERY, SPAWN_HIGH, SPAWN_LOW, TABLE_TOP_Z, Scene, axis_angle_quat, fmt, geom
from .base import Indicator, Task, Waypoint, World, body_position, joint_position, sample_apart, top_down_quat
from .conditions import ConditionSet, JointCondition
from .objects import mocap_body

# RLBench's button colours (no red: the plungers are red).
BUTTON_COLORS = (
    ("maroon", (0.5, 0.0, 0.0)), ("green", (0.0, 0.5, 0.0)), ("blue", (0.0, 0.0, 1.0)), ("navy", (0.0, 0.0, 0.5)),
    ("yellow", (1.0, 1.0, 0.0)), ("cyan", (0.0, 1.0, 1.0)), ("magenta", (1.0, 0.0, 1.0)),
    ("silver", (0.75, 0.75, 0.75)), ("gray", (0.5, 0.5, 0.5)), ("orange", (1.0, 0.5, 0.0)),
    ("olive", (0.5, 0.5, 0.0)), ("purple", (0.5, 0.0, 0.5)), ("teal", (0.0, 0.5, 0.5)),
    ("azure", (0.0, 0.5, 1.0)), ("violet", (0.5, 0.0, 1.0)), ("rose", (1.0, 0.0, 0.5)),
    ("black", (0.0, 0.0, 0.0)), ("white", (1.0, 1.0, 1.0)),
)
PERMUTATIONS = list(itertools.permutations(range(len(BUTTON_COLORS)), 3))
MAX_TARGET_BUTTONS = 3
BUTTONS = tuple(f"button{i}" for i in range(MAX_TARGET_BUTTONS))
FINGERTIP_BELOW_TCP = 0.007  # the closed fingertips reach this far past the tool centre
PLATE_RED, PLATE_GREEN = (1.0, 0.0, 0.0), (0.0, 1.0, 0.0)  # RLBench's top plate before and after a press


def plan(variation: int) -> tuple[tuple[int, ...], int]:
    """The variation's three button colours (indices into BUTTON_COLORS) and how many to push."""
    return PERMUTATIONS[variation // MAX_TARGET_BUTTONS], 1 + variation % MAX_TARGET_BUTTONS


class PushButtons(Task):
    name = "push_buttons"
    variation_count = min(len(PERMUTATIONS) * MAX_TARGET_BUTTONS, 50)
    PRESSED = 0.001  # metres of plunger travel that count as a push (PerAct's fork's JointCondition)
    BASE_HALF = (0.035, 0.035, 0.015)
    PLUNGER_RADIUS, PLUNGER_HALF, TRAVEL = 0.02, 0.008, 0.015
    PRESS_DEPTH = 0.009  # the fingertips go this far below the plunger's top

    def build(self, scene: Scene) -> None:
        for name in BUTTONS:
            self.add_button(scene, name)

    def add_button(self, scene: Scene, name: str) -> None:
        """A grey base (its colour set per episode) with a red spring-loaded plunger; joint and geom `name`."""
        base = mocap_body(scene.worldbody, name)
        geom(base, "box", (0.5, 0.5, 0.5, 1), SCENERY, name=name, size=self.BASE_HALF,
             pos=(0, 0, self.BASE_HALF[2]))
        plunger = ET.SubElement(base, "body", name=f"{name}_plunger", gravcomp="1",
                                pos=fmt([0, 0, 2 * self.BASE_HALF[2] + self.PLUNGER_HALF]))
        ET.SubElement(plunger, "joint", name=name, type="slide", axis="0 0 1", range=fmt([-self.TRAVEL, 0]),
                      stiffness="300", springref="0", damping="3")
        geom(plunger, "cylinder", (*PLATE_RED, 1), ARTICULATED, name=f"{name}_plate",
             size=(self.PLUNGER_RADIUS, self.PLUNGER_HALF), mass="0.02")

    def reset_button(self, world: World, name: str, position, colour, yaw: float) -> None:
        """Button `name` at `position` (its base on the table) turned `yaw`, base colour `colour`, plunger up,
        plate red."""
        world.set_pose(name, position, axis_angle_quat((0, 0, 1), yaw))
        world.set_colour(name, colour)
        world.set_colour(f"{name}_plate", PLATE_RED)
        world.set_joint(name, 0.0)

    def pressed(self, name: str) -> JointCondition:
        return JointCondition(name, self.PRESSED)

    def descriptions(self, variation: int) -> list[str]:
        colours, count = plan(variation)
        names = [BUTTON_COLORS[i][0] for i in colours[:count]]
        then = "".join(f", then push the {n} button" for n in names[1:])
        press = "".join(f", then press the {n} button" for n in names[1:])
        one = "".join(f", then the {n} one" for n in names[1:])
        return [f"push the {names[0]} button{then}", f"press the {names[0]} button{press}",
                f"push down the button with the {names[0]} base{one}"]

    def init_episode(self, world: World, variation: int, rng: np.random.Generator) -> None:
        colours, count = plan(variation)
        spare = [i for i in range(len(BUTTON_COLORS)) if i not in colours[:count]]
        others = rng.choice(spare, size=MAX_TARGET_BUTTONS - count, replace=False)
        positions = sample_apart(rng, MAX_TARGET_BUTTONS, SPAWN_LOW, SPAWN_HIGH, min_distance=0.12)
        for name, xy, colour in zip(BUTTONS, positions, [*colours[:count], *others]):
            self.reset_button(world, name, (*xy, TABLE_TOP_Z), BUTTON_COLORS[colour][1],
                              rng.uniform(-math.pi, math.pi))

    def success(self, variation: int) -> ConditionSet:
        _, count = plan(variation)
        return ConditionSet([self.pressed(name) for name in BUTTONS[:count]], order_matters=True)

    def indicators(self, variation: int) -> tuple[Indicator, ...]:
        return tuple(Indicator(self.pressed(name), (f"{name}_plate",), PLATE_GREEN) for name in BUTTONS)

    def low_dim_state(self, variation: int):
        return (*(body_position(name) for name in BUTTONS), *(joint_position(name) for name in BUTTONS))

    def oracle(self, world: World, variation: int) -> list[Waypoint]:
        _, count = plan(variation)
        return [waypoint for name in BUTTONS[:count] for waypoint in self.press(world, name)]

    def press(self, world: World, name: str) -> list[Waypoint]:
        """Above button `name`, straight down through its plunger with closed fingers, and back up."""
        quat = top_down_quat(math.pi / 4)
        top = 2 * (self.BASE_HALF[2] + self.PLUNGER_HALF)
        above = world.position(name) + [0, 0, top + 0.08]
        pressed = world.position(name) + [0, 0, top - self.PRESS_DEPTH + FINGERTIP_BELOW_TCP]
        return [Waypoint(above, quat, False), Waypoint(pressed, quat, False, straight=True),
                Waypoint(above, quat, False, straight=True)]


TASK = PushButtons
