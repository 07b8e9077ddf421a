"""rlbench_vec: many RLBench environments in parallel worker processes, observations in shared memory.

The public names load on first use (PEP 562), so `python -m rlbench_vec.COMMAND` takes over Ctrl-C and SIGTERM
before the heavy modules import (cli.stop_while_starting).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from typing import TYPE_CHECKING, Any

from .errors import (
    ActionError,
    BackendUnavailableError,
    ClosedError,
    ConfigError,
    DatasetError,
    ResetNeeded,
    RestartBudgetExceeded,
    RLBenchVecError,
    WorkerError,
    WorkerStartError,
)
from .wire.process import capture_boot_output

capture_boot_output()  # in a spawned worker only: its start-up output goes where the main process can quote it
ENV_ID = "rlbench_vec/RLBench-v0"


def _register_env_id() -> None:
    """gymnasium.make(ENV_ID) builds an RLBenchEnv and gymnasium.make_vec an RLBenchVectorEnv. The entry points
    are strings: neither class loads until an env is made."""
    from gymnasium.envs.registration import register, registry

    if ENV_ID not in registry:
        register(ENV_ID, entry_point="rlbench_vec.gym_env:RLBenchEnv",
                 vector_entry_point="rlbench_vec.vector_env:RLBenchVectorEnv")


class _RegisterOnGymnasiumImport(importlib.abc.MetaPathFinder):
    """Registers ENV_ID as soon as gymnasium has loaded: `import rlbench_vec` itself stays light (no numpy,
    no gymnasium), so a command holds Ctrl-C before anything heavy loads."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if name != "gymnasium":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            load = spec.loader.exec_module

            def exec_module(module: Any) -> None:
                load(module)
                _register_env_id()
            spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


if "gymnasium" in sys.modules:
    _register_env_id()
else:
    sys.meta_path.insert(0, _RegisterOnGymnasiumImport())

if TYPE_CHECKING:
    from .backends import list_tasks
    from .backends.base import Demo
    from .config import CAMERAS, MODALITIES, EnvConfig, VectorConfig, VideoConfig
    from .gym_env import RLBenchEnv, make_env
    from .task_names import SUITES
    from .vector_env import RLBenchVectorEnv

_LAZY = {
    "list_tasks": ".backends", "Demo": ".backends.base", "CAMERAS": ".config", "MODALITIES": ".config",
    "EnvConfig": ".config", "VectorConfig": ".config", "VideoConfig": ".config", "RLBenchEnv": ".gym_env",
    "make_env": ".gym_env", "SUITES": ".task_names", "RLBenchVectorEnv": ".vector_env",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'rlbench_vec' has no attribute {name!r}")
    value = globals()[name] = getattr(importlib.import_module(module, __name__), name)
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__version__ = "0.2.0"
__all__ = [
    "RLBenchVectorEnv", "RLBenchEnv", "make_env", "list_tasks", "EnvConfig", "VectorConfig", "VideoConfig", "Demo",
    "ENV_ID", "CAMERAS", "MODALITIES", "SUITES", "RLBenchVecError", "ConfigError", "ActionError", "ClosedError",
    "BackendUnavailableError", "WorkerError", "WorkerStartError", "ResetNeeded", "RestartBudgetExceeded",
    "DatasetError",
]
