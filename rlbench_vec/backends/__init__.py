"""Backend registry. Modules are imported lazily; none imports its simulator at import time."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ..config import resolve_backend
from ..errors import ConfigError

_MODULES = {
    "rlbench": "rlbench_vec.backends.rlbench.backend",
    "mujoco": "rlbench_vec.backends.mujoco",
    "mjwarp": "rlbench_vec.backends.mjwarp.backend",
    "synthetic": "rlbench_vec.backends.synthetic",
}


if TYPE_CHECKING:
    from .base import Backend


def backend_class(name: str) -> type[Backend]:
    """The Backend subclass registered under `name` ("rlbench", "mujoco", "mjwarp" or "synthetic")."""
    if name not in _MODULES:
        raise ConfigError(f"unknown backend {name!r}; choose from {', '.join(_MODULES)} or 'auto'.")
    return importlib.import_module(_MODULES[name]).BACKEND


def list_tasks(backend: str = "auto") -> list[str]:
    """The task names (RLBench's, snake_case) `backend` runs: the embedded tasks for "mujoco" and
    "mjwarp", the installed RLBench's for "rlbench"; empty for "synthetic", which takes any name."""
    return backend_class(resolve_backend(backend)).task_names()
