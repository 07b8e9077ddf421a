"""put_money_in_safe on both embedded backends, and its descriptions as upstream's."""

from task_checks import check_descriptions, check_mjwarp, check_mujoco

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
