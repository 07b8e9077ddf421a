"""Backends: the simulators a worker runs (`rlbench`, `mujoco`, `mjwarp`, `synthetic`), each a Backend
(`base`) serving a group of envs. This module is their registry: it names each backend's module and
imports it only when asked, and no backend module imports its simulator at import time, so the main
process can ask a backend class for its facts without loading one.

The registry and `base` are base modules (they import config and errors only). A backend's
implementation may import the base modules (errors, config, spec) and other backends' modules (mjwarp
builds on mujoco's scene and tasks); never `wire`, `display`, the engine, the worker side or the front."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ..config import resolve_backend
from ..errors import ConfigError
from ..task_names import SUITES

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


def list_tasks(backend: str = "auto", suites: bool = False) -> list[str]:
    """The task names (RLBench's, snake_case) `backend` runs: the embedded tasks for "mujoco" and
    "mjwarp", the installed RLBench's for "rlbench", and for "synthetic" every RLBench task (PerAct's
    additions included), which its RLBench-shaped observations stand in for. suites=True adds the names
    of the task suites (rlbench_vec.SUITES: "peract18", PerAct's 18 tasks), each a value of `task` too."""
    return backend_class(resolve_backend(backend)).task_names() + (list(SUITES) if suites else [])
