"""The keyframe policy (backend_options["keyframes"]): each episode's own oracle demo, recorded as RLBench
records demos (a frame per 0.05 s control step: the oracle in joint_position mode), reduced to PerAct's keyframes
(datasets/keypoints.py) and acted through the env's pose arm mode with each keyframe's gripper state and
ignore_collisions (the frame before it: PerAct's). The upper bound of a keyframe agent trained on these demos.
The demo runs on the episode's own simulation, which is then put back exactly as it was."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import mujoco
import numpy as np

from ...datasets.keypoints import keypoint_discovery
from .actions import ActionExecutor, InvalidAction
from .oracles import gripper_value, oracle_actions

MAX_DEMO_STEPS = 1000  # control steps (50 s) a dense demo may take


def dense_demo(sim: Any) -> dict[str, np.ndarray]:
    """The oracle's demo of the current episode, a frame per control step: gripper pose (position, quaternion
    wxyz), gripper_open, joint velocities and ignore_collisions (the mark of the waypoint moved to)."""
    config = replace(sim.config, arm_mode="joint_position", absolute_mode=True, ignore_collisions_flag=False,
                     backend_options={})
    executor, panda = ActionExecutor(config, sim.panda), sim.panda
    saved, rgba = mujoco.MjData(sim.model), sim.model.geom_rgba.copy()
    mujoco.mj_copyData(saved, sim.model, sim.data)
    gripper = (panda.gripper_setpoint, panda.gripper_goal, panda.gripper_moving, panda.gripper_steps)
    frames: dict[str, list] = {"position": [], "quat": [], "gripper_open": [], "velocities": [], "ignore": []}

    def record(mark: bool) -> None:
        position, quat, _ = panda.tcp_pose()
        for key, value in zip(frames, (position, quat, panda.gripper_open, panda.qvel.copy(), float(mark))):
            frames[key].append(value)

    record(False)
    try:
        for action in oracle_actions(sim.task.oracle(sim.world, sim.variation), panda, executor):
            executor.apply(action)
            mujoco.mj_forward(sim.model, sim.data)
            record(executor.waypoint_ignores_collisions)
            if sim.success.met() or len(frames["position"]) > MAX_DEMO_STEPS:
                break
    except InvalidAction:
        pass  # the demo ends where its oracle failed: its keyframes so far
    finally:
        mujoco.mj_copyData(sim.data, sim.model, saved)
        sim.model.geom_rgba[:] = rgba
        panda.gripper_setpoint, panda.gripper_goal, panda.gripper_moving, panda.gripper_steps = gripper
        sim.restart_success()
    return {key: np.array(values) for key, values in frames.items()}


def keyframe_actions(sim: Any) -> Iterator[np.ndarray]:
    """Pose actions (float32) through the keyframes of the episode's dense oracle demo."""
    demo = dense_demo(sim)
    executor: ActionExecutor = sim.executor
    for k in keypoint_discovery(demo["gripper_open"], demo["velocities"]):
        gripper = gripper_value(executor, bool(demo["gripper_open"][k]))
        yield executor.pose_action(demo["position"][k], demo["quat"][k], gripper, bool(demo["ignore"][k - 1]))
