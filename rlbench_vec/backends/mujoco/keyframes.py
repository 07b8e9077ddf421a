"""The keyframe policy (backend_options["keyframes"]): each episode's own oracle demo, recorded as RLBench
records demos (a frame per 0.05 s control step of the planned paths), reduced to PerAct's keyframes
(backends/keypoints.py) and acted through the env's pose arm mode with each keyframe's gripper state and
ignore_collisions (the frame before it: PerAct's). The upper bound of a keyframe agent trained on these demos.
The demo runs on the episode's own simulation, which is then put back exactly as it was."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import mujoco
import numpy as np

from ..keypoints import keypoint_discovery
from .actions import ActionExecutor, InvalidAction
from .oracles import gripper_value, oracle_actions

MAX_DEMO_STEPS = 2000  # frames a dense demo may take


def dense_demo(sim: Any) -> dict[str, np.ndarray]:
    """The oracle's demo of the current episode as RLBench records one: its waypoints acted in planning mode
    (each move marked by its waypoint's ignore_collisions), a frame after every control step of each path and
    after each gripper change, through all the waypoints (success is judged after the last). Frames hold the
    gripper pose (position, quaternion wxyz), gripper_open, joint velocities and ignore_collisions (the mark of
    the waypoint moved to)."""
    config = replace(sim.config, arm_mode="planning", absolute_mode=True, ignore_collisions_flag=True,
                     backend_options={})
    executor, panda = ActionExecutor(config, sim.panda), sim.panda
    saved, rgba = mujoco.MjData(sim.model), sim.model.geom_rgba.copy()
    mujoco.mj_copyData(saved, sim.model, sim.data)
    gripper = (panda.gripper_setpoint, panda.gripper_goal, panda.gripper_moving, panda.gripper_steps)
    frames: dict[str, list] = {"position": [], "quat": [], "gripper_open": [], "velocities": [], "ignore": []}

    def record() -> bool:
        position, quat, _ = panda.tcp_pose()
        values = (position, quat, panda.gripper_open, panda.qvel.copy(), float(executor.waypoint_ignores_collisions))
        for key, value in zip(frames, values):
            frames[key].append(value)
        return False  # as the path's stop test: never stops it

    executor.succeeded = record  # called after every control step of a path
    record()
    try:
        for action in oracle_actions(sim.task.oracle(sim.world, sim.variation), panda, executor):
            executor.apply(action)
            mujoco.mj_forward(sim.model, sim.data)
            record()
            if len(frames["position"]) > MAX_DEMO_STEPS:
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
