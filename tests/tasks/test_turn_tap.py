"""turn_tap on both embedded backends, and its descriptions as upstream's."""

from task_checks import check_descriptions, check_mjwarp, check_mujoco

TASK = "turn_tap"
# PerAct's RLBench fork (MohitShridhar/RLBench, branch peract), rlbench/tasks/turn_tap.py:
# what init_episode returns, per variation.
UPSTREAM_DESCRIPTIONS = {
    0: [
        "turn left tap",
        "rotate the left tap",
        "grasp the left tap and turn it",
    ],
    1: [
        "turn right tap",
        "rotate the right tap",
        "grasp the right tap and turn it",
    ],
}


def test_turn_tap_descriptions_are_upstreams_word_for_word():
    check_descriptions(TASK, UPSTREAM_DESCRIPTIONS)


def test_turn_tap_on_mujoco():
    check_mujoco(TASK, variations=2, descriptions=UPSTREAM_DESCRIPTIONS[0])


def test_turn_tap_on_mjwarp():
    check_mjwarp(TASK)
