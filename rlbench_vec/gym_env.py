"""One environment as a plain gymnasium.Env, for code that wants a single env.

`make_env(...)` wraps a 1-env RLBenchVectorEnv (so the simulator still runs in its own worker
process, with crash recovery) and unbatches what it returns. Observations are copies, so they are
yours to keep; a scalar (gripper_open) comes as shape (1,). gymnasium.make("rlbench_vec/RLBench-v0")
builds this class (rlbench_vec/__init__.py registers the id).
"""

from __future__ import annotations

from typing import Any, SupportsFloat, cast

import gymnasium as gym
import numpy as np

from .errors import ConfigError
from .vector_env import RLBenchVectorEnv

VECTOR_ONLY = ("num_envs", "as_torch", "device", "autoreset_mode", "spare_envs", "envs_per_worker")  # vector-env only


def _unbatch_obs(obs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {key: np.array(value[0], ndmin=1) for key, value in obs.items()}  # copies out of shared memory


def _single_space(space: gym.spaces.Dict) -> gym.spaces.Dict:
    """The vector env's per-env space, each scalar (gripper_open; misc's near and far) as shape (1,): RLBench's
    value as its get_low_dim_data lists it, and a shape every checker (SB3's too) takes."""
    boxes = {key: cast(gym.spaces.Box, box) for key, box in space.items()}
    return gym.spaces.Dict({key: gym.spaces.Box(box.low.reshape(-1), box.high.reshape(-1), dtype=box.dtype.type)
                            if box.shape == () else box for key, box in boxes.items()})


def _unbatch_info(info: dict[str, Any]) -> dict[str, Any]:
    """gymnasium's vector info (info[key] array + info['_key'] mask) -> env 0's plain dict."""
    out = {}
    for key, values in info.items():
        if key.startswith("_") or not info.get("_" + key, np.ones(1, bool))[0]:
            continue
        value = values[0]
        out[key] = value.item() if isinstance(value, np.generic) else value
    return out


class RLBenchEnv(gym.Env):
    """A single RLBench environment. kwargs are RLBenchVectorEnv's (task, backend, cameras, ...).

    render_mode "rgb_array" makes render() return an (H, W, 3) frame of `render_camera`, which need
    not be among the observed cameras. `vector_env` is the engine underneath (get_demos, call...).
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 20}

    def __init__(self, task: str = "reach_target", render_mode: str | None = None,
                 render_camera: str = "front", **kwargs: Any):
        bad = sorted(set(kwargs) & set(VECTOR_ONLY))
        if bad:
            raise ConfigError(f"{bad} belong to RLBenchVectorEnv; a single env has one worker and numpy data.")
        if render_mode not in (None, *self.metadata["render_modes"]):
            raise ConfigError(f"render_mode must be None or 'rgb_array', got {render_mode!r}.")
        self.vector_env = RLBenchVectorEnv(num_envs=1, task=task, **kwargs)
        self.observation_space = _single_space(cast(gym.spaces.Dict, self.vector_env.single_observation_space))
        self.action_space = self.vector_env.single_action_space
        self.render_mode = render_mode
        self.render_camera = render_camera
        self._episode_over = True

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """seed None continues the env's random stream (the constructor's seed on the first reset)."""
        super().reset(seed=seed)
        obs, info = self.vector_env.reset(seed=seed, options=options)
        self._episode_over = False
        return _unbatch_obs(obs), _unbatch_info(info)

    def step(self, action: Any) -> tuple[dict[str, np.ndarray], SupportsFloat, bool, bool, dict[str, Any]]:
        # The vector env would autoreset here (next-step mode); a single env asks for reset() instead.
        if self._episode_over:
            raise gym.error.ResetNeeded("the episode is over (or never started): call reset() before step().")
        obs, reward, terminated, truncated, info = self.vector_env.step(np.asarray(action)[None])
        self._episode_over = bool(terminated[0] or truncated[0])
        return _unbatch_obs(obs), float(reward[0]), bool(terminated[0]), bool(truncated[0]), _unbatch_info(info)

    def render(self) -> np.ndarray | None:
        if self.render_mode is None:
            gym.logger.warn("render() without a render_mode: make the env with render_mode='rgb_array'.")
            return None
        return self.vector_env.render(self.render_camera)[0]

    def close(self) -> None:
        self.vector_env.close()

    def __repr__(self) -> str:
        c = self.vector_env.env_config
        return f"RLBenchEnv(task={c.task!r}, backend={c.backend!r})"


def make_env(task: str = "reach_target", **kwargs: Any) -> RLBenchEnv:
    """A single-env gymnasium.Env; kwargs as RLBenchEnv (render_mode, render_camera) and
    RLBenchVectorEnv (backend, cameras, low_dim, arm_mode, ...)."""
    return RLBenchEnv(task=task, **kwargs)

