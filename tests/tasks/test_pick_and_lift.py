"""pick_and_lift on both embedded backends, and its descriptions and state as upstream's."""

import numpy as np
from task_checks import check_descriptions, check_mjwarp, check_mujoco
from upstream_checks import check_upstream_state

TASK = "pick_and_lift"
# RLBench (stepjam/RLBench, master 02720bb), rlbench/tasks/pick_and_lift.py:
# what init_episode returns, per variation.
UPSTREAM_DESCRIPTIONS = {
    0: [
        "pick up the red block and lift it up to the target",
        "grasp the red block to the target",
        "lift the red block up to the target",
    ],
    19: [
        "pick up the white block and lift it up to the target",
        "grasp the white block to the target",
        "lift the white block up to the target",
    ],
}


def test_pick_and_lift_descriptions_are_upstreams_word_for_word():
    check_descriptions(TASK, UPSTREAM_DESCRIPTIONS)


def test_pick_and_lift_on_mujoco():
    check_mujoco(TASK, variations=20, descriptions=UPSTREAM_DESCRIPTIONS[0])


def test_pick_and_lift_on_mjwarp():
    check_mjwarp(TASK)


def test_pick_and_lift_state_is_upstreams_block_and_detector_positions():
    # upstream get_low_dim_state: np.concatenate([self.target_block.get_position(),
    #                                             self.success_detector.get_position()], 0)
    check_upstream_state(TASK, lambda world: np.concatenate([world.position("block"), world.site_position("success")]))
