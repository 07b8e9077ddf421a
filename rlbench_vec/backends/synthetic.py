"""RLBench-shaped observations at a configurable cost: measures the vectorisation machinery alone.

Like EnvPool's dummy env. backend_options:
  step_cost_s (0.0)     busy CPU time per step (mean, when step_cost_dist is "pareto")
  step_cost_dist        "constant" or "pareto" (heavy-tailed, same mean)
  reset_cost_s (0.0)    busy CPU time per reset
  episode_length (None) steps until the task "succeeds" (reward 1, terminated); None: never
  task_state_size (3)
  needs_display (False) ask for an X display, as CoppeliaSim does (the worker then owns an Xvfb)
Fault injection for tests and soak runs; also attributes, so `set_attr` arms one env, and a
restarted worker (a fresh process) starts disarmed:
  hang_at_step / raise_at_step / crash_at_step (0-based step within the episode), hang_on_reset,
  raise_writing_at_step (the observation after that many steps fails to write),
  raise_on_start (backend_options only: the simulator fails to launch)
"""

from __future__ import annotations

import difflib
import functools
import os
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..config import EnvConfig
from ..errors import ConfigError
from ..spec import PANDA_Q_MAX, PANDA_Q_MIN
from .base import Backend, StepResult
from .mujoco.tasks.rlbench_names import RLBENCH_TASKS

_OPTIONS = {
    "step_cost_s", "step_cost_dist", "reset_cost_s", "episode_length", "task_state_size",
    "needs_display", "raise_on_start", "hang_at_step", "raise_at_step", "crash_at_step", "hang_on_reset",
    "raise_writing_at_step",
}
_IMAGE_SUFFIXES = ("_rgb", "_depth", "_mask", "_point_cloud")
PARETO_SHAPE = 2.5  # finite mean and variance, long tail


def busy_wait(seconds: float) -> None:
    """Burn `seconds` of this thread's CPU time (not sleep, not wall time): the cost competes for
    cores like a simulator does, and a preempted worker still pays all of it."""
    if seconds <= 0:
        return
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def draw_cost(rng: np.random.Generator, mean: float, dist: str) -> float:
    """One step's cost: `mean`, or with "pareto" a Pareto draw (shape PARETO_SHAPE) of that mean."""
    if mean <= 0:
        return 0.0
    if dist == "pareto":
        scale = mean * (PARETO_SHAPE - 1) / PARETO_SHAPE
        return float(scale * (1.0 + rng.pareto(PARETO_SHAPE)))
    return mean


@functools.cache
def _noise_bank(size: int, dtype: str) -> np.ndarray:
    """Noise for images of `size` elements, twice as long: every episode's image is a window of it.
    Drawn once per process and image shape, shared by the instances of a group."""
    rng = np.random.default_rng([size, np.dtype(dtype).num])
    if np.dtype(dtype) == np.uint8:
        return rng.integers(0, 256, 2 * size, dtype=np.uint8)
    return rng.random(2 * size).astype(dtype)


class SyntheticBackend(Backend):
    name = "synthetic"

    @classmethod
    def task_names(cls) -> list[str]:
        """RLBench's tasks (PerAct's additions included): it stands in for any of them."""
        return sorted(RLBENCH_TASKS)

    @classmethod
    def validate(cls, config: EnvConfig) -> None:
        if config.task not in RLBENCH_TASKS:
            close = difflib.get_close_matches(config.task, RLBENCH_TASKS, n=3, cutoff=0.6)
            raise ConfigError(f"unknown task {config.task!r}: the synthetic backend stands in for RLBench's tasks "
                              "(rlbench_vec.list_tasks('synthetic'))"
                              + (f"; closest: {', '.join(map(repr, close))}." if close else "."))
        unknown = set(config.backend_options) - _OPTIONS
        if unknown:
            raise ConfigError(
                f"unknown synthetic backend_options {sorted(unknown)}; allowed: {sorted(_OPTIONS)}."
            )
        dist = config.backend_options.get("step_cost_dist", "constant")
        if dist not in ("constant", "pareto"):
            raise ConfigError(f"step_cost_dist must be 'constant' or 'pareto', got {dist!r}.")

    @classmethod
    def task_state_size(cls, config: EnvConfig) -> int:
        return int(config.backend_options.get("task_state_size", 3))

    @classmethod
    def needs_display(cls, config: EnvConfig) -> bool:
        return bool(config.backend_options.get("needs_display", False))

    def __init__(self, config: EnvConfig, env_index: int):
        if config.backend_options.get("raise_on_start"):
            raise RuntimeError(f"synthetic simulator {env_index} failed to launch")
        self.config = config
        self.task = config.task_of(env_index)
        self.options = dict(config.backend_options)
        self.step_cost_s = float(self.options.get("step_cost_s", 0.0))
        self.hang_at_step = self.options.get("hang_at_step")
        self.raise_at_step = self.options.get("raise_at_step")
        self.crash_at_step = self.options.get("crash_at_step")
        self.raise_writing_at_step = self.options.get("raise_writing_at_step")
        self.hang_on_reset = bool(self.options.get("hang_on_reset", False))
        self.rng = np.random.default_rng(env_index)
        self.steps = 0
        self.joints = np.zeros(7)
        self.episode = 0
        self.episode_seed = 0
        self.last_gripper = float("nan")
        self._bound: dict[int, dict[str, Any]] = {}

    def _cost(self, mean: float) -> float:
        return draw_cost(self.rng, mean, self.options.get("step_cost_dist", "constant"))

    def reset(self, seed: int | None, options: Mapping[str, Any] | None) -> dict[str, Any]:
        if self.hang_on_reset:
            time.sleep(1e6)
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.task = (options or {}).get("task", self.task)
        busy_wait(float(self.options.get("reset_cost_s", 0.0)))
        self.steps = 0
        self.joints = self.rng.uniform(PANDA_Q_MIN, PANDA_Q_MAX)
        self.episode += 1
        self.episode_seed = int(self.rng.integers(2**31))
        return {"descriptions": [f"synthetic {self.task}"], "variation_index": 0, "task": self.task,
                "task_low_dim_size": self.task_state_size(self.config)}

    def step(self, action: np.ndarray) -> StepResult:
        if self.steps == self.hang_at_step:
            time.sleep(1e6)
        if self.steps == self.raise_at_step:
            raise RuntimeError(f"synthetic failure at step {self.steps}")
        if self.steps == self.crash_at_step:
            os.abort()  # dies by SIGABRT, like a simulator's C++ assertion
        busy_wait(self._cost(self.step_cost_s))
        self.steps += 1
        self.joints = np.clip(self.joints + 0.01 * action[:7], PANDA_Q_MIN, PANDA_Q_MAX)
        self.last_gripper = float(action[-1])  # lets tests see the action the worker received
        success = self.steps == self.options.get("episode_length")
        return StepResult(reward=float(success), terminated=success)

    def _classify(self, out: Mapping[str, np.ndarray]) -> dict[str, Any]:
        """Sort an output dict's views once: images are stamped, low-dim fields rewritten. The engine
        alternates between two output dicts (pages) per env, or claims slots: each dict is sorted once."""
        images = {k: a.reshape(-1) for k, a in out.items() if k.endswith(_IMAGE_SUFFIXES)}
        first_per_camera = {k.rsplit("_", 1)[0].removesuffix("_point"): flat for k, flat in reversed(images.items())}
        low_dim = {k: a for k, a in out.items() if not k.endswith(_IMAGE_SUFFIXES)}
        return {
            "images": list(images.values()), "stamped": list(first_per_camera.values()),
            "joints": [low_dim.pop(k) for k in ("joint_positions",) if k in low_dim],
            "task_state": [low_dim.pop(k) for k in ("task_low_dim_state",) if k in low_dim],
            "matrices": [low_dim.pop(k) for k in ("gripper_matrix",) if k in low_dim],
            "low_dim": list(low_dim.values()),
        }

    def write_observation(self, out: Mapping[str, np.ndarray]) -> None:
        """Every image is written whole on every step, as a renderer's read-back writes every pixel
        (its content is the episode's window of noise); each step then stamps the step
        count into the first pixel of each camera's first image (so every step changes the
        observation) and rewrites the low-dim fields (task_low_dim_state holds the episode's step
        count): all in place, like a simulator rendering."""
        if self.steps == self.raise_writing_at_step:
            raise RuntimeError(f"synthetic write failure after step {self.steps}")
        bound = self._bound.get(id(out))
        if bound is None or bound["out"] is not out:
            bound = self._bound[id(out)] = {**self._classify(out), "out": out, "episode": None}
        if bound["episode"] != self.episode:  # each image's noise looked up once per episode, not per step
            bound["pairs"], bound["episode"] = [(flat, self.noise(flat)) for flat in bound["images"]], self.episode
        for flat, values in bound["pairs"]:
            flat[:] = values
        stamp, value = self.steps % 256, self.steps % 40 * 1e-3  # inside every bounded low-dim field's space
        for flat in bound["stamped"]:
            flat[0] = stamp
        for array in bound["joints"]:
            array[:] = self.joints
        for array in bound["task_state"]:
            array[:] = self.steps  # the step count within the episode
        for array in bound["low_dim"]:
            array[...] = value
        for array in bound["matrices"]:  # a pose's matrix: its last row is 0 0 0 1
            array[:3], array[3] = value, (0.0, 0.0, 0.0, 1.0)

    def noise(self, flat: np.ndarray) -> np.ndarray:
        """The episode's image content: a window of this image shape's noise bank, at an offset the
        episode's seed picks. A reset draws nothing (the "0 ms" setting's resets cost only their
        observation's write), and a step's write stays a plain copy, as a renderer's read-back is."""
        offset = self.episode_seed % (flat.size + 1)
        return _noise_bank(flat.size, flat.dtype.str)[offset:offset + flat.size]


BACKEND = SyntheticBackend
