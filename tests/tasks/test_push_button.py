"""push_button on both embedded backends, and its descriptions as upstream's."""

from indicator_pixels import check_indicator_lights, green_pixels
from task_checks import check_descriptions, check_mjwarp, check_mujoco

TASK = "push_button"
# RLBench (stepjam/RLBench, master 02720bb), rlbench/tasks/push_button.py:
# what init_episode returns, per variation.
UPSTREAM_DESCRIPTIONS = {
    0: [
        "push the maroon button",
        "push down the maroon button",
        "press the button with the maroon base",
        "press the maroon button",
    ],
    17: [
        "push the white button",
        "push down the white button",
        "press the button with the white base",
        "press the white button",
    ],
}


def test_push_button_descriptions_are_upstreams_word_for_word():
    check_descriptions(TASK, UPSTREAM_DESCRIPTIONS)


def test_push_button_on_mujoco():
    check_mujoco(TASK, variations=18, descriptions=UPSTREAM_DESCRIPTIONS[0])


def test_push_button_on_mjwarp():
    check_mjwarp(TASK)


def test_push_button_plates_turn_green_when_pressed():
    check_indicator_lights(TASK, green_pixels)
