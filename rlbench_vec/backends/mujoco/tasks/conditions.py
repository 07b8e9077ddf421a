"""RLBench's success vocabulary (rlbench/backend/conditions.py) as declarations: plain data naming
the scene's bodies, sites and joints. Each backend evaluates them: backends/mujoco/success.py in
Python, backends/mjwarp/conditions.py as one batched kernel; tests/test_conditions.py checks that
both give the same answers on the same states.

A task's `success(variation)` returns one condition; RLBench's list of registered success conditions
is `ConditionSet([...])`. RLBench's ProximitySensor becomes a *region*: an MJCF site of type sphere or
box (tasks/objects.py: `region`), attached to whatever body carries it, so it moves with that body.
"""

from __future__ import annotations

from dataclasses import dataclass

TCP = "tcp"  # the site between the Panda's fingertips: RLBench's robot tip, for DetectedCondition


@dataclass(frozen=True)
class DetectedCondition:
    """Some part of `obj` (a body name: any of its geoms, which must be spheres, capsules, cylinders or
    boxes; else a site name such as TCP: its point) lies inside the region site `region`, as RLBench's
    proximity sensors detect any part of a shape; negated: no part does."""

    obj: str
    region: str
    negated: bool = False


@dataclass(frozen=True)
class JointCondition:
    """The joint has moved more than `position` (radians or metres) from where the episode started it."""

    joint: str
    position: float


@dataclass(frozen=True)
class GraspedCondition:
    """Both finger pads touch a geom of body `obj` (RLBench: the gripper's grasped objects include it)."""

    obj: str


@dataclass(frozen=True)
class NothingGrasped:
    """No body is touched by both finger pads."""


@dataclass(frozen=True, init=False)
class ConditionSet:
    """All conditions met. order_matters: met one after the other, in order, each remembered once met
    (RLBench's stateful ConditionSet: progress is reset with every episode). simultaneously_met is
    accepted and ignored, as RLBench does."""

    conditions: tuple[Condition, ...]
    order_matters: bool = False
    simultaneously_met: bool = True

    def __init__(self, conditions, order_matters: bool = False, simultaneously_met: bool = True):
        object.__setattr__(self, "conditions", tuple(conditions))
        object.__setattr__(self, "order_matters", order_matters)
        object.__setattr__(self, "simultaneously_met", simultaneously_met)


@dataclass(frozen=True, init=False)
class OrConditions:
    """At least one condition met."""

    conditions: tuple[Condition, ...]

    def __init__(self, conditions):
        object.__setattr__(self, "conditions", tuple(conditions))


Condition = DetectedCondition | JointCondition | GraspedCondition | NothingGrasped | ConditionSet | OrConditions


def is_stateful(condition: Condition) -> bool:
    if isinstance(condition, ConditionSet) and condition.order_matters:
        return True
    return isinstance(condition, (ConditionSet, OrConditions)) and any(map(is_stateful, condition.conditions))


def check_stateless(condition: Condition) -> Condition:
    """The condition, or ValueError where it keeps progress (an indicator's may not)."""
    if is_stateful(condition):
        raise ValueError(f"an indicator's condition cannot keep progress (an ordered ConditionSet): {condition}")
    return check_condition(condition)


def check_condition(condition: Condition) -> Condition:
    """The condition, or ValueError where the batched evaluator could not match RLBench: RLBench stops
    evaluating an ordered set's or an OrConditions' children at the first unmet (met) one, which only
    matters when a child keeps progress of its own, so such children are refused."""
    if isinstance(condition, (ConditionSet, OrConditions)):
        lazy = isinstance(condition, OrConditions) or condition.order_matters
        for child in condition.conditions:
            if lazy and is_stateful(child):
                raise ValueError(f"{type(condition).__name__} cannot hold a condition that keeps progress "
                                 f"(an ordered ConditionSet): {child}")
            check_condition(child)
    elif not isinstance(condition, (DetectedCondition, JointCondition, GraspedCondition, NothingGrasped)):
        raise ValueError(f"not a success condition: {condition!r}")
    return condition
