"""RLBench's success conditions (tasks/conditions.py) evaluated on one MuJoCo world, with RLBench's
semantics: an ordered ConditionSet remembers how far it got, an OrConditions stops at the first met
condition, JointCondition measures from the joint's position at the episode's start."""

from __future__ import annotations

import numpy as np

from .tasks.conditions import (
    Condition,
    ConditionSet,
    DetectedCondition,
    GraspedCondition,
    JointCondition,
    NothingGrasped,
    OrConditions,
    check_condition,
)
from .world import World


class SuccessEvaluator:
    def __init__(self, world: World):
        self.world = world
        self.condition: Condition = ConditionSet([])
        self.progress: dict[int, int] = {}  # id of an ordered ConditionSet -> conditions met so far
        self.start_qpos = np.zeros(0)

    def start(self, condition: Condition) -> None:
        """A new episode: its condition, progress reset, joints measured from here."""
        self.condition = check_condition(condition)
        self.progress = {}
        self.start_qpos = self.world.data.qpos.copy()

    def met(self) -> bool:
        """Evaluate on the current state (positions and contacts as of the last mj_forward)."""
        return self._met(self.condition, self.world.grasped_bodies())

    def _met(self, condition: Condition, grasped: set[int]) -> bool:
        world = self.world
        if isinstance(condition, DetectedCondition):
            return world.in_region(world.point(condition.obj), condition.region) != condition.negated
        if isinstance(condition, JointCondition):
            adr = world.qpos_adr(condition.joint)
            return bool(abs(world.data.qpos[adr] - self.start_qpos[adr]) > condition.position)
        if isinstance(condition, GraspedCondition):
            return world.model.body(condition.obj).id in grasped
        if isinstance(condition, NothingGrasped):
            return not grasped
        if isinstance(condition, OrConditions):
            return any(self._met(child, grasped) for child in condition.conditions)
        children = condition.conditions
        if not condition.order_matters:
            return all([self._met(child, grasped) for child in children])  # every child, as RLBench
        done = self.progress.get(id(condition), 0)
        while done < len(children) and self._met(children[done], grasped):
            done += 1
        self.progress[id(condition)] = done
        return done >= len(children)
