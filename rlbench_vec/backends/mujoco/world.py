"""The `World` a task declaration sees (tasks/base.py): named reads and writes on one MuJoCo model and
data, the finger pads' contacts, and task_low_dim_state from the declared terms.

Takes the model and data objects without importing MuJoCo itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .geometry import mat_to_quat, wxyz_to_xyzw
from .tasks.base import ShapedReward, StateTerm
from .tasks.conditions import TCP

PADS = ("panda_finger1_pad", "panda_finger2_pad")
SPHERE, CAPSULE, CYLINDER, BOX = 2, 3, 5, 6  # mjtGeom; a region site is a sphere or a box
DETECTABLE = (SPHERE, CAPSULE, CYLINDER, BOX)  # geom types DetectedCondition tests against a region
# Detection: alternating projections between a geom and a region (both convex) reach a common point
# when they overlap; they stop once a point of one lies this close to the other, or after this many.
OVERLAP_TOLERANCE = 1e-4  # metres
OVERLAP_ITERATIONS = 32


def project(kind: int, size: np.ndarray, point: np.ndarray) -> np.ndarray:
    """The point of a primitive (mjtGeom `kind`, MuJoCo's `size`, in its own frame) closest to `point`."""
    if kind == BOX:
        return np.clip(point, -size, size)
    if kind == SPHERE:
        norm = np.linalg.norm(point)
        return point if norm <= size[0] else point * (size[0] / norm)
    axis = np.array([0.0, 0.0, np.clip(point[2], -size[1], size[1])])
    if kind == CAPSULE:
        offset = point - axis
        norm = np.linalg.norm(offset)
        return point if norm <= size[0] else axis + offset * (size[0] / norm)
    radial = np.linalg.norm(point[:2])  # CYLINDER
    scale = 1.0 if radial <= size[0] else size[0] / radial
    return np.array([point[0] * scale, point[1] * scale, axis[2]])


@dataclass(frozen=True)
class Primitive:
    """A geom or region site where it is: mjtGeom kind, MuJoCo's size, position, rotation matrix."""

    kind: int
    size: np.ndarray
    position: np.ndarray
    rotation: np.ndarray

    def closest(self, point: np.ndarray) -> np.ndarray:
        """The primitive's point closest to world point `point`, in world coordinates."""
        return self.position + self.rotation @ project(self.kind, self.size, self.rotation.T @ (point - self.position))

    @property
    def reach(self) -> float:
        """Radius of a sphere about the position holding the primitive (a region's: sphere or box)."""
        return float(self.size[0] if self.kind == SPHERE else np.linalg.norm(self.size))


class World:
    def __init__(self, model: Any, data: Any):
        self.model, self.data = model, data
        self.tcp_site = model.site(TCP).id
        self.pads = [model.geom(name).id for name in PADS]
        self.bodies = {model.body(i).name for i in range(model.nbody)}

    # --- reads --------------------------------------------------------------------------------------

    def position(self, body: str) -> np.ndarray:
        return self.data.xpos[self.model.body(body).id].copy()

    def quat(self, body: str) -> np.ndarray:
        return self.data.xquat[self.model.body(body).id].copy()

    def site_position(self, site: str) -> np.ndarray:
        return self.data.site_xpos[self.model.site(site).id].copy()

    def geom_position(self, geom: str) -> np.ndarray:
        return self.data.geom_xpos[self.model.geom(geom).id].copy()

    def joint(self, joint: str) -> float:
        return float(self.data.qpos[self.qpos_adr(joint)])

    def qpos_adr(self, joint: str) -> int:
        return int(self.model.joint(joint).qposadr[0])

    def tcp_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """Tool-centre position and quaternion (w, x, y, z)."""
        rotation = self.data.site_xmat[self.tcp_site].reshape(3, 3)
        return self.data.site_xpos[self.tcp_site].copy(), mat_to_quat(rotation)

    # --- writes (episode randomisation; mj_forward follows) -----------------------------------------

    def set_pose(self, body: str, position, quat=None) -> None:
        """Place a mocap body, or a body on a free joint (then quat None keeps its orientation)."""
        element = self.model.body(body)
        mocap = int(element.mocapid[0])
        if mocap >= 0:
            self.data.mocap_pos[mocap] = position
            if quat is not None:
                self.data.mocap_quat[mocap] = quat
            return
        joint = int(self.model.body_jntadr[element.id])
        if joint < 0 or self.model.jnt_type[joint] != 0:  # mjJNT_FREE
            raise ValueError(f"set_pose: body {body!r} is neither a mocap body nor on a free joint")
        adr = int(self.model.jnt_qposadr[joint])
        self.data.qpos[adr:adr + 3] = position
        if quat is not None:
            self.data.qpos[adr + 3:adr + 7] = quat

    def set_joint(self, joint: str, value: float) -> None:
        self.data.qpos[self.qpos_adr(joint)] = value

    def set_colour(self, geom: str, rgb) -> None:
        self.model.geom(geom).rgba[:3] = rgb

    # --- what the conditions and the low-dim state read ----------------------------------------------

    def detected(self, obj: str, region: str) -> bool:
        """DetectedCondition: some part of body `obj`'s geoms inside the sphere or box site `region`, as
        RLBench's proximity sensors detect any part of a shape; a site as `obj` (TCP) is a point."""
        m, d = self.model, self.data
        site = m.site(region).id
        zone = Primitive(int(m.site_type[site]), m.site_size[site], d.site_xpos[site], d.site_xmat[site].reshape(3, 3))
        if obj not in self.bodies:
            point = d.site_xpos[m.site(obj).id]
            return bool(np.linalg.norm(zone.closest(point) - point) < OVERLAP_TOLERANCE)
        body = m.body(obj).id
        first = int(m.body_geomadr[body])
        return any(self.overlaps(g, zone) for g in range(first, first + int(m.body_geomnum[body])))

    def overlaps(self, geom: int, zone: Primitive) -> bool:
        """Geom `geom` and the region `zone` share a point (within OVERLAP_TOLERANCE)."""
        m, d = self.model, self.data
        kind = int(m.geom_type[geom])
        if kind not in DETECTABLE:
            raise ValueError(f"DetectedCondition: geom {m.geom(geom).name or geom} of body "
                             f"{m.body(int(m.geom_bodyid[geom])).name!r} is of type {kind}; detection "
                             "handles spheres, capsules, cylinders and boxes")
        shape = Primitive(kind, m.geom_size[geom], d.geom_xpos[geom], d.geom_xmat[geom].reshape(3, 3))
        point = shape.position
        if np.linalg.norm(point - zone.position) > float(m.geom_rbound[geom]) + zone.reach:
            return False
        for _ in range(OVERLAP_ITERATIONS):
            in_zone = zone.closest(point)
            if np.linalg.norm(in_zone - point) < OVERLAP_TOLERANCE:
                return True
            point = shape.closest(in_zone)
            if np.linalg.norm(point - in_zone) < OVERLAP_TOLERANCE:
                return True
        return False

    def grasped_bodies(self) -> set[int]:
        """Bodies touched by both finger pads."""
        touching: list[set[int]] = [set(), set()]
        contacts = self.data.contact
        for g1, g2 in zip(contacts.geom1[:self.data.ncon], contacts.geom2[:self.data.ncon]):
            for k, pad in enumerate(self.pads):
                if g1 == pad:
                    touching[k].add(int(self.model.geom_bodyid[g2]))
                elif g2 == pad:
                    touching[k].add(int(self.model.geom_bodyid[g1]))
        return touching[0] & touching[1]

    def state(self, terms: Sequence[StateTerm]) -> np.ndarray:
        parts = []
        for term in terms:
            if term.kind == "body_position":
                parts.append(self.data.xpos[self.model.body(term.name).id])
            elif term.kind == "body_quat":
                parts.append(wxyz_to_xyzw(self.data.xquat[self.model.body(term.name).id]))
            elif term.kind == "site_position":
                parts.append(self.data.site_xpos[self.model.site(term.name).id])
            elif term.kind == "geom_position":
                parts.append(self.data.geom_xpos[self.model.geom(term.name).id])
            else:
                parts.append([self.data.qpos[self.qpos_adr(term.name)]])
        return np.concatenate(parts)


    def shaped_reward(self, reward: ShapedReward) -> float:
        """RLBench's task reward(): minus the summed distances of the declared pairs of points."""
        return -sum(float(np.linalg.norm(self.state([a]) - self.state([b]))) for a, b in reward.distances)
