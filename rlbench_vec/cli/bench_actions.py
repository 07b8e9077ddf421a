"""The bench's actions: valid random actions near the current state, as an exploring policy's."""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Any

import numpy as np

from ..config import POSE_ARM_MODES
from ..spec import gripper_index
from ..vector_env import RLBenchVectorEnv

POSITION_NOISE_M = 0.01  # per action: a policy exploring around the current pose
ROTATION_NOISE = 0.02  # added to quaternion components, then renormalised
JOINT_NOISE = 0.05  # rad (joint_position) or rad/s (joint_velocity)
GRIPPER_SWITCH_P = 0.05  # per env and action: a gripper actuation runs until the fingers stop, keep them rare
NOISE_BANK = 64


class ActionSampler:
    """Valid actions near the current state, so episodes look like an exploring policy's.

    Pose modes hold the observed gripper pose plus a small random walk over the chunk (unit
    quaternions); joint modes move by small random amounts. Moves that are still invalid (a pose
    IK cannot reach) end the episode with info["error"], as in RLBench; the bench counts them.
    The gripper changes with probability gripper_switch per env and call. Observations may be numpy
    arrays or torch tensors (the few fields read here are copied to the host).
    """

    def __init__(self, env: RLBenchVectorEnv, chunk: int, seed: int, gripper_switch: float = GRIPPER_SWITCH_P):
        self.config = env.env_config
        self.action_size = int(np.prod(env.single_action_space.shape or (1,)))
        self.chunk = chunk
        self.rng = np.random.default_rng(seed)
        self.switch_z = NormalDist().inv_cdf(1.0 - gripper_switch) if 0.0 < gripper_switch < 1.0 else (
            math.inf if gripper_switch <= 0.0 else -math.inf)  # P(normal > z) = gripper_switch
        self._banks: dict[int, np.ndarray] = {}
        self._calls = 0

    def _normal(self, m: int) -> np.ndarray:
        """Standard normal noise (m, K, A + 1) from a bank drawn once per batch size: drawing it every
        call would cost a good share of what the bench times when steps are cheap."""
        bank = self._banks.get(m)
        if bank is None:
            bank = self._banks[m] = self.rng.standard_normal((NOISE_BANK, m, self.chunk, self.action_size + 1))
        self._calls += 1
        return bank[self._calls % NOISE_BANK]

    def __call__(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        """Actions (M, K, A) for the M envs whose observations are given."""
        obs = {key: host(obs[key]) for key in ("gripper_open", "gripper_pose", "joint_positions",
                                                "gripper_joint_positions") if key in obs}
        m, k, c = len(obs["gripper_open"]), self.chunk, self.config
        actions = np.empty((m, k, self.action_size), np.float32)
        normal = self._normal(m)
        noise = lambda first, size, scale: scale * normal[..., first:first + size]
        # absolute targets wander from the observed state over the chunk; deltas are fresh each step
        drift = (lambda *a: np.cumsum(noise(*a), axis=1)) if c.absolute_mode else noise
        if c.arm_mode in POSE_ARM_MODES:
            pose = obs["gripper_pose"] if c.absolute_mode else np.tile([0, 0, 0, 0, 0, 0, 1.0], (m, 1))
            actions[..., :3] = pose[:, None, :3] + drift(0, 3, POSITION_NOISE_M)
            quat = pose[:, None, 3:7] + drift(3, 4, ROTATION_NOISE)
            norm = np.linalg.norm(quat, axis=-1, keepdims=True)
            actions[..., 3:7] = np.where(norm > 1e-6, quat / np.maximum(norm, 1e-6), [0, 0, 0, 1])
        elif c.arm_mode == "joint_position":
            start = obs["joint_positions"][:, None] if c.absolute_mode else 0.0
            actions[..., :-1] = start + drift(0, 7, JOINT_NOISE)
        else:  # joint velocities
            actions[..., :-1] = noise(0, 7, JOINT_NOISE)
        g = gripper_index(c)
        if c.gripper_mode == "discrete":
            gripper = np.asarray(obs["gripper_open"], np.float32)
            switch = normal[:, 0, -1] > self.switch_z
            actions[..., g] = np.where(switch, 1.0 - gripper, gripper)[:, None]
        else:
            actions[..., g] = np.clip(obs["gripper_joint_positions"][:, :1], 0.0, 0.04)
        if c.ignore_collisions_flag:
            actions[..., -1] = 0.0  # every move collision-checked (where the backend checks)
        return actions


def host(array: Any) -> np.ndarray:
    """A numpy array of a numpy array or a torch tensor (copied to the host where it lives on a device)."""
    return array.cpu().numpy() if hasattr(array, "cpu") else np.asarray(array)
