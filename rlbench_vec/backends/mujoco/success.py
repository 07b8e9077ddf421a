"""RLBench's success conditions (tasks/conditions.py) evaluated on one MuJoCo world, with RLBench's
semantics: an ordered ConditionSet remembers how far it got, an OrConditions stops at the first met
condition, JointCondition measures from the joint's position at the episode's start."""

from __future__ import annotations

import math

import numpy as np

from .tasks.base import CLOSENESS_SCALE, Closeness, DenseReward, Indicator, Met
from .tasks.conditions import (
    Condition,
    ConditionSet,
    DetectedCondition,
    GraspedCondition,
    JointCondition,
    NothingGrasped,
    OrConditions,
    check_condition,
    check_stateless,
)
from .world import World


class SuccessEvaluator:
    def __init__(self, world: World):
        self.world = world
        self.condition: Condition = ConditionSet([])
        self.progress: dict[int, int] = {}  # id of an ordered ConditionSet -> conditions met so far
        self.start_qpos = np.zeros(0)
        self.indicators: tuple[Indicator, ...] = ()

    def start(self, condition: Condition, indicators: tuple[Indicator, ...] = ()) -> None:
        """A new episode: its condition and indicators, progress reset, joints measured from here."""
        self.condition = check_condition(condition)
        self.indicators = tuple(indicator for indicator in indicators if check_stateless(indicator.condition))
        self.progress = {}
        self.start_qpos = self.world.data.qpos.copy()

    def met_at_start(self) -> bool:
        """Whether the episode's condition already holds, without colouring indicators or keeping the
        progress it would make (a reset draws such an episode again)."""
        met = self._met(self.condition, self.world.grasped_bodies())
        self.progress = {}
        return met

    def met(self) -> bool:
        """Evaluate on the current state (positions and contacts as of the last mj_forward); colour the
        geoms of the indicators met."""
        grasped = self.world.grasped_bodies()
        for indicator in self.indicators:
            if self._met(indicator.condition, grasped):
                for geom in indicator.geoms:
                    self.world.set_colour(geom, indicator.rgb)
        return self._met(self.condition, grasped)

    def dense_reward(self, reward: DenseReward, success: bool) -> float:
        """This package's dense reward on the current state: 1 on success, else the values of the stages that
        count (their `once` condition met), summed, over len(stages) + 1 (tasks/base.py's DenseReward)."""
        if success:
            return 1.0
        world, grasped, total = self.world, self.world.grasped_bodies(), 0.0
        for stage in reward.stages:
            if stage.once is not None and not self._met(check_stateless(stage.once), grasped):
                continue
            value = stage.value
            if isinstance(value, Closeness):
                distance = float(np.linalg.norm(world.state([value.a]) - world.state([value.b])))
                total += 1.0 - math.tanh(CLOSENESS_SCALE * distance)
            elif isinstance(value, Met):
                total += float(self._met(check_stateless(value.condition), grasped))
            else:
                adr = world.qpos_adr(value.joint)
                total += min(1.0, abs(float(world.data.qpos[adr] - self.start_qpos[adr])) / value.travel)
        return total / (len(reward.stages) + 1)

    def _met(self, condition: Condition, grasped: set[int]) -> bool:
        world = self.world
        if isinstance(condition, DetectedCondition):
            return world.detected(condition.obj, condition.region) != condition.negated
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
