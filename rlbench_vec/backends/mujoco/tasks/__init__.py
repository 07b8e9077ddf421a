"""The embedded tasks: one module per task in this package, each exporting `TASK`, its `Task` subclass
(base.py). Every module here that defines `TASK` is registered under the task's RLBench name; adding a
task is adding its module (docs/tasks.md, "How to add a task").

Pure Python: importing this package imports no simulator (the main process reads names, variation
counts and state sizes).
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil

from ....errors import ConfigError
from .base import Task
from .rlbench_names import RLBENCH_TASKS


def _discover() -> dict[str, type[Task]]:
    found: dict[str, type[Task]] = {}
    for module_info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        task = getattr(importlib.import_module(f"{__name__}.{module_info.name}"), "TASK", None)
        if task is not None:
            if task.name != module_info.name:
                raise RuntimeError(f"{module_info.name}.py declares task {task.name!r}: name the module after it")
            found[task.name] = task
    return found


TASKS: dict[str, type[Task]] = _discover()


def find_task(name: str, backend: str = "mujoco") -> type[Task]:
    """The declaration of task `name` (snake_case, as EnvConfig.validated() leaves it), or a ConfigError
    saying what this backend has instead."""
    task = TASKS.get(name)
    if task is not None:
        return task
    close = difflib.get_close_matches(name, TASKS, n=3, cutoff=0.4)
    closest = f" Closest tasks here: {', '.join(map(repr, close))}." if close else ""
    if name in RLBENCH_TASKS:
        raise ConfigError(
            f"task {name!r} is an RLBench task that the {backend} backend does not have yet.{closest} Run it "
            f"with backend='rlbench' (CoppeliaSim), or pick one of the {len(TASKS)} tasks "
            f"rlbench_vec.list_tasks({backend!r}) lists."
        )
    raise ConfigError(
        f"unknown task {name!r} for the {backend} backend.{closest} Available: {', '.join(sorted(TASKS))}."
    )
