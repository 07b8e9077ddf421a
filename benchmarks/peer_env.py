"""The env every peer of benchmarks/peers.py steps: rlbench_vec's synthetic backend (RLBench's default
observation, busy-wait step and reset costs) behind gymnasium's Env API. Imported by peers.py and by
peers_puffer.py, which runs in PufferLib's own interpreter, so both build the very same env."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from rlbench_vec import EnvConfig
from rlbench_vec.backends.synthetic import SyntheticBackend
from rlbench_vec.spec import action_size, observation_spec

CONFIG = EnvConfig(backend="synthetic").validated()  # RLBench's default observation
ACTION_SIZE = action_size(CONFIG)
NO_COSTS = {"step_cost_s": 0.0, "step_cost_dist": "constant", "reset_cost_s": 0.0, "episode_length": None}


def cost_attrs(options: dict[str, Any]) -> dict[str, Any]:
    """Backend attributes that give a running SyntheticBackend these costs."""
    merged = {**NO_COSTS, **options}
    return {"options": merged, "step_cost_s": merged["step_cost_s"]}


class PeerEnv(gym.Env):
    """The synthetic backend behind gymnasium's Env API, for the peers: same arrays, same costs.

    Observations are written in place into persistent arrays (no allocation per step), the cheapest
    case for the peers. Truncation at max_episode_steps as in rlbench_vec.
    """

    def __init__(self, index: int, options: dict[str, Any] | None = None):
        spec = observation_spec(CONFIG)
        self.observation_space = gym.spaces.Dict(
            {
                key: gym.spaces.Box(0, 255, s.shape, s.dtype)
                if s.dtype == np.uint8
                else gym.spaces.Box(-np.inf, np.inf, s.shape, s.dtype)
                for key, s in spec.items()
            }
        )
        self.action_space = gym.spaces.Box(-np.inf, np.inf, (ACTION_SIZE,), np.float32)
        self.backend = SyntheticBackend(CONFIG, index)
        self.obs = {key: np.zeros(s.shape, s.dtype) for key, s in spec.items()}
        self.elapsed = 0
        if options is not None:
            self.set_costs(options)

    def set_costs(self, options: dict[str, Any]) -> None:
        for name, value in cost_attrs(options).items():
            setattr(self.backend, name, value)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        info = self.backend.reset(seed, options)
        self.elapsed = 0
        self.backend.write_observation(self.obs)
        return self.obs, info

    def step(self, action):
        result = self.backend.step(np.asarray(action, np.float32))
        self.elapsed += 1
        self.backend.write_observation(self.obs)
        truncated = self.elapsed >= CONFIG.max_episode_steps and not result.terminated
        return self.obs, result.reward, result.terminated, truncated, result.info


def make_peer(index: int) -> Callable[[], PeerEnv]:
    return lambda: PeerEnv(index)
