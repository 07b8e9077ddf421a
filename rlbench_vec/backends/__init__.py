"""Backend registry. Modules are imported lazily; none imports its simulator at import time."""

from __future__ import annotations

import importlib
import importlib.util
import logging
from functools import cache
from typing import TYPE_CHECKING

from ..errors import ConfigError

_MODULES = {
    "rlbench": "rlbench_vec.backends.rlbench",
    "mujoco": "rlbench_vec.backends.mujoco",
    "mjwarp": "rlbench_vec.backends.mjwarp.backend",
    "synthetic": "rlbench_vec.backends.synthetic",
}
log = logging.getLogger("rlbench_vec")


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


@cache
def resolve_backend(name: str) -> str:
    """'auto' -> 'rlbench' when rlbench is installed (found without importing it), else 'mujoco'."""
    if name != "auto":
        return name
    if importlib.util.find_spec("rlbench") is not None:
        return "rlbench"
    log.warning("rlbench is not installed: backend='auto' uses the embedded MuJoCo backend.")
    return "mujoco"
