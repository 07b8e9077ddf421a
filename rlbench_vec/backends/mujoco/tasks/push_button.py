"""push_button (RLBench: rlbench/tasks/push_button.py): push the one button, whose base has the
variation's colour (RLBench's 18 button colours: 18 variations), placed at random on the table.

Success (as RLBench): an ordered ConditionSet of one JointCondition, the plunger pressed more than 3 mm;
the red plate turns green once pressed, until the episode ends. Departures: push_buttons' button (a box
with a spring-loaded cylindrical plunger, the plate). State: the button's xyz, then its plunger's
position (metres). Dense reward (ours, docs/tasks.md): reach the plate, press the plunger.
Placement yaw: the button ±π, as upstream's base; layouts the oracle cannot reach are drawn again."""

from __future__ import annotations

import math

import numpy as np

from ..scene import SPAWN_HIGH, SPAWN_LOW, TABLE_TOP_Z, Scene
from .base import (
    TIP,
    Closeness,
    DenseReward,
    Indicator,
    Progress,
    Stage,
    Waypoint,
    World,
    body_position,
    geom_position,
    joint_position,
)
from .conditions import ConditionSet
from .push_buttons import BUTTON_COLORS, PLATE_GREEN, PushButtons

BUTTON = "button0"


class PushButton(PushButtons):
    name = "push_button"
    variation_count = len(BUTTON_COLORS)
    PRESSED = 0.003  # metres: RLBench's JointCondition (PerAct's fork keeps it for this task)

    def build(self, scene: Scene) -> None:
        self.add_button(scene, BUTTON)

    def descriptions(self, variation: int) -> list[str]:
        colour = BUTTON_COLORS[variation][0]
        return [f"push the {colour} button", f"push down the {colour} button",
                f"press the button with the {colour} base", f"press the {colour} button"]

    def init_episode(self, world: World, variation: int, rng: np.random.Generator) -> None:
        position = (*rng.uniform(SPAWN_LOW, SPAWN_HIGH), TABLE_TOP_Z)
        self.reset_button(world, BUTTON, position, BUTTON_COLORS[variation][1], rng.uniform(-math.pi, math.pi))

    def success(self, variation: int) -> ConditionSet:
        return ConditionSet([self.pressed(BUTTON)], order_matters=True)

    def indicators(self, variation: int) -> tuple[Indicator, ...]:
        return (Indicator(self.pressed(BUTTON), (f"{BUTTON}_plate",), PLATE_GREEN),)

    def low_dim_state(self, variation: int):
        return (body_position(BUTTON), joint_position(BUTTON))

    def dense_reward(self, variation: int) -> DenseReward:
        return DenseReward(Stage(Closeness(TIP, geom_position(f"{BUTTON}_plate"))),
                           Stage(Progress(BUTTON, self.PRESSED)))

    def oracle(self, world: World, variation: int) -> list[Waypoint]:
        return self.press(world, BUTTON)


TASK = PushButton
