"""meat_off_grill on both embedded backends, and its descriptions as upstream's."""

from task_checks import check_descriptions, check_mjwarp, check_mujoco

TASK = "meat_off_grill"
# PerAct's RLBench fork (MohitShridhar/RLBench, branch peract), rlbench/tasks/meat_off_grill.py:
# what init_episode returns, per variation.
UPSTREAM_DESCRIPTIONS = {
    0: [
        "take the chicken off the grill",
        "pick up the chicken and place it next to the grill",
        "remove the chicken from the grill and set it down to the side",
    ],
    1: [
        "take the steak off the grill",
        "pick up the steak and place it next to the grill",
        "remove the steak from the grill and set it down to the side",
    ],
}


def test_meat_off_grill_descriptions_are_upstreams_word_for_word():
    check_descriptions(TASK, UPSTREAM_DESCRIPTIONS)


def test_meat_off_grill_on_mujoco():
    check_mujoco(TASK, variations=2, descriptions=UPSTREAM_DESCRIPTIONS[0])


def test_meat_off_grill_on_mjwarp():
    check_mjwarp(TASK)
