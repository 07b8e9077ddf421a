"""close_drawer on both embedded backends, and its descriptions as upstream's."""

from task_checks import check_descriptions, check_mjwarp, check_mujoco

TASK = "close_drawer"
# RLBench (stepjam/RLBench, master 02720bb), rlbench/tasks/close_drawer.py:
# what init_episode returns, per variation.
UPSTREAM_DESCRIPTIONS = {
    0: [
        "close bottom drawer",
        "shut the bottom drawer",
        "slide the bottom drawer shut",
    ],
    2: [
        "close top drawer",
        "shut the top drawer",
        "slide the top drawer shut",
    ],
}


def test_close_drawer_descriptions_are_upstreams_word_for_word():
    check_descriptions(TASK, UPSTREAM_DESCRIPTIONS)


def test_close_drawer_on_mujoco():
    check_mujoco(TASK, variations=3, descriptions=UPSTREAM_DESCRIPTIONS[0])


def test_close_drawer_on_mjwarp():
    check_mjwarp(TASK)
