"""take_lid_off_saucepan on both embedded backends, and its descriptions and shaped reward as upstream's."""

import numpy as np
from task_checks import check_descriptions, check_mjwarp, check_mujoco
from upstream_checks import check_shaped_reward

from rlbench_vec.backends.mujoco.tasks.take_lid_off_saucepan import TakeLidOffSaucepan

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


def lid_rewards(gripper_pose: np.ndarray, state: np.ndarray) -> float:
    """upstream reward(): -|lid - tip| - |lid - success_detector|; the state is lid xyz, quaternion, pan xyz,
    and the detector sits above the pan (TakeLidOffSaucepan.build)."""
    lid, pan = state[:3], state[7:10]
    pan_top = 2 * TakeLidOffSaucepan.PAN_HALF_HEIGHT
    detector = pan + [0.0, 0.0, pan_top + TakeLidOffSaucepan.LIFT]
    return -float(np.linalg.norm(lid - gripper_pose[:3]) + np.linalg.norm(lid - detector))


def test_take_lid_off_saucepan_shaped_reward_is_upstreams():
    check_shaped_reward(TASK, lid_rewards)
