"""The contract between a worker and the simulator it owns.

A backend class is imported in the main process only for its classmethods (validation, layout),
so a backend module must not import its simulator at module level: do it in `__init__`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping

import numpy as np

from ..config import DEFAULT_LOW_DIM, EnvConfig


@dataclass
class StepResult:
    """What one backend step returns. `info` stays empty on the fast path (it is pickled when not)."""

    reward: float
    terminated: bool
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class Demo:
    """One demonstration: per-step observations stacked on a leading time axis, and the actions between them.

    observations[key] has shape (T, ...) with the keys of the env's observation layout;
    actions has shape (T - 1, action_size) in the env's action mode.
    """

    observations: dict[str, np.ndarray]
    actions: np.ndarray
    success: bool
    variation_index: int
    descriptions: list[str]


class Backend(ABC):
    """One simulator instance in one worker process."""

    name: ClassVar[str]

    @classmethod
    def validate(cls, config: EnvConfig) -> None:
        """Raise ConfigError for options this backend cannot serve (unknown task, unsupported mode)."""

    @classmethod
    @abstractmethod
    def task_state_size(cls, config: EnvConfig) -> int:
        """Length of task_low_dim_state for config.task, known without starting the simulator."""

    @classmethod
    def default_low_dim(cls, config: EnvConfig) -> tuple[str, ...]:
        """The low-dim fields observed when the user names none."""
        return DEFAULT_LOW_DIM

    @classmethod
    def needs_display(cls, config: EnvConfig) -> bool:
        """True when the simulator needs an X display (the worker then gets its own Xvfb by default)."""
        return False

    @abstractmethod
    def __init__(self, config: EnvConfig, env_index: int):
        """Start the simulator. Called in the worker after DISPLAY is set."""

    @abstractmethod
    def reset(self, seed: int | None, options: Mapping[str, Any] | None) -> dict[str, Any]:
        """Start an episode; return its info (e.g. descriptions, variation_index)."""

    @abstractmethod
    def step(self, action: np.ndarray) -> StepResult:
        """Apply one action (float32, shape (action_size,)). An invalid action ends the episode with
        reward 0 and info["error"] naming it; it must not raise."""

    @abstractmethod
    def write_observation(self, out: Mapping[str, np.ndarray]) -> None:
        """Write the current observation into `out` (shared-memory views, one per layout key), in place."""

    def render_rgb(self, camera: str) -> np.ndarray:
        """An rgb frame of `camera` for video, whether or not the camera is in the observation."""
        raise NotImplementedError(f"{type(self).__name__} cannot render {camera!r} for video")

    def get_demos(self, amount: int, seed: int | None = None) -> list[Demo]:
        raise NotImplementedError(f"{type(self).__name__} cannot collect demos")

    def close(self) -> None:
        """Stop the simulator. Must be safe to call once after a failed __init__ step."""
