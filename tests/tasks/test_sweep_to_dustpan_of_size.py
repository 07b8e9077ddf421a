"""sweep_to_dustpan_of_size on both embedded backends, and its descriptions as upstream's."""

from placement_checks import YawRange, check_placement
from task_checks import check_descriptions, check_mjwarp, check_mujoco, config

TASK = "sweep_to_dustpan_of_size"
# PerAct's RLBench fork (MohitShridhar/RLBench, branch peract), rlbench/tasks/sweep_to_dustpan_of_size.py:
# what init_episode returns, per variation.
UPSTREAM_DESCRIPTIONS = {
    0: [
        "sweep dirt to the tall dustpan",
        "sweep the dirt up into the tall dustpan",
        "use the broom to brush the dirt into the tall dustpan",
        "clean up the dirt with the tall pan",
    ],
    1: [
        "sweep dirt to the short dustpan",
        "sweep the dirt up into the short dustpan",
        "use the broom to brush the dirt into the short dustpan",
        "clean up the dirt with the short pan",
    ],
}


def test_sweep_to_dustpan_of_size_descriptions_are_upstreams_word_for_word():
    check_descriptions(TASK, UPSTREAM_DESCRIPTIONS)


def test_sweep_to_dustpan_of_size_on_mujoco():
    check_mujoco(TASK, variations=2, descriptions=UPSTREAM_DESCRIPTIONS[0])


def test_sweep_to_dustpan_of_size_on_mjwarp():
    check_mjwarp(TASK)


# Upstream's: the fork's sweep_to_dustpan_of_size.py has no base_rotation_bounds (Task's default +-3.14); the broom
# lies across the base, so its yaw takes every value.
def test_sweep_to_dustpan_of_size_placement_is_upstreams():
    check_placement(TASK, (YawRange("broom", -3.14, 3.14),), config(TASK))
