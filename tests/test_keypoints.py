"""PerAct's keypoint discovery (rlbench_vec.backends.keypoints) on a synthetic demo whose keyframes are known."""

from __future__ import annotations

import numpy as np

from rlbench_vec.backends.keypoints import STOPPING_BUFFER, keypoint_discovery


def test_keyframes_are_gripper_changes_rests_and_the_last_frame():
    moving, still = np.full(7, 0.5), np.zeros(7)
    # frames 0-9 move, 10-11 rest (gripper open), 12 closes the gripper, 13-19 move, 20-29 rest, 30-33 move
    velocities = [moving] * 10 + [still] * 3 + [moving] * 7 + [still] * 10 + [moving] * 4
    gripper = [1.0] * 12 + [0.0] * 22
    keyframes = keypoint_discovery(gripper, np.array(velocities))
    # the first frame at rest counts (10), not the next (the buffer), nor the gripper's own frame as a rest;
    # a long rest counts again once the buffer has run out (20, then 20 + buffer + 1)
    assert keyframes == [10, 12, 20, 20 + STOPPING_BUFFER + 1, 33]


def test_neighbouring_last_keyframes_keep_the_last_and_a_still_start_is_not_one():
    velocities = np.array([np.zeros(7)] * 3 + [np.full(7, 0.5)] * 5 + [np.zeros(7)] * 2)
    # the start's rest is never a keyframe, and its buffer covers frames 1-2; at rest again from frame 8, but the
    # frame before last never counts as a rest; the last frame always does
    assert keypoint_discovery([1.0] * 10, velocities) == [9]
    # the gripper closing in the last frame: PerAct's look-back at frames 0 and 1 wraps round to it, so the start's
    # rest no longer counts there and frame 2's does
    assert keypoint_discovery([1.0] * 9 + [0.0], velocities) == [2, 9]
