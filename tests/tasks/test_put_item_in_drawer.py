"""put_item_in_drawer on both embedded backends, and its descriptions as upstream's."""

import math

import pytest
from placement_checks import YawRange, check_placement
from task_checks import check_descriptions, check_mjwarp, check_mujoco, config

from rlbench_vec.backends.mujoco.geometry import yaw_rotation
from rlbench_vec.backends.mujoco.tasks import find_task
from rlbench_vec.backends.mujoco.tasks.base import body_yaw

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


# Upstream's put_item_in_drawer.py: base_rotation_bounds [0, 0, - np.pi / 8], [0, 0, np.pi / 8]; its item (placed
# in the scene file) starts on top of the chest of drawers.
def test_put_item_in_drawer_placement_is_upstreams_the_block_on_top_of_the_cabinet():
    worlds = check_placement(TASK, (YawRange("cabinet", -math.pi / 8, math.pi / 8),), config(TASK))
    cabinet = find_task(TASK)
    top = cabinet.PLINTH + 3 * cabinet.SLOT + cabinet.TOP
    for world in worlds:
        centre, yaw = world.position("cabinet"), body_yaw(world.quat("cabinet"))
        local = yaw_rotation(yaw).T @ (world.position("item") - centre)
        assert abs(local[0]) < cabinet.DEPTH / 2 and abs(local[1]) < cabinet.WIDTH / 2, local
        assert local[2] == pytest.approx(top + cabinet.ITEM_HALF), local
