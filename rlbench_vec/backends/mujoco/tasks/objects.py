"""Scene objects a task declares, as generated MJCF primitives (no meshes, nothing downloaded).

Collision groups (backends/mujoco/scene.py): SCENERY for loose objects and fixed furniture (collide with
each other and the robot), ARTICULATED for parts moving on joints inside furniture (collide with the
robot only), VISUAL for what is only seen. Anything else MJCF allows can be added with
`xml.etree.ElementTree.SubElement` and `geom`.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from ..scene import SCENERY, VISUAL, fmt, geom

FRICTION = (1.0, 0.005, 0.0001)


def mocap_body(parent: ET.Element, name: str, position=(0.0, 0.0, 1.0)) -> ET.Element:
    """A body placed by the task (World.set_pose) that physics never moves: targets, furniture."""
    return ET.SubElement(parent, "body", name=name, mocap="true", pos=fmt(position))


def free_box(parent: ET.Element, name: str, half_size, rgba=(1.0, 0.0, 0.0, 1.0), mass: float = 0.1,
             friction=FRICTION) -> ET.Element:
    """A loose box (body, free joint and geom all named `name`), placed with World.set_pose."""
    body = ET.SubElement(parent, "body", name=name, pos="0 0 1")
    ET.SubElement(body, "freejoint", name=name)
    geom(body, "box", rgba, SCENERY, name=name, size=half_size, mass=str(mass), friction=friction, condim="4")
    return body


def region(body: ET.Element, name: str, *, radius: float | None = None, half_size=None, position=(0, 0, 0)) -> None:
    """RLBench's proximity sensor: an invisible site (sphere of `radius` or box of `half_size`) on `body`,
    for DetectedCondition(obj, name)."""
    if (radius is None) == (half_size is None):
        raise ValueError("a region is a sphere (radius) or a box (half_size)")
    kind, size = ("sphere", radius) if radius is not None else ("box", half_size)
    ET.SubElement(body, "site", name=name, type=kind, size=fmt(size), pos=fmt(position), group="5")


def held_cylinder(parent: ET.Element, name: str, radius: float, half_height: float, rgba=(1.0, 0.0, 0.0, 1.0),
                  mass: float = 0.05) -> ET.Element:
    """A loose upright cylinder (body, free joint and drawn geom all named `name`) that collides as a box
    inside it, flat on its +-y sides: flat finger pads squeeze a cylinder out. Geom group 3 is not drawn."""
    body = ET.SubElement(parent, "body", name=name, pos="0 0 1")
    ET.SubElement(body, "freejoint", name=name)
    geom(body, "cylinder", rgba, VISUAL, name=name, size=(radius, half_height), mass="0.001")
    geom(body, "box", (0.0, 0.0, 0.0, 0.0), {**SCENERY, "group": "3"}, size=(0.7 * radius, radius, half_height),
         mass=str(mass), friction=FRICTION, condim="4")
    return body
