"""Placement ranges as upstream's: a task's yaws drawn by its declaration's `init_episode` over 100 seeds
(through a World that only records the poses written, no simulator: cheap) stay in upstream's range and
span it, and one real reset on the mujoco backend draws within it too.

Upstream's ranges are quoted in each tests/tasks/test_<task>.py from its task file (PerAct's fork,
MohitShridhar/RLBench branch `peract`): `base_rotation_bounds`, else Task's default ±3.14, and
SpawnBoundary.sample's ±3.14 for loose objects.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from rlbench_vec.backends.mujoco.simulation import Simulation
from rlbench_vec.backends.mujoco.tasks import find_task
from rlbench_vec.backends.mujoco.tasks.base import body_yaw

RESETS = 100
SPAN = 0.1  # the drawn yaws come within this fraction of the range's width of both its ends


@dataclass(frozen=True)
class YawRange:
    """`body`'s yaw, minus `relative_to`'s when given, wrapped to [-pi, pi), within [low, high]."""

    body: str
    low: float
    high: float
    relative_to: str | None = None

    def yaw(self, quat_of) -> float:
        yaw = body_yaw(quat_of(self.body))
        if self.relative_to is not None:
            yaw -= body_yaw(quat_of(self.relative_to))
        return (yaw + math.pi) % (2 * math.pi) - math.pi


class RecordingWorld:
    """The World a task's init_episode writes to, keeping only the poses (unit quaternion where none)."""

    def __init__(self) -> None:
        self.poses: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def set_pose(self, body: str, position, quat=None) -> None:
        self.poses[body] = (np.asarray(position, float), np.asarray((1.0, 0, 0, 0) if quat is None else quat, float))

    def set_joint(self, joint: str, value: float) -> None:
        pass

    def set_colour(self, geom: str, rgb) -> None:
        pass

    def position(self, body: str) -> np.ndarray:
        return self.poses[body][0]

    def quat(self, body: str) -> np.ndarray:
        return self.poses[body][1]


def drawn_layouts(task: str, resets: int = RESETS) -> list[RecordingWorld]:
    """The poses init_episode writes for seeds 0..resets-1 (variation seed % count)."""
    declared = find_task(task)()
    worlds = []
    for seed in range(resets):
        world = RecordingWorld()
        declared.init_episode(world, seed % declared.variation_count, np.random.default_rng(seed))  # type: ignore[arg-type]
        worlds.append(world)
    return worlds


def check_placement(task: str, ranges: tuple[YawRange, ...], simulation_config) -> list[RecordingWorld]:
    """Each range's yaws over RESETS drawn layouts stay in it and span it; one real reset draws inside it.
    Returns the drawn layouts for further checks."""
    worlds = drawn_layouts(task)
    for spec in ranges:
        yaws = np.array([spec.yaw(world.quat) for world in worlds])
        margin = SPAN * (spec.high - spec.low)
        assert yaws.min() >= spec.low - 1e-6 and yaws.max() <= spec.high + 1e-6, \
            f"{task}: {spec.body}'s yaws {yaws.min():.3f}..{yaws.max():.3f} leave {spec.low:.3f}..{spec.high:.3f}"
        assert yaws.min() <= spec.low + margin + 1e-6 and yaws.max() >= spec.high - margin - 1e-6, \
            f"{task}: {spec.body}'s yaws {yaws.min():.3f}..{yaws.max():.3f} do not span {spec.low:.3f}..{spec.high:.3f}"
    sim = Simulation(simulation_config)
    try:
        sim.reset(0, np.random.default_rng(0))
        for spec in ranges:
            assert spec.low - 1e-6 <= spec.yaw(sim.world.quat) <= spec.high + 1e-6, f"{task}: {spec.body} on reset"
    finally:
        sim.close()
    return worlds


def check_own_yaws(worlds: list[RecordingWorld], bodies: tuple[str, ...]) -> None:
    """In every layout the bodies have yaws of their own (not all one yaw), as SpawnBoundary.sample turns each."""
    for world in worlds:
        yaws = np.array([body_yaw(world.quat(body)) for body in bodies])
        spread = np.abs(np.angle(np.exp(1j * (yaws[:, None] - yaws[None, :]))))
        assert spread.max() > 0.1, f"{bodies} all drawn with one yaw"
