"""The rlbench backend's translation of EnvConfig into RLBench's own configuration: the observation config,
the action mode and rlbench.Environment's options. Called in the worker only: each imports rlbench (which
loads libcoppeliaSim) when called, after the worker's display is set."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

import numpy as np

from ...config import CAMERAS, LOW_DIM_FIELDS, POSE_ARM_MODES, EnvConfig
from ...spec import low_dim_fields
from .demos import ARM_ACTION_SOURCE, GRIPPER_ACTION_SOURCE
from .options import ENVIRONMENT_OPTIONS, RENDER_MODES


def observation_config(config: EnvConfig) -> Any:
    """RLBench's ObservationConfig for `config`: the cameras and modalities it observes or records, and the
    low-dim fields it observes plus those its demo actions are derived from."""
    from pyrep.const import RenderMode
    from rlbench.observation_config import CameraConfig, ObservationConfig

    c = config
    modalities = set(c.modalities)
    render_mode = RenderMode[RENDER_MODES[c.renderer]]

    def camera(name: str) -> CameraConfig:
        on = name in c.cameras
        rgb = (on and "rgb" in modalities) or name in c.video_cameras
        depth = on and bool(modalities & {"depth", "point_cloud"})  # RLBench computes point clouds from depth
        # RLBench keeps a camera's sensor, and its calibration in misc, only while rgb, depth or point_cloud
        # is on; point_cloud alone keeps it without rendering anything
        point_cloud = on and ("point_cloud" in modalities or (c.misc and not (rgb or depth)))
        return CameraConfig(
            rgb=rgb, depth=depth, point_cloud=point_cloud, mask=on and "mask" in modalities,
            image_size=c.image_size, render_mode=render_mode, masks_as_one_channel=True,
            depth_in_meters=c.depth_in_meters,
        )

    low_dim = set(low_dim_fields(c)) | {ARM_ACTION_SOURCE[c.arm_mode], GRIPPER_ACTION_SOURCE[c.gripper_mode]}
    return ObservationConfig(
        **{f"{name}_camera": camera(name) for name in CAMERAS},
        **{name: name in low_dim for name in LOW_DIM_FIELDS},
        gripper_touch_forces=False, wrist_camera_matrix=False, record_gripper_closing=False,
    )


def action_mode(config: EnvConfig) -> Any:
    """RLBench's MoveArmThenGripper for config's arm and gripper modes (backend_options: collision_checking,
    frame, attach_grasped_objects)."""
    from rlbench.action_modes import arm_action_modes as arm
    from rlbench.action_modes import gripper_action_modes as gripper
    from rlbench.action_modes.action_mode import MoveArmThenGripper

    c, options = config, config.backend_options
    checking = bool(options.get("collision_checking", False))
    frame = arm.RelativeFrame[options.get("frame", "world").upper()]
    if c.arm_mode == "ik":
        arm_mode = arm.EndEffectorPoseViaIK(absolute_mode=c.absolute_mode, frame=frame, collision_checking=checking)
    elif c.arm_mode == "planning":
        arm_mode = arm.EndEffectorPoseViaPlanning(
            absolute_mode=c.absolute_mode, frame=frame, collision_checking=checking)
    elif c.arm_mode == "joint_velocity":
        arm_mode = arm.JointVelocity()
    else:
        arm_mode = arm.JointPosition(absolute_mode=c.absolute_mode)
    attach = bool(options.get("attach_grasped_objects", True))
    if c.gripper_mode == "discrete":
        gripper_mode = gripper.Discrete(attach_grasped_objects=attach)
    else:
        # always absolute: the action bounds are [0, 0.04] m, and upstream's delta mode ignores the action
        gripper_mode = gripper.GripperJointPosition(attach_grasped_objects=attach, absolute_mode=True)
    return MoveArmThenGripper(arm_mode, gripper_mode)


class CollisionFlag:
    """How an action's collision checking reaches the installed RLBench, for `mode` (action_mode's).

    PerAct's fork (its pose arm modes' action() takes ignore_collisions; its MoveArmThenGripper reads
    bool(action[8:9])) gets 9 numbers: the action's own 9th with ignore_collisions_flag, else one appended
    from backend_options' collision_checking, so an 8-number action never reaches the fork's slicing (an
    empty slice is a ValueError under NumPy 2). stepjam's master (no 9th element) gets 8 numbers, and with
    ignore_collisions_flag the arm mode's collision_checking is set for each move: off where the 9th > 0.5."""

    def __init__(self, config: EnvConfig, mode: Any):
        self.pose = config.arm_mode in POSE_ARM_MODES
        self.flag = config.ignore_collisions_flag
        self.checking = bool(config.backend_options.get("collision_checking", False))
        self.arm = mode.arm_action_mode
        self.fork = self.pose and "ignore_collisions" in inspect.signature(self.arm.action).parameters

    def __call__(self, action: np.ndarray) -> np.ndarray:
        if not self.pose:
            return action
        if self.fork:
            return action if self.flag else np.append(action, float(not self.checking))
        if self.flag:
            self.arm._collision_checking = not action[8] > 0.5  # upstream's constructor flag, per move
            return action[:8]
        return action


def environment_options(backend_options: Mapping[str, Any]) -> dict[str, Any]:
    """The backend_options that rlbench.Environment takes, as its own types (RandomizeEvery,
    VisualRandomizationConfig)."""
    options = {k: v for k, v in backend_options.items() if k in ENVIRONMENT_OPTIONS}
    if "randomize_every" in options:
        from rlbench.sim2real import domain_randomization as dr

        options["randomize_every"] = dr.RandomizeEvery[options["randomize_every"].upper()]
        visual = options["visual_randomization_config"]
        options["visual_randomization_config"] = dr.VisualRandomizationConfig(**visual)
    return options
