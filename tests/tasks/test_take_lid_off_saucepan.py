"""take_lid_off_saucepan on both embedded backends, and its descriptions as upstream's."""

from task_checks import check_descriptions, check_mjwarp, check_mujoco

TASK = "take_lid_off_saucepan"
# RLBench (stepjam/RLBench, master 02720bb), rlbench/tasks/take_lid_off_saucepan.py:
# what init_episode returns, per variation.
UPSTREAM_DESCRIPTIONS = {
    0: [
        "take lid off the saucepan",
        "using the handle, lift the lid off of the pan",
        "remove the lid from the pan",
        "grip the saucepan's lid and remove it from the pan",
        "leave the pan open",
        "uncover the saucepan",
    ],
}


def test_take_lid_off_saucepan_descriptions_are_upstreams_word_for_word():
    check_descriptions(TASK, UPSTREAM_DESCRIPTIONS)


def test_take_lid_off_saucepan_on_mujoco():
    check_mujoco(TASK, variations=1, descriptions=UPSTREAM_DESCRIPTIONS[0])


def test_take_lid_off_saucepan_on_mjwarp():
    check_mjwarp(TASK)
