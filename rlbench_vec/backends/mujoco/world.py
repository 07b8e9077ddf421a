"""The `World` a task declaration sees (tasks/base.py): named reads and writes on one MuJoCo model and
data, the finger pads' contacts, and task_low_dim_state from the declared terms.

Takes the model and data objects without importing MuJoCo itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .geometry import mat_to_quat, wxyz_to_xyzw
from .tasks.base import StateTerm
from .tasks.conditions import TCP

PADS = ("panda_finger1_pad", "panda_finger2_pad")
SPHERE = 2  # mjtGeom: a region site is a sphere, else a box


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

    def point(self, name: str) -> np.ndarray:
        """A body's origin, else a site's position (DetectedCondition's object)."""
        if name in self.bodies:
            return self.data.xpos[self.model.body(name).id]
        return self.data.site_xpos[self.model.site(name).id]

    def in_region(self, point: np.ndarray, site: str) -> bool:
        """`point` inside the sphere or box site `site` (its size and pose)."""
        element = self.model.site(site)
        local = self.data.site_xmat[element.id].reshape(3, 3).T @ (point - self.data.site_xpos[element.id])
        size = self.model.site_size[element.id]
        if int(self.model.site_type[element.id]) == SPHERE:
            return bool(np.linalg.norm(local) < size[0])
        return bool(np.all(np.abs(local) < size))

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

