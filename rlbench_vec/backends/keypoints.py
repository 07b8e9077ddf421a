"""PerAct's keypoint discovery: the frames of a demo that a keyframe agent (PerAct, RVT, Act3D, ...) is trained
to reach, from the gripper's state and the arm's joint velocities at each frame (RLBench records one per 0.05 s).
Beside the backends because the mujoco backend's keyframe policy (mujoco/keyframes.py) reduces its demos with it;
it works on any demo's arrays (rlbench_vec.datasets.read_episode's too).

May import: numpy only."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

STOPPING_DELTA = 0.1  # rad/s: every joint at most this fast, the arm is at rest (PerAct's stopping_delta)
STOPPING_BUFFER = 4  # frames a rest waits after the last one counted (PerAct's stopped_buffer)


def keypoint_discovery(gripper_open: Sequence[float] | np.ndarray, joint_velocities: np.ndarray,
                       stopping_delta: float = STOPPING_DELTA, stopping_buffer: int = STOPPING_BUFFER) -> list[int]:
    """The keyframes of a demo of T frames, PerAct's rule (peract helpers/demo_loading_utils.py): a frame (never
    the first) where the gripper opens or closes, or where the arm comes to rest, or the last frame. A rest counts
    where every joint velocity is within stopping_delta, the gripper state is the same in the frame, its
    neighbours and the one before those (PerAct's indices, which wrap round at the start), the frame is not the
    last but one, and stopping_buffer frames have passed since the last rest counted. Where the last two
    keyframes are neighbours, the earlier is dropped."""
    grip = np.asarray(gripper_open, np.float64)
    velocities = np.asarray(joint_velocities, np.float64)
    frames = len(grip)
    keyframes: list[int] = []
    buffer = 0
    for i in range(frames):
        steady = i < frames - 2 and grip[i] == grip[i + 1] == grip[i - 1] and grip[i - 2] == grip[i - 1]
        at_rest = bool(np.all(np.abs(velocities[i]) <= stopping_delta))
        stopped = buffer <= 0 and at_rest and i != frames - 2 and steady
        buffer = stopping_buffer if stopped else buffer - 1
        if i > 0 and (grip[i] != grip[i - 1] or i == frames - 1 or stopped):
            keyframes.append(i)
    if len(keyframes) > 1 and keyframes[-1] - 1 == keyframes[-2]:
        keyframes.pop(-2)
    return keyframes
