"""Long objects carried by one end (a stick, a stack of bank notes): where to grasp one so that the
wrist can turn its free end to point a given way, with the gripper's yaw kept within ±90° (the
wrist's comfortable range; a top-down grasp looks the same turned half a turn)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .base import square_yaw


def wrap(angle: float) -> float:
    """The angle in [-pi, pi)."""
    return (angle + math.pi) % (2 * math.pi) - math.pi


@dataclass(frozen=True)
class EndGrasp:
    """grip: the tool centre's position on the bar; grasp_yaw: the gripper's yaw there (fingers across
    the bar); turned_yaw: its yaw once the free end points the wanted way."""

    grip: np.ndarray
    grasp_yaw: float
    turned_yaw: float


def grasp_by_end(centre: np.ndarray, yaw: float, half_length: float, inset: float, point_yaw: float) -> EndGrasp:
    """Grasp the bar (centre, long axis at `yaw`) `inset` from one end, choosing the end whose free end
    the wrist can turn to `point_yaw` within ±90° (one of the two ends always can)."""
    grasp_yaw = square_yaw(yaw, math.pi)
    turned = grasp_yaw + wrap(point_yaw - yaw)  # holding the end at -axis: the free end points along +axis
    end = 1.0
    if abs(turned) > math.pi / 2:
        end, turned = -1.0, turned - math.copysign(math.pi, turned)
    axis = np.array([math.cos(yaw), math.sin(yaw), 0.0])
    return EndGrasp(np.asarray(centre, float) - end * (half_length - inset) * axis, grasp_yaw, turned)
