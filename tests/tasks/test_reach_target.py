"""reach_target on both embedded backends, and its descriptions as upstream's."""

from task_checks import check_descriptions, check_mjwarp, check_mujoco

TASK = "reach_target"
# RLBench (stepjam/RLBench, master 02720bb), rlbench/tasks/reach_target.py:
# what init_episode returns, per variation.
UPSTREAM_DESCRIPTIONS = {
    0: [
        "reach the red target",
        "touch the red ball with the panda gripper",
        "reach the red sphere",
    ],
    19: [
        "reach the white target",
        "touch the white ball with the panda gripper",
        "reach the white sphere",
    ],
}


def test_reach_target_descriptions_are_upstreams_word_for_word():
    check_descriptions(TASK, UPSTREAM_DESCRIPTIONS)


def test_reach_target_on_mujoco():
    check_mujoco(TASK, variations=20, descriptions=UPSTREAM_DESCRIPTIONS[0])


def test_reach_target_on_mjwarp():
    check_mjwarp(TASK)
