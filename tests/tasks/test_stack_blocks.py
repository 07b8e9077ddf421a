"""stack_blocks on both embedded backends, and its descriptions as upstream's."""

from task_checks import check_descriptions, check_mjwarp, check_mujoco

TASK = "stack_blocks"
# PerAct's RLBench fork (MohitShridhar/RLBench, branch peract), rlbench/tasks/stack_blocks.py:
# what init_episode returns, per variation.
UPSTREAM_DESCRIPTIONS = {
    0: [
        "stack 2 red blocks",
        "place 2 of the red cubes on top of each other",
        "pick up and set down 2 red blocks on top of each other",
        "build a tall tower out of 2 red cubes",
        "arrange 2 red blocks in a vertical stack on the table top",
        "set 2 red cubes on top of each other",
    ],
    59: [
        "stack 4 white blocks",
        "place 4 of the white cubes on top of each other",
        "pick up and set down 4 white blocks on top of each other",
        "build a tall tower out of 4 white cubes",
        "arrange 4 white blocks in a vertical stack on the table top",
        "set 4 white cubes on top of each other",
    ],
}


def test_stack_blocks_descriptions_are_upstreams_word_for_word():
    check_descriptions(TASK, UPSTREAM_DESCRIPTIONS)


def test_stack_blocks_on_mujoco():
    check_mujoco(TASK, variations=60, descriptions=UPSTREAM_DESCRIPTIONS[0])


def test_stack_blocks_on_mjwarp():
    check_mjwarp(TASK)
