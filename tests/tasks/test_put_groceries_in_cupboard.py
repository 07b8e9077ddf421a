"""put_groceries_in_cupboard on both embedded backends, and its descriptions as upstream's."""

from task_checks import check_descriptions, check_mjwarp, check_mujoco

TASK = "put_groceries_in_cupboard"
# RLBench (stepjam/RLBench; PerAct's fork has the same file), rlbench/tasks/put_groceries_in_cupboard.py:
# what init_episode returns, per variation.
UPSTREAM_DESCRIPTIONS = {
    0: [
        "put the crackers in the cupboard",
        "pick up the crackers and place it in the cupboard",
        "move the crackers to the bottom shelf",
        "put away the crackers in the cupboard",
    ],
    1: [
        "put the chocolate jello in the cupboard",
        "pick up the chocolate jello and place it in the cupboard",
        "move the chocolate jello to the bottom shelf",
        "put away the chocolate jello in the cupboard",
    ],
    8: [
        "put the sugar in the cupboard",
        "pick up the sugar and place it in the cupboard",
        "move the sugar to the bottom shelf",
        "put away the sugar in the cupboard",
    ],
}


def test_put_groceries_in_cupboard_descriptions_are_upstreams_word_for_word():
    check_descriptions(TASK, UPSTREAM_DESCRIPTIONS)


def test_put_groceries_in_cupboard_on_mujoco():
    check_mujoco(TASK, variations=9, descriptions=UPSTREAM_DESCRIPTIONS[0])


def test_put_groceries_in_cupboard_on_mjwarp():
    check_mjwarp(TASK)
