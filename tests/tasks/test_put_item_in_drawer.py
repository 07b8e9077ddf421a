"""put_item_in_drawer on both embedded backends, and its descriptions as upstream's."""

import math

from placement_checks import YawRange, check_placement
from task_checks import check_descriptions, check_mjwarp, check_mujoco, config

TASK = "put_item_in_drawer"
# PerAct's RLBench fork (MohitShridhar/RLBench, branch peract), rlbench/tasks/put_item_in_drawer.py:
# what init_episode returns, per variation (stepjam/RLBench's first one reads "put item in bottom drawer").
UPSTREAM_DESCRIPTIONS = {
    0: [
        "put the item in the bottom drawer",
        "put the block away in the bottom drawer",
        "open the bottom drawer and place the block inside of it",
        "leave the block in the bottom drawer",
    ],
    2: [
        "put the item in the top drawer",
        "put the block away in the top drawer",
        "open the top drawer and place the block inside of it",
        "leave the block in the top drawer",
    ],
}


def test_put_item_in_drawer_descriptions_are_upstreams_word_for_word():
    check_descriptions(TASK, UPSTREAM_DESCRIPTIONS)


def test_put_item_in_drawer_on_mujoco():
    check_mujoco(TASK, variations=3, descriptions=UPSTREAM_DESCRIPTIONS[0], max_episode_steps=600)


def test_put_item_in_drawer_on_mjwarp():
    check_mjwarp(TASK)


# Upstream's put_item_in_drawer.py: base_rotation_bounds [0, 0, - np.pi / 8], [0, 0, np.pi / 8].
def test_put_item_in_drawer_placement_is_upstreams():
    check_placement(TASK, (YawRange("cabinet", -math.pi / 8, math.pi / 8),), config(TASK))
