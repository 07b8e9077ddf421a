"""backend_options["oracle"] on mjwarp: each env acts its episode's waypoint oracle, the mujoco backend's own.

The oracle plans its waypoints from the episode's first state with privileged information (the task's
`oracle`), then turns them into actions from the arm's current state (oracles.py of the mujoco backend). The
worlds live on the device, so both run on the simulator's host copy of the task (`BatchedSimulation.host`,
which draws every episode): the waypoints are planned right after a world's episode is drawn there (the
host then holds exactly that start), and before each action the host mirrors the world's joint positions
(one device-to-host copy per simulator and step) so the oracle reads the arm where the world has it.
What the oracle plans is a function of the world's own state only: envs stay independent.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import mujoco
import numpy as np

from .simulation import BatchedSimulation


class WorldOracles:
    """Per env, the waypoint oracle of its current episode."""

    def __init__(self) -> None:
        self.plans: dict[int, Iterator[np.ndarray]] = {}

    def reset(self, sim: BatchedSimulation, envs: np.ndarray, worlds: np.ndarray, seeds: Sequence[int | None],
              options: Sequence[Any]) -> dict[int, dict]:
        """Draw the worlds' episodes one at a time (deferred, as the group's), planning each env's oracle
        while the host holds its start; returns {world: reset info}."""
        infos = {}
        for env, world in zip(envs.tolist(), worlds.tolist()):
            mask = np.zeros(sim.num_worlds, bool)
            mask[world] = True
            infos.update(sim.reset(mask, seeds, options, defer=True))
            self.plans[env] = sim.host.oracle_actions()
        return infos

    def act(self, sim: BatchedSimulation, envs: np.ndarray, worlds: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """Write each env's next oracle action over its row of `actions`; returns the mask of the envs whose
        oracle has no action left (their episode ends unsolved)."""
        sim.apply_resets()  # a world about to act starts from its new episode
        qpos = sim.d.qpos.numpy()
        host = sim.host
        exhausted = np.zeros(len(envs), bool)
        for j, (env, world) in enumerate(zip(envs.tolist(), worlds.tolist())):
            host.data.qpos[:] = qpos[world]
            mujoco.mj_kinematics(host.model, host.data)
            planned = next(self.plans[env], None)
            if planned is None:
                exhausted[j] = True
            else:
                actions[j] = planned
        return exhausted
