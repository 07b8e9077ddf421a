"""Which simulator and world each env of a worker is, when its envs run several tasks.

A MuJoCo Warp model is one task's scene, so the worker holds one simulator per task: the envs of task t,
in the user's env order, are the worlds 0, 1, ... of simulator t. Envs keep their index everywhere the
engine sees them (result slots, pages, replies); only the group maps them to (simulator, world). An env's
task is fixed at the start: moving it to another task would move its world to another simulator, whose
number of worlds is fixed when it is built (see MjwarpBackend.task_change_reason).

Pure numpy: imported by the group in the worker, and by tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from ...config import EnvConfig
from ...spec import task_state_size


class TaskWorlds:
    """Each env's task, simulator and world: `tasks` lists the envs' tasks in env order."""

    def __init__(self, tasks: Sequence[str]):
        self.tasks = list(tasks)
        self.names = list(dict.fromkeys(self.tasks))  # simulator t runs names[t]
        self.sim_of = np.array([self.names.index(task) for task in self.tasks], np.int64)
        self.envs = [np.flatnonzero(self.sim_of == t) for t in range(len(self.names))]  # ascending: world order
        self.world_of = np.zeros(len(self.tasks), np.int64)
        for envs in self.envs:
            self.world_of[envs] = np.arange(len(envs))

    def split(self, local: np.ndarray) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """The simulators `local` (env indices) touches: (simulator, positions in `local`, their worlds),
        each simulator once, positions in the order of `local`."""
        sims = self.sim_of[local]
        parts = []
        for t in range(len(self.names)):
            positions = np.flatnonzero(sims == t)
            if positions.size:
                parts.append((t, positions, self.world_of[local[positions]]))
        return parts


def simulator_config(config: EnvConfig, task: str) -> EnvConfig:
    """The config of one task's simulator: that task, with task_low_dim_state as long as the layout's
    (the longest of the envs' tasks), so every simulator's rows fit the shared pages, zero-padded."""
    return replace(config.for_task(task), task_low_dim_size=task_state_size(config))
