"""Long objects carried by one end (a stick, a stack of bank notes): where to grasp one so that the
wrist can turn its free end to point a given way, with the gripper's yaw kept within ±90° (the
wrist's comfortable range; a top-down grasp looks the same turned half a turn)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .base import Waypoint, square_yaw, top_down_quat


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


def stroke(grasp: EndGrasp, start: np.ndarray, end: np.ndarray, step: float, lift: float) -> list[Waypoint]:
    """Pick the bar up at grasp.grip, turn it (grasp.turned_yaw) on the way to `start`, set it down there and
    push it to `end` in straight moves of at most `step` metres (a fast push tips what it pushes)."""
    up = np.array([0.0, 0.0, lift])
    grasp_quat, turned_quat = top_down_quat(grasp.grasp_yaw), top_down_quat(grasp.turned_yaw)
    pieces = max(1, math.ceil(float(np.linalg.norm(end - start)) / step))
    return [
        Waypoint(grasp.grip + up, grasp_quat, True),
        Waypoint(grasp.grip, grasp_quat, True, straight=True),
        Waypoint(grasp.grip, grasp_quat, False),
        Waypoint(grasp.grip + up, grasp_quat, False, straight=True),
        Waypoint(start + up, turned_quat, False),
        Waypoint(start, turned_quat, False, straight=True),
        *(Waypoint(start + (i / pieces) * (end - start), turned_quat, False, straight=True)
          for i in range(1, pieces + 1)),
    ]
