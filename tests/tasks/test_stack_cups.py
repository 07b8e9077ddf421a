"""stack_cups on both embedded backends, and its descriptions as upstream's."""

from task_checks import check_descriptions, check_mjwarp, check_mujoco

TASK = "stack_cups"
# PerAct's RLBench fork (MohitShridhar/RLBench, branch peract), rlbench/tasks/stack_cups.py:
# what init_episode returns, per variation.
UPSTREAM_DESCRIPTIONS = {
    0: [
        "stack the other cups on top of the red cup",
        "place two of the cups onto the odd cup out",
        "put the remaining two cups on top of the red cup",
        "pick up and set the cups down into the red cup",
        "create a stack of cups with the red cup as its base",
        "keeping the red cup on the table, stack the other two onto it",
    ],
    19: [
        "stack the other cups on top of the white cup",
        "place two of the cups onto the odd cup out",
        "put the remaining two cups on top of the white cup",
        "pick up and set the cups down into the white cup",
        "create a stack of cups with the white cup as its base",
        "keeping the white cup on the table, stack the other two onto it",
    ],
}


def test_stack_cups_descriptions_are_upstreams_word_for_word():
    check_descriptions(TASK, UPSTREAM_DESCRIPTIONS)


def test_stack_cups_on_mujoco():
    check_mujoco(TASK, variations=20, descriptions=UPSTREAM_DESCRIPTIONS[0], max_episode_steps=600)


def test_stack_cups_on_mjwarp():
    check_mjwarp(TASK)
