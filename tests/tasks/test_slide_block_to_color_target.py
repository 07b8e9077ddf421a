"""slide_block_to_color_target on both embedded backends, and its descriptions as upstream's."""

from task_checks import check_descriptions, check_mjwarp, check_mujoco

TASK = "slide_block_to_color_target"
# PerAct's RLBench fork (MohitShridhar/RLBench, branch peract), rlbench/tasks/slide_block_to_color_target.py:
# what init_episode returns, per variation.
UPSTREAM_DESCRIPTIONS = {
    0: [
        "slide the block to green target",
        "slide the block onto the green square",
        "push the block until it is sitting on top of the green target",
        "slide the block towards the green plane",
        "cover the green target with the block by pushing the block in its direction",
    ],
    2: [
        "slide the block to pink target",
        "slide the block onto the pink square",
        "push the block until it is sitting on top of the pink target",
        "slide the block towards the pink plane",
        "cover the pink target with the block by pushing the block in its direction",
    ],
}


def test_slide_block_to_color_target_descriptions_are_upstreams_word_for_word():
    check_descriptions(TASK, UPSTREAM_DESCRIPTIONS)


def test_slide_block_to_color_target_on_mujoco():
    check_mujoco(TASK, variations=4, descriptions=UPSTREAM_DESCRIPTIONS[0])


def test_slide_block_to_color_target_on_mjwarp():
    check_mjwarp(TASK)
