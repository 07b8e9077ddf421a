"""Stable-Baselines3's VecEnv over RLBenchVectorEnv: what an SB3 user puts where SubprocVecEnv was.

    from stable_baselines3 import PPO
    from rlbench_vec.sb3 import SB3VecEnv

    env = SB3VecEnv(num_envs=8, task="reach_target", cameras=(), observation="flat",
                    arm_mode="joint_velocity", arm_limit=1.0)
    PPO("MlpPolicy", env).learn(100_000)

How SB3's contract (stable_baselines3.common.vec_env.VecEnv) is met:
- The engine runs autoreset_mode="same_step": an env whose episode ended is reset within the step,
  so the step returns the new episode's first observation, done=True, and in that env's info
  "terminal_observation" (the final one) and "TimeLimit.truncated" (ended by the step limit, not by
  the task); the new episode's reset info goes to reset_infos[i], as in SB3's own VecEnvs. An
  episode lost to a worker restart ends with done=True, info["restarted"], no terminal_observation
  and TimeLimit.truncated False (there is no final observation to bootstrap from).
- observation="dict": the engine's Dict space (MultiInputPolicy; SB3 transposes images itself),
  with scalar keys (gripper_open) given shape (1,), which SB3's extractors need.
  observation="flat": every key concatenated into one float32 Box (MlpPolicy), for cameras=() only;
  `flat_layout` says which columns hold which key.
- Copies: SB3 adds the previous step's observation to its rollout or replay buffer after the next
  step has returned (OnPolicyAlgorithm.collect_rollouts, OffPolicyAlgorithm._store_transition), and
  by then the engine may be writing that shared-memory page again. So each step copies the
  observations out of shared memory once (in flat mode the concatenation is that copy); rewards,
  flags and final observations already come as arrays of their own.
- Actions: SB3 needs a Box with finite bounds (PPO clips its samples to them, SAC squashes into
  them, and SAC's warm-up samples it): the vector env's action space is one (spec.action_bounds), and
  its samples are valid actions. arm_limit narrows the arm part to [-arm_limit, arm_limit] (radians/s,
  radians or metres, by arm_mode); the quaternion and gripper keep their bounds.
- get_attr / set_attr / env_method reach the backend in each worker (gymnasium's semantics: a
  callable attribute is called); a name the backend lacks raises AttributeError, as SB3's has_attr
  expects. env_is_wrapped is False everywhere: the envs are simulator backends, not gymnasium.Env
  wrappers (use VecMonitor for episode statistics).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

import gymnasium as gym
import numpy as np
from stable_baselines3.common.vec_env.base_vec_env import VecEnv, VecEnvIndices, VecEnvObs, VecEnvStepReturn

from .config import EnvConfig, split_options
from .errors import ConfigError, WorkerError
from .spec import QUATERNION, ActionSpace, action_space, gripper_index
from .vector_env import RLBenchVectorEnv

OBSERVATIONS = ("dict", "flat")
ENGINE_OWNED = {  # options this class sets itself, and why
    "autoreset_mode": "SB3 resets envs within the step: the engine runs autoreset_mode='same_step'",
    "copy_obs": "observations are copied once per step where SB3 needs it (see rlbench_vec.sb3)",
    "as_torch": "SB3 takes numpy observations",
    "device": "SB3 takes numpy observations and moves them to its policy's device",
}
ENGINE_INFO = ("restarted", "restart_reason", "recycled")  # about the step itself, not the new episode


def split_info(info: Mapping[str, Any], n: int) -> list[dict[str, Any]]:
    """gymnasium's vector info (arrays with '_key' masks, nested dicts) -> one dict per env."""
    out: list[dict[str, Any]] = [{} for _ in range(n)]
    for key, value in info.items():
        if key.startswith("_"):
            continue
        if isinstance(value, Mapping):
            for i, nested in enumerate(split_info(value, n)):
                if nested:
                    out[i][key] = nested
            continue
        mask = info.get("_" + key, np.ones(n, bool))
        for i in np.flatnonzero(mask).tolist():
            out[i][key] = value[i]
    return out


class SB3VecEnv(VecEnv):
    """A stable-baselines3 VecEnv of num_envs RLBench environments in worker processes.

    observation: "dict" (a Dict space, for MultiInputPolicy) or "flat" (one float32 Box of every
    key, for MlpPolicy; needs cameras=()). arm_limit: narrows the arm's action values to
    [-arm_limit, arm_limit] (default: the vector env's bounds, spec.action_bounds).
    render_camera: the camera of render() / get_images().
    options: RLBenchVectorEnv's keyword options, except autoreset_mode, copy_obs, as_torch and
    device, which this class sets. The engine is `vector_env` (get_demos, stats, worker_pids...).
    """

    def __init__(self, num_envs: int = 1, task: str = "reach_target", *, observation: str = "dict",
                 arm_limit: float | None = None, render_camera: str = "front", **options: Any):
        for name, why in ENGINE_OWNED.items():
            if name in options and not (name == "autoreset_mode" and options[name] == "same_step"):
                raise ConfigError(f"SB3VecEnv sets {name} itself ({why}); leave it out.")
        if observation not in OBSERVATIONS:
            raise ConfigError(f"observation must be one of {OBSERVATIONS}, got {observation!r}.")
        env_options, _ = split_options(options)
        config = EnvConfig(task=task, **env_options).validated()
        if observation == "flat" and config.cameras:
            raise ConfigError(f"observation='flat' concatenates low-dim keys for MlpPolicy, and cameras "
                              f"{config.cameras} give images: pass cameras=() or use observation='dict' "
                              "(MultiInputPolicy).")
        action_space = self._bounded_actions(config, arm_limit)
        options["autoreset_mode"] = "same_step"
        self.vector_env = RLBenchVectorEnv(num_envs, task, **options)
        self.render_camera = render_camera
        spaces = cast(dict[str, gym.spaces.Box], self.vector_env.single_observation_space)  # a Dict of Boxes
        self.flat_layout: dict[str, slice] | None = None
        # SB3's extractors flatten from dim 1: in dict mode a scalar key (gripper_open) gets shape (1,)
        self._shapes = {key: space.shape or (1,) for key, space in spaces.items()}
        self._flat_size = sum(int(np.prod(shape)) for shape in self._shapes.values())
        if observation == "flat":
            self.flat_layout, start = {}, 0
            for key, shape in self._shapes.items():
                self.flat_layout[key] = slice(start, start + int(np.prod(shape)))
                start += int(np.prod(shape))
            observation_space: gym.Space = gym.spaces.Box(-np.inf, np.inf, (self._flat_size,), np.float32)
        else:
            observation_space = gym.spaces.Dict({key: gym.spaces.Box(
                space.low.reshape(self._shapes[key]), space.high.reshape(self._shapes[key]), self._shapes[key],
                space.dtype.type) for key, space in spaces.items()})
        try:
            super().__init__(num_envs, observation_space, action_space)
        except BaseException:
            self.vector_env.close()
            raise

    @staticmethod
    def _bounded_actions(config: EnvConfig, arm_limit: float | None) -> ActionSpace:
        """The vector env's action space (finite, valid samples), its arm values narrowed to ±arm_limit if given."""
        space = action_space(config)
        if arm_limit is None:
            return space
        if isinstance(arm_limit, bool) or not isinstance(arm_limit, (int, float)) or not 0 < arm_limit < np.inf:
            raise ConfigError(f"arm_limit must be a positive finite number, got {arm_limit!r}.")
        arm = np.ones(space.shape, bool)
        arm[gripper_index(config)] = False  # the gripper keeps its range
        if config.ignore_collisions_flag:
            arm[-1] = False  # so does ignore_collisions
        if space.pose:
            arm[QUATERNION] = False  # the quaternion keeps [-1, 1]
        low, high = space.low.copy(), space.high.copy()
        low[arm], high[arm] = -arm_limit, arm_limit
        return ActionSpace(low, high, space.pose, absolute=space.absolute)

    # ------------------------------------------------------------------ observations
    def _observations(self, obs: Mapping[str, np.ndarray], rows: int) -> VecEnvObs:
        """Shared-memory views (rows, ...) -> SB3's observations, owned by the caller (one copy)."""
        if self.flat_layout is None:
            return {key: np.array(value).reshape(rows, *self._shapes[key]) for key, value in obs.items()}
        return self._flatten(obs, rows)

    def _flatten(self, obs: Mapping[str, np.ndarray], rows: int) -> np.ndarray:
        flat = np.empty((rows, self._flat_size), np.float32)
        for key, columns in (self.flat_layout or {}).items():
            flat[:, columns] = np.reshape(obs[key], (rows, -1))
        return flat

    def _single(self, obs: Mapping[str, np.ndarray]) -> VecEnvObs:
        """One env's observation (a final one from the info) in SB3's format."""
        if self.flat_layout is None:
            return {key: np.reshape(value, self._shapes[key]) for key, value in obs.items()}
        return self._flatten({key: value[None] for key, value in obs.items()}, 1)[0]

    # ------------------------------------------------------------------ VecEnv
    def reset(self) -> VecEnvObs:
        seeds = [s for s in self._seeds if s is not None]  # SB3's seed() sets every env's, or none
        env_options = [dict(o) if o else None for o in self._options]
        options = {"env_options": env_options} if any(env_options) else None
        obs, info = self.vector_env.reset(seed=seeds if len(seeds) == self.num_envs else None, options=options)
        self.reset_infos = split_info(info, self.num_envs)
        self._reset_seeds()
        self._reset_options()
        return self._observations(obs, self.num_envs)

    def step_async(self, actions: np.ndarray) -> None:
        self.vector_env.step_async(actions)

    def step_wait(self) -> VecEnvStepReturn:
        obs, reward, terminated, truncated, info = self.vector_env.step_wait()
        dones = terminated | truncated
        infos = split_info(info, self.num_envs)
        for i in np.flatnonzero(dones).tolist():
            step_info = infos[i]
            final_obs = step_info.pop("final_obs", None)
            ended = {**step_info.pop("final_info", {}), **{k: step_info[k] for k in ENGINE_INFO if k in step_info}}
            # without a final observation (the episode was lost to a restart) nothing can be bootstrapped
            ended["TimeLimit.truncated"] = bool(truncated[i] and not terminated[i] and final_obs is not None)
            if final_obs is not None:
                ended["terminal_observation"] = self._single(final_obs)
            self.reset_infos[i] = {k: v for k, v in step_info.items() if k not in ENGINE_INFO}
            infos[i] = ended
        return self._observations(obs, self.num_envs), reward.astype(np.float32), dones, infos

    def close(self) -> None:
        self.vector_env.close()

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        envs = self._get_indices(indices)
        if attr_name == "render_mode":  # a property of the engine (rendering happens on request), not of a backend
            return [self.vector_env.render_mode for _ in envs]
        return self._each(attr_name, envs, (), {})

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        envs = list(self._get_indices(indices))
        if len(envs) == self.num_envs:
            self.vector_env.set_attr(attr_name, value)
            return
        # the engine sets every env at once: the others get their current value back
        values = list(self._each(attr_name, range(self.num_envs), (), {}))
        for i in envs:
            values[i] = value
        self.vector_env.set_attr(attr_name, values)

    def env_method(self, method_name: str, *method_args: Any, indices: VecEnvIndices = None,
                   **method_kwargs: Any) -> list[Any]:
        return self._each(method_name, self._get_indices(indices), method_args, method_kwargs)

    def _each(self, name: str, envs: Iterable[int], args: Sequence[Any], kwargs: Mapping[str, Any]) -> list[Any]:
        try:
            return list(self.vector_env.call(name, *args, env_ids=list(envs), **kwargs))
        except WorkerError as error:
            if str(error).startswith(f"env {error.env_index}: AttributeError:"):
                raise AttributeError(f"the {self.vector_env.env_config.backend} backend has no attribute {name!r}") \
                    from error
            raise

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None) -> list[bool]:
        return [False for _ in self._get_indices(indices)]

    def get_images(self) -> Sequence[np.ndarray | None]:
        return list(self.vector_env.render(self.render_camera))
