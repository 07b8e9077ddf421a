"""light_bulb_in on both embedded backends, its descriptions as upstream's, a state that does not tell the
chosen bulb, and the glass turning yellow in the lamp."""

import numpy as np
from indicator_pixels import check_indicator_lights, yellow_pixels
from task_checks import check_descriptions, check_mjwarp, check_mujoco
from upstream_checks import check_state_hides_target, coloured

from rlbench_vec.backends.mujoco.tasks.base import COLORS

TASK = "light_bulb_in"
# PerAct's RLBench fork (MohitShridhar/RLBench, branch peract), rlbench/tasks/light_bulb_in.py:
# what init_episode returns, per variation.
UPSTREAM_DESCRIPTIONS = {
    0: [
        "screw in the red light bulb",
        "screw the light bulb from the red holder into the lamp",
        "pick up the light bulb from the red stand, lift it up to just above the lamp, then screw it down into the "
        "lamp in a clockwise fashion",
        "put the light bulb from the red casing into the lamp",
    ],
    19: [
        "screw in the white light bulb",
        "screw the light bulb from the white holder into the lamp",
        "pick up the light bulb from the white stand, lift it up to just above the lamp, then screw it down into the "
        "lamp in a clockwise fashion",
        "put the light bulb from the white casing into the lamp",
    ],
}


def test_light_bulb_in_descriptions_are_upstreams_word_for_word():
    check_descriptions(TASK, UPSTREAM_DESCRIPTIONS)


def test_light_bulb_in_on_mujoco():
    check_mujoco(TASK, variations=20, descriptions=UPSTREAM_DESCRIPTIONS[0])


def test_light_bulb_in_on_mjwarp():
    check_mjwarp(TASK)


def test_light_bulb_in_state_does_not_tell_the_chosen_bulb():
    # upstream's holder of variation v is bulb_holder{v % 2}, the one of the variation's colour
    check_state_hides_target(TASK, [(0, 0), (0, 1)], chosen_bulb)


def chosen_bulb(sim, variation: int) -> np.ndarray:
    """The bulb standing on the holder of the variation's colour."""
    holder = sim.world.position(coloured(sim, ("holder0", "holder1"), COLORS[variation][1]))
    bulbs = [sim.world.position(name) for name in ("bulb0", "bulb1")]
    return min(bulbs, key=lambda bulb: float(np.linalg.norm(bulb[:2] - holder[:2])))


def test_light_bulb_in_glass_turns_yellow_in_the_lamp():
    check_indicator_lights(TASK, yellow_pixels)
