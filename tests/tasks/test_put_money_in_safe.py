"""put_money_in_safe on both embedded backends, and its descriptions as upstream's."""

import math

from placement_checks import YawRange, check_placement
from task_checks import check_descriptions, check_mjwarp, check_mujoco, config

TASK = "put_money_in_safe"
# PerAct's RLBench fork (MohitShridhar/RLBench, branch peract), rlbench/tasks/put_money_in_safe.py:
# what init_episode returns, per variation.
UPSTREAM_DESCRIPTIONS = {
    0: [
        "put the money away in the safe on the bottom shelf",
        "leave the money on the bottom shelf on the safe",
        "place the stack of bank notes on the bottom shelf of the safe",
    ],
    2: [
        "put the money away in the safe on the top shelf",
        "leave the money on the top shelf on the safe",
        "place the stack of bank notes on the top shelf of the safe",
    ],
}


def test_put_money_in_safe_descriptions_are_upstreams_word_for_word():
    check_descriptions(TASK, UPSTREAM_DESCRIPTIONS)


def test_put_money_in_safe_on_mujoco():
    check_mujoco(TASK, variations=3, descriptions=UPSTREAM_DESCRIPTIONS[0])


def test_put_money_in_safe_on_mjwarp():
    check_mjwarp(TASK)


# Upstream's put_money_in_safe.py: base_rotation_bounds [0.0, 0.0, 0.0], [0.0, 0.0, +0.5 * np.pi], and the money
# sampled with min_rotation (0, 0, 0), max_rotation (0, 0, +0.5 * np.pi). The safe is kept to 0..0.3 rad here
# (docs/tasks.md: the oracle's rate at upstream's range); the money's yaw from the safe's is upstream's.
def test_put_money_in_safe_placement_is_upstreams_one_sided_range():
    check_placement(TASK, (YawRange("safe", 0.0, 0.3), YawRange("money", 0.0, math.pi / 2, relative_to="safe")),
                    config(TASK))
