"""pick_up_cup on both embedded backends, and its descriptions as upstream's."""

from task_checks import check_descriptions, check_mjwarp, check_mujoco

TASK = "pick_up_cup"
# RLBench (stepjam/RLBench, master 02720bb), rlbench/tasks/pick_up_cup.py:
# what init_episode returns, per variation.
UPSTREAM_DESCRIPTIONS = {
    0: [
        "pick up the red cup",
        "grasp the red cup and lift it",
        "lift the red cup",
    ],
    19: [
        "pick up the white cup",
        "grasp the white cup and lift it",
        "lift the white cup",
    ],
}


def test_pick_up_cup_descriptions_are_upstreams_word_for_word():
    check_descriptions(TASK, UPSTREAM_DESCRIPTIONS)


def test_pick_up_cup_on_mujoco():
    check_mujoco(TASK, variations=20, descriptions=UPSTREAM_DESCRIPTIONS[0])


def test_pick_up_cup_on_mjwarp():
    check_mjwarp(TASK)
