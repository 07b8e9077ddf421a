"""push_buttons on both embedded backends, and its descriptions as upstream's."""

from indicator_pixels import check_indicator_lights, green_pixels
from task_checks import check_descriptions, check_mjwarp, check_mujoco

TASK = "push_buttons"
# PerAct's RLBench fork (MohitShridhar/RLBench, branch peract), rlbench/tasks/push_buttons.py:
# what init_episode returns, per variation.
UPSTREAM_DESCRIPTIONS = {
    0: [
        "push the maroon button",
        "press the maroon button",
        "push down the button with the maroon base",
    ],
    2: [
        "push the maroon button, then push the green button, then push the blue button",
        "press the maroon button, then press the green button, then press the blue button",
        "push down the button with the maroon base, then the green one, then the blue one",
    ],
    49: [
        "push the maroon button, then push the blue button",
        "press the maroon button, then press the blue button",
        "push down the button with the maroon base, then the blue one",
    ],
}


def test_push_buttons_descriptions_are_upstreams_word_for_word():
    check_descriptions(TASK, UPSTREAM_DESCRIPTIONS)


def test_push_buttons_on_mujoco():
    check_mujoco(TASK, variations=50, descriptions=UPSTREAM_DESCRIPTIONS[0])


def test_push_buttons_on_mjwarp():
    check_mjwarp(TASK)


def test_push_buttons_plates_turn_green_when_pressed():
    check_indicator_lights(TASK, green_pixels)
