"""close_jar on both embedded backends, and its descriptions as upstream's."""

from task_checks import check_descriptions, check_mjwarp, check_mujoco

TASK = "close_jar"
# PerAct's RLBench fork (MohitShridhar/RLBench, branch peract), rlbench/tasks/close_jar.py:
# what init_episode returns, per variation.
UPSTREAM_DESCRIPTIONS = {
    0: [
        "close the red jar",
        "screw on the red jar lid",
        "grasping the lid, lift it from the table and use it to seal the red jar",
        "pick up the lid from the table and put it on the red jar",
    ],
    19: [
        "close the white jar",
        "screw on the white jar lid",
        "grasping the lid, lift it from the table and use it to seal the white jar",
        "pick up the lid from the table and put it on the white jar",
    ],
}


def test_close_jar_descriptions_are_upstreams_word_for_word():
    check_descriptions(TASK, UPSTREAM_DESCRIPTIONS)


def test_close_jar_on_mujoco():
    check_mujoco(TASK, variations=20, descriptions=UPSTREAM_DESCRIPTIONS[0])


def test_close_jar_on_mjwarp():
    check_mjwarp(TASK)
