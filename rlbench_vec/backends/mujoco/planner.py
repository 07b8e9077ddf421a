"""RLBench's EndEffectorPoseViaPlanning in the embedded scene: a joint-space path to a pose target, checked
with MuJoCo's own collision test and, where the straight path collides, planned by RRTConnect (rrt_connect).

As PyRep's get_path (called by RLBench with trials=100, max_configs=10, max_time_ms=10, trials_per_goal=5):
IK configurations for the target, the straight (linear) path first, then a sampling planner in joint space
towards the configurations. Here the straight path is the tool's straight line (the joint-space move where IK
cannot follow the line); RRTConnect gets RRT_ITERATIONS samples, drawn from the move alone (never from what
other envs planned, nor from the clock). A state collides where a robot geom
penetrates a scene geom deeper than PENETRATION, except bodies the robot touches when the move starts (a
grasped object, a pressed button, a held handle: the move away from them is what was asked). A grasped object
is not carried in the test (PyRep checks the robot's collection). Imports mujoco: worker only.
"""

from __future__ import annotations

import mujoco
import numpy as np

from ...spec import PANDA_Q_MAX, PANDA_Q_MIN
from .robot import Panda
from .rrt_connect import rrt_connect

MAX_CONFIGS = 4  # IK configurations of the target tried by the planner (RLBench: 10)
CONFIG_SEEDS = 12  # random IK starts drawn to find them
DISTINCT_CONFIG = 0.3  # rad: configurations closer than this (largest joint difference) count as one
RRT_STEP = 0.4  # rad: RRTConnect's range (the largest joint move of one extension)
RRT_ITERATIONS = 2000  # RRTConnect's budget, in samples (RLBench's OMPL: 5 trials of 10 ms)
CHECK_STEP = 0.04  # rad: a path is checked at least this densely (largest joint move between checks)
PENETRATION = 0.002  # m: a deeper robot-scene contact collides (resting contacts are shallower)
PLAN_SEED = 0  # the IK starts' randomness: the same state and target give the same configurations


class NoPath(Exception):
    """No collision-free path to the target (RLBench's ConfigurationPathError)."""


class CollisionTest:
    """MuJoCo's collision test of arm configurations against the scene as it is when a move starts, on a scratch
    MjData (the simulation is never disturbed)."""

    def __init__(self, panda: Panda):
        model = panda.model
        self.model, self.live, self.panda = model, panda.data, panda
        self.scratch = mujoco.MjData(model)
        root = model.body("panda_link0").id
        robot_bodies = np.flatnonzero(model.body_rootid == root)
        self.robot_geom = np.isin(model.geom_bodyid, robot_bodies)
        self.allowed = np.zeros(0, int)

    def start(self) -> None:
        """Take the scene as it is now; the bodies the robot touches now are allowed."""
        mujoco.mj_copyData(self.scratch, self.model, self.live)  # qpos, and mocap bodies placed by the task
        self.allowed = np.zeros(0, int)
        self.allowed = self._touched(self.panda.qpos, depth=np.inf)

    def _touched(self, q: np.ndarray, depth: float) -> np.ndarray:
        """Scene bodies a robot geom touches at q, closer than `depth` (metres; negative: penetrating)."""
        data = self.scratch
        data.qpos[self.panda.arm_qpos_adr] = q
        mujoco.mj_kinematics(self.model, data)
        mujoco.mj_collision(self.model, data)
        n = data.ncon
        if n == 0:
            return np.zeros(0, int)
        g1, g2 = data.contact.geom1[:n], data.contact.geom2[:n]
        r1, r2 = self.robot_geom[g1], self.robot_geom[g2]
        other = self.model.geom_bodyid[np.where(r1, g2, g1)]
        hit = (r1 != r2) & (data.contact.dist[:n] < depth) & ~np.isin(other, self.allowed)
        return np.unique(other[hit])

    def touched(self, q: np.ndarray) -> np.ndarray:
        """The scene bodies the robot collides with at q."""
        return self._touched(q, -PENETRATION)

    def free(self, q: np.ndarray) -> bool:
        return len(self.touched(q)) == 0

    def path_free(self, points: list[np.ndarray]) -> bool:
        """Whether every configuration along the piecewise-linear joint path (checked CHECK_STEP apart) is free."""
        for a, b in zip(points, points[1:]):
            count = max(1, int(np.ceil(np.max(np.abs(b - a)) / CHECK_STEP)))
            if not all(self.free(a + (b - a) * (i / count)) for i in range(1, count + 1)):
                return False
        return True


class Planner:
    def __init__(self, panda: Panda):
        self.panda = panda
        self.test = CollisionTest(panda)
        self.last = "straight"  # how the last path was found: straight, joint (a plain joint move), rrt

    def configurations(self, position: np.ndarray, quat: np.ndarray, first: np.ndarray | None) -> list[np.ndarray]:
        """Up to MAX_CONFIGS distinct IK configurations of the target from random starts, after `first` (the one
        nearest the arm) where given."""
        kinematics, rng = self.panda.kinematics, np.random.default_rng(PLAN_SEED)
        found = [] if first is None else [first]
        for _ in range(CONFIG_SEEDS):
            if len(found) >= MAX_CONFIGS:
                break
            result = kinematics.solve(rng.uniform(PANDA_Q_MIN, PANDA_Q_MAX), position, quat)
            if result.converged and all(np.max(np.abs(result.qpos - q)) > DISTINCT_CONFIG for q in found):
                found.append(result.qpos)
        return found

    def around(self, straight: list[np.ndarray], position: np.ndarray, quat: np.ndarray,
               goal: np.ndarray) -> list[np.ndarray]:
        """The straight path where it is free, else a collision-free one (RRTConnect) to a configuration of the
        target; NoPath where there is none."""
        start = self.panda.qpos.copy()
        self.test.start()
        self.last = "straight"
        if self.test.path_free([start, *straight]):
            return straight
        configurations = self.configurations(position, quat, goal)
        goals = [q for q in configurations if self.test.free(q)]
        if not goals:
            hit = {self.panda.model.body(int(b)).name for q in configurations for b in self.test.touched(q)}
            raise NoPath(f"every IK configuration of the target collides with the scene ({', '.join(sorted(hit))})")
        for q in goals:  # a configuration the arm reaches by a plain joint move
            if self.test.path_free([start, q]):
                self.last = "joint"
                return [q]
        self.last = "rrt"
        path = self._rrt_connect(start, goals)
        if path is None:
            raise NoPath(f"RRTConnect found no collision-free path in {RRT_ITERATIONS} samples to {len(goals)} "
                         "configurations of the target")
        return path

    def _rrt_connect(self, start: np.ndarray, goals: list[np.ndarray]) -> list[np.ndarray] | None:
        """RRTConnect towards the goals, its randomness drawn from this move alone (the start and goals)."""
        rng = np.random.default_rng(np.frombuffer(np.concatenate([start, *goals]).tobytes(), np.uint32))
        path = rrt_connect(start, goals, PANDA_Q_MIN, PANDA_Q_MAX, self.test.path_free, rng, RRT_STEP,
                           RRT_ITERATIONS)
        return None if path is None else path[1:]
