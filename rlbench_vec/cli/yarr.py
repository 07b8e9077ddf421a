"""Agents written for YARR (PerAct, RVT) scored unchanged: a factory that returns an object with YARR's
`act(step, observation, deterministic)` and `reset()` is driven one env at a time, as YARR's RolloutGenerator
drives it, with the observation PerAct's and RVT's environments build (yarr/envs/rlbench_env.py `extract_obs`,
peract helpers/custom_rlbench_env.py), and `.action` read from what `act` returns.

Per env, the observation is a dict of torch tensors, each with leading dims [1, 1] (YARR's batch of one and its
history of timesteps=1): `{camera}_{modality}` channels first ((3, H, W) rgb uint8 and point clouds in the world
frame; depth and masks (1, H, W)), float64 made float32 as YARR's `_get_type`; `{camera}_camera_extrinsics`
(4, 4) and `{camera}_camera_intrinsics` (3, 3); `low_dim_state` = [gripper_open, the two finger joints clipped to
0..0.04, time] float32 with time = (1 - step / (max_steps - 1)) * 2 - 1; `ignore_collisions` (1,) float32, the
env's last action's ignore_collisions (0 at the start); `lang_goal_tokens` (77,) where a CLIP tokenizer is
importable (OpenAI's `clip` package, else `open_clip`: CLIP_TOKENIZERS; its dtype is the tokenizer's). The
dict's `lang_goal` attribute is the goal's text (the episode's first description) and `info` the row's info:
iterating the dict gives tensors only, as YARR's agents expect.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import numpy as np

from ..config import EnvConfig
from ..errors import ConfigError, PolicyOutputError
from ..spec import action_size

CLIP_TOKENIZERS = ("clip", "open_clip")  # the packages whose `tokenize` makes lang_goal_tokens, in this order
FINGER_MAX = 0.04  # PerAct clips the finger joints to 0..0.04
YARR_ACTION = 9  # xyz, quaternion xyzw, gripper open, ignore_collisions


def is_yarr_agent(agent: Any) -> bool:
    """An object with YARR's act and reset methods (YARR's Agent is not callable)."""
    return not callable(agent) and callable(getattr(agent, "act", None)) and callable(getattr(agent, "reset", None))


def clip_tokenizer() -> tuple[str, Callable[[list[str]], Any]] | None:
    """(package, tokenize) of the first importable CLIP tokenizer, else None."""
    for name in CLIP_TOKENIZERS:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if callable(getattr(module, "tokenize", None)):
            return name, module.tokenize
    return None


class YarrObservation(dict):
    """YARR's observation dict (tensors only), with the goal's text and the row's info as attributes."""

    lang_goal: str = ""
    info: dict[str, Any] = {}


def time_value(step: int, max_steps: int) -> float:
    """PerAct's time in low_dim_state: 1 at the first step, -1 at the last of max_steps."""
    return (1.0 - step / float(max(max_steps - 1, 1))) * 2.0 - 1.0


class YarrAgent:
    """Drives a YARR agent on the envs of a batch, one act() per env."""

    def __init__(self, agent: Any, env_config: EnvConfig, max_steps: int):
        try:
            import torch
        except ImportError:
            raise ConfigError("a YARR agent takes torch tensors: install torch (pip install 'rlbench_vec[torch]').") \
                from None
        self.torch, self.agent, self.max_steps = torch, agent, max_steps
        self.size = action_size(env_config)
        self.cameras, self.modalities = env_config.cameras, env_config.modalities
        self.tokenizer = clip_tokenizer()
        self.tokens: dict[str, Any] = {}  # per goal text
        self.ignore_collisions: dict[int, float] = {}  # per env: its last action's 9th number

    def reset(self, env_ids: np.ndarray) -> None:
        """YARR resets its agent before each episode: once per env starting one."""
        for env_id in env_ids.tolist():
            self.ignore_collisions[env_id] = 0.0
            self.agent.reset()

    def act(self, obs: dict[str, np.ndarray], info: dict[str, Any]) -> np.ndarray:
        actions = np.empty((len(info["env_id"]), self.size), np.float32)
        for row, env_id in enumerate(info["env_id"].tolist()):
            observation = self.observation(obs, info, row, self.ignore_collisions.get(env_id, 0.0))
            result = self.agent.act(info["step"][row], observation, deterministic=True)
            action = self.action(result)
            if len(action) == YARR_ACTION:
                self.ignore_collisions[env_id] = float(action[YARR_ACTION - 1])
            actions[row] = action[:self.size]
        return actions

    def action(self, result: Any) -> np.ndarray:
        """`.action` of an ActResult (or the value itself) as numbers: the env's action size, or YARR's 9 where the
        env takes 8 (without ignore_collisions_flag: the 9th is not sent, collision checking is the backend's)."""
        action = getattr(result, "action", result)
        if hasattr(action, "detach"):
            action = action.detach().cpu().numpy()
        try:
            values = np.asarray(action, np.float32).reshape(-1)
        except (TypeError, ValueError) as error:
            raise PolicyOutputError(f"the YARR agent's act() returned {type(action).__name__}, no numbers "
                                    f"({error}); expected an ActResult whose .action holds {YARR_ACTION}.") from None
        if len(values) != self.size and not (len(values) == YARR_ACTION and self.size == YARR_ACTION - 1):
            raise PolicyOutputError(f"the YARR agent's act() returned {len(values)} numbers; the env takes "
                                    f"{self.size} (PerAct's {YARR_ACTION}: xyz, quaternion xyzw, gripper open, "
                                    "ignore_collisions with --ignore_collisions_flag 1).")
        return values

    def observation(self, obs: dict[str, np.ndarray], info: dict[str, Any], row: int,
                    ignore_collisions: float) -> YarrObservation:
        """One env's observation as PerAct's environment builds it, as YARR's rollout hands it to act()."""
        arrays: dict[str, np.ndarray] = {}
        for camera in self.cameras:
            for modality in self.modalities:
                image = obs[f"{camera}_{modality}"][row]
                arrays[f"{camera}_{modality}"] = np.moveaxis(image, -1, 0) if image.ndim == 3 else image[None]
            for field in ("extrinsics", "intrinsics"):
                key = f"{camera}_camera_{field}"
                if key in obs:
                    arrays[key] = obs[key][row]
        for needed in ("gripper_open", "gripper_joint_positions"):
            if needed not in obs:
                raise ConfigError(f"a YARR agent's low_dim_state needs {needed!r} in the observation; the backend's "
                                  "low-dim fields leave it out.")
        fingers = np.clip(np.ravel(obs["gripper_joint_positions"][row]), 0.0, FINGER_MAX)
        time = time_value(int(info["step"][row]), self.max_steps)
        arrays["low_dim_state"] = np.array([float(np.ravel(obs["gripper_open"][row])[0]), *fingers, time], np.float32)
        arrays["ignore_collisions"] = np.array([ignore_collisions], np.float32)
        goal = str(info["lang_goal"][row])
        if self.tokenizer is not None:
            if goal not in self.tokens:
                tokens = self.tokenizer[1]([goal])
                self.tokens[goal] = np.asarray(tokens.numpy() if hasattr(tokens, "numpy") else tokens)[0]
            arrays["lang_goal_tokens"] = self.tokens[goal]
        observation = YarrObservation({key: self.torch.from_numpy(
            np.array(value, np.float32 if value.dtype == np.float64 else value.dtype)[None, None])
            for key, value in arrays.items()})
        observation.lang_goal = goal
        observation.info = {key: value[row] for key, value in info.items()}
        return observation
