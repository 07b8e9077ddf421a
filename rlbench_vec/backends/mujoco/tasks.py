"""The embedded tasks, named and phrased as in RLBench: what each adds to the scene, how an episode
is randomised, when it succeeds, and its task_low_dim_state.

Pure Python: the main process reads the class attributes (names, state sizes) without MuJoCo; the
methods that take a model and data run in the worker.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from typing import Any, ClassVar

import numpy as np

from .geometry import wxyz_to_xyzw, yaw_rotation
from .scene import ARTICULATED, SCENERY, SPAWN_HIGH, SPAWN_LOW, TABLE_TOP_Z, VISUAL, Scene, axis_angle_quat, fmt, geom

# RLBench's colour list (rlbench/const.py): variations of the colour tasks index into it.
COLORS = (
    ("red", (1.0, 0.0, 0.0)), ("maroon", (0.5, 0.0, 0.0)), ("lime", (0.0, 1.0, 0.0)),
    ("green", (0.0, 0.5, 0.0)), ("blue", (0.0, 0.0, 1.0)), ("navy", (0.0, 0.0, 0.5)),
    ("yellow", (1.0, 1.0, 0.0)), ("cyan", (0.0, 1.0, 1.0)), ("magenta", (1.0, 0.0, 1.0)),
    ("silver", (0.75, 0.75, 0.75)), ("gray", (0.5, 0.5, 0.5)), ("orange", (1.0, 0.5, 0.0)),
    ("olive", (0.5, 0.5, 0.0)), ("purple", (0.5, 0.0, 0.5)), ("teal", (0.0, 0.5, 0.5)),
    ("azure", (0.0, 0.5, 1.0)), ("violet", (0.5, 0.0, 1.0)), ("rose", (1.0, 0.0, 0.5)),
    ("black", (0.0, 0.0, 0.0)), ("white", (1.0, 1.0, 1.0)),
)


def sample_apart(rng: np.random.Generator, count: int, low: np.ndarray, high: np.ndarray,
                 min_distance: float) -> np.ndarray:
    """`count` uniform points in the box [low, high], pairwise at least `min_distance` apart."""
    points: list[np.ndarray] = []
    while len(points) < count:
        candidate = rng.uniform(low, high)
        if all(np.linalg.norm(candidate - p) >= min_distance for p in points):
            points.append(candidate)
    return np.array(points)


class Task:
    """One task: scene objects, randomisation, success and low-dim state."""

    name: ClassVar[str]
    state_size: ClassVar[int]
    variation_count: ClassVar[int]

    def build(self, scene: Scene) -> None:
        """Add the task's bodies to the MJCF scene."""
        raise NotImplementedError

    def bind(self, model: Any, data: Any) -> None:
        """Look up the ids of the task's objects in the compiled model."""
        self.model, self.data = model, data
        self.tcp_site = model.site("tcp").id

    def descriptions(self, variation: int) -> list[str]:
        raise NotImplementedError

    def init_episode(self, variation: int, rng: np.random.Generator) -> None:
        """Place and colour the objects for a new episode (positions written to data; forward follows)."""
        raise NotImplementedError

    def success(self) -> bool:
        raise NotImplementedError

    def low_dim_state(self) -> np.ndarray:
        raise NotImplementedError

    @property
    def tcp_position(self) -> np.ndarray:
        return self.data.site_xpos[self.tcp_site]

    def _colour(self, geom_name: str, rgb) -> None:
        self.model.geom(geom_name).rgba[:3] = rgb


class ColourTask(Task):
    """Tasks whose variation is the colour of the object to act on; distractors get other colours."""

    variation_count = len(COLORS)
    num_distractors = 2

    def _pick_colours(self, variation: int, rng: np.random.Generator) -> list[tuple[float, float, float]]:
        others = [i for i in range(len(COLORS)) if i != variation]
        chosen = rng.choice(others, size=self.num_distractors, replace=False)
        return [COLORS[variation][1]] + [COLORS[i][1] for i in chosen]


class ReachTarget(ColourTask):
    """Reach the sphere of the variation's colour; two distractor spheres. State: target xyz, then
    the distractors' xyz."""

    name = "reach_target"
    state_size = 9
    SUCCESS_DISTANCE = 0.04  # TCP to the target's centre, metres
    RADIUS = 0.025
    SPAWN_Z = (0.1, 0.4)  # above the table

    def build(self, scene: Scene) -> None:
        for name in ("target", "distractor0", "distractor1"):
            body = ET.SubElement(scene.worldbody, "body", name=name, mocap="true", pos="0 0 1")
            geom(body, "sphere", (1, 0, 0, 1), VISUAL, name=name, size=self.RADIUS)

    def bind(self, model: Any, data: Any) -> None:
        super().bind(model, data)
        self.mocap = [model.body(n).mocapid[0] for n in ("target", "distractor0", "distractor1")]

    def descriptions(self, variation: int) -> list[str]:
        colour = COLORS[variation][0]
        return [f"reach the {colour} target", f"touch the {colour} ball with the panda gripper",
                f"reach the {colour} sphere"]

    def init_episode(self, variation: int, rng: np.random.Generator) -> None:
        low = np.array([*SPAWN_LOW, TABLE_TOP_Z + self.SPAWN_Z[0]])
        high = np.array([*SPAWN_HIGH, TABLE_TOP_Z + self.SPAWN_Z[1]])
        positions = sample_apart(rng, 3, low, high, min_distance=0.12)
        for mocap, name, position, colour in zip(self.mocap, ("target", "distractor0", "distractor1"), positions,
                                                 self._pick_colours(variation, rng)):
            self.data.mocap_pos[mocap] = position
            self._colour(name, colour)

    @property
    def target_position(self) -> np.ndarray:
        return self.data.mocap_pos[self.mocap[0]]

    def success(self) -> bool:
        return bool(np.linalg.norm(self.tcp_position - self.target_position) < self.SUCCESS_DISTANCE)

    def low_dim_state(self) -> np.ndarray:
        return self.data.mocap_pos[self.mocap].ravel()


class PickAndLift(ColourTask):
    """Grasp the block of the variation's colour and lift it into the target sphere; two distractor
    blocks. State: block xyz + quaternion xyzw, target xyz, distractor blocks' xyz."""

    name = "pick_and_lift"
    state_size = 16
    HALF_SIZE = 0.025
    SUCCESS_DISTANCE = 0.05  # block centre to the target's centre, metres
    TARGET_Z = (0.2, 0.35)  # above the table
    BLOCKS = ("block", "distractor0", "distractor1")

    def build(self, scene: Scene) -> None:
        for name in self.BLOCKS:
            body = ET.SubElement(scene.worldbody, "body", name=name, pos="0 0 1")
            ET.SubElement(body, "freejoint", name=name)
            geom(body, "box", (1, 0, 0, 1), SCENERY, name=name, size=(self.HALF_SIZE,) * 3, mass="0.1",
                 friction=(1.0, 0.005, 0.0001), condim="4")
        target = ET.SubElement(scene.worldbody, "body", name="lift_target", mocap="true", pos="0 0 1")
        geom(target, "sphere", (0.1, 0.8, 0.1, 0.6), VISUAL, name="lift_target", size="0.02")

    def bind(self, model: Any, data: Any) -> None:
        super().bind(model, data)
        self.qpos_adr = [model.joint(n).qposadr[0] for n in self.BLOCKS]
        self.block_body = model.body("block").id
        self.block_geom = model.geom("block").id
        self.pads = {model.geom("panda_finger1_pad").id, model.geom("panda_finger2_pad").id}
        self.target_mocap = model.body("lift_target").mocapid[0]

    def descriptions(self, variation: int) -> list[str]:
        colour = COLORS[variation][0]
        return [f"pick up the {colour} block and lift it up to the target", f"grasp the {colour} block to the target",
                f"lift the {colour} block up to the target"]

    def init_episode(self, variation: int, rng: np.random.Generator) -> None:
        positions = sample_apart(rng, len(self.BLOCKS), SPAWN_LOW, SPAWN_HIGH, min_distance=0.15)
        for adr, name, xy, colour in zip(self.qpos_adr, self.BLOCKS, positions, self._pick_colours(variation, rng)):
            yaw = rng.uniform(-math.pi, math.pi)
            self.data.qpos[adr:adr + 3] = (*xy, TABLE_TOP_Z + self.HALF_SIZE)
            self.data.qpos[adr + 3:adr + 7] = axis_angle_quat((0, 0, 1), yaw)
            self._colour(name, colour)
        target_xy = rng.uniform(SPAWN_LOW, SPAWN_HIGH)
        self.data.mocap_pos[self.target_mocap] = (*target_xy, TABLE_TOP_Z + rng.uniform(*self.TARGET_Z))

    @property
    def block_position(self) -> np.ndarray:
        return self.data.xpos[self.block_body]

    @property
    def block_quat(self) -> np.ndarray:
        """(w, x, y, z)."""
        return self.data.xquat[self.block_body]

    @property
    def target_position(self) -> np.ndarray:
        return self.data.mocap_pos[self.target_mocap]

    def grasped(self) -> bool:
        """Both finger pads touch the block."""
        contacts = self.data.contact
        touching = set()
        for g1, g2 in zip(contacts.geom1, contacts.geom2):
            if g1 == self.block_geom:
                touching.add(int(g2))
            elif g2 == self.block_geom:
                touching.add(int(g1))
        return self.pads <= touching

    def success(self) -> bool:
        near = np.linalg.norm(self.block_position - self.target_position) < self.SUCCESS_DISTANCE
        return bool(near and self.grasped())

    def low_dim_state(self) -> np.ndarray:
        distractors = [self.data.qpos[adr:adr + 3] for adr in self.qpos_adr[1:]]
        return np.concatenate([self.block_position, wxyz_to_xyzw(self.block_quat), self.target_position,
                               *distractors])


class OpenDrawer(Task):
    """Open the bottom, middle or top drawer (the variation) of a cabinet placed at random.
    State: the chosen drawer's handle xyz, then the three drawers' openings (metres).

    The handles sit at different heights and sideways offsets (bottom right, middle centre, top left
    as the robot sees them), so a hand on one handle clears the others."""

    name = "open_drawer"
    state_size = 6
    OPTIONS = ("bottom", "middle", "top")
    variation_count = len(OPTIONS)
    SUCCESS_OPENING = 0.15  # metres, like RLBench's JointCondition on the drawer joint
    DEPTH, WIDTH = 0.30, 0.40
    PLINTH, SLOT, TOP = 0.10, 0.11, 0.02
    HANDLE_STANDOFF = 0.05
    HANDLE_OFFSETS = (-0.1, 0.0, 0.1)  # sideways, per drawer
    HANDLE_HALF_LENGTH = 0.04
    TRAVEL = 0.25

    def build(self, scene: Scene) -> None:
        wood, front = (0.55, 0.38, 0.25, 1.0), (0.82, 0.7, 0.55, 1.0)
        d, w = self.DEPTH / 2, self.WIDTH / 2
        height = self.PLINTH + 3 * self.SLOT + self.TOP
        cabinet = ET.SubElement(scene.worldbody, "body", name="cabinet", mocap="true", pos="0 0 1")
        geom(cabinet, "box", wood, SCENERY, size=(d, w, self.PLINTH / 2), pos=(0, 0, self.PLINTH / 2))
        geom(cabinet, "box", wood, SCENERY, size=(d, w, self.TOP / 2), pos=(0, 0, height - self.TOP / 2))
        for side in (-1, 1):
            geom(cabinet, "box", wood, SCENERY, size=(d, 0.01, height / 2), pos=(0, side * (w - 0.01), height / 2))
        geom(cabinet, "box", wood, SCENERY, size=(0.01, w, height / 2), pos=(d - 0.01, 0, height / 2))
        for i, option in enumerate(self.OPTIONS):
            centre_z = self.PLINTH + (i + 0.5) * self.SLOT
            drawer = ET.SubElement(cabinet, "body", name=f"drawer_{option}", pos=fmt([-d, 0, centre_z]))
            ET.SubElement(drawer, "joint", name=f"drawer_{option}", type="slide", axis="-1 0 0",
                          range=fmt([0, self.TRAVEL]), damping="5", armature="0.1")
            half_h, inner_w = self.SLOT / 2 - 0.004, w - 0.025
            geom(drawer, "box", front, ARTICULATED, size=(0.01, w - 0.022, half_h), pos=(0.01, 0, 0), mass="0.3")
            geom(drawer, "box", wood, ARTICULATED, size=(d - 0.03, inner_w, 0.004), pos=(d - 0.01, 0, 0.01 - half_h))
            for side in (-1, 1):
                geom(drawer, "box", wood, ARTICULATED, size=(d - 0.03, 0.004, half_h - 0.01),
                     pos=(d - 0.01, side * inner_w, 0))
            geom(drawer, "box", wood, ARTICULATED, size=(0.004, inner_w, half_h - 0.01), pos=(2 * d - 0.04, 0, 0))
            x, y, half = -self.HANDLE_STANDOFF, self.HANDLE_OFFSETS[i], self.HANDLE_HALF_LENGTH
            geom(drawer, "capsule", (0.3, 0.3, 0.32, 1), ARTICULATED, name=f"handle_{option}",
                 fromto=(x, y - half, 0, x, y + half, 0), size="0.01", friction=(1.5, 0.01, 0.0005))
            for end in (y - half, y + half):
                geom(drawer, "box", (0.3, 0.3, 0.32, 1), ARTICULATED, size=(self.HANDLE_STANDOFF / 2, 0.006, 0.006),
                     pos=(x / 2, end, 0))

    def bind(self, model: Any, data: Any) -> None:
        super().bind(model, data)
        self.cabinet_mocap = model.body("cabinet").mocapid[0]
        self.joint_adr = [model.joint(f"drawer_{o}").qposadr[0] for o in self.OPTIONS]
        self.handle_geoms = [model.geom(f"handle_{o}").id for o in self.OPTIONS]
        self.variation = 0

    def descriptions(self, variation: int) -> list[str]:
        option = self.OPTIONS[variation]
        return [f"open the {option} drawer", f"grip the {option} handle and pull the {option} drawer open",
                f"slide the {option} drawer open"]

    def init_episode(self, variation: int, rng: np.random.Generator) -> None:
        self.variation = variation
        yaw = rng.uniform(-0.25, 0.25)
        centre = (rng.uniform(0.48, 0.56), rng.uniform(-0.12, 0.12), TABLE_TOP_Z)
        self.data.mocap_pos[self.cabinet_mocap] = centre
        self.data.mocap_quat[self.cabinet_mocap] = axis_angle_quat((0, 0, 1), yaw)
        self.data.qpos[self.joint_adr] = 0.0

    @property
    def pull_direction(self) -> np.ndarray:
        """Unit vector out of the cabinet's front (the way the drawers open), in the world frame."""
        quat = self.data.mocap_quat[self.cabinet_mocap]
        yaw = 2 * math.atan2(quat[3], quat[0])
        return yaw_rotation(yaw) @ np.array([-1.0, 0.0, 0.0])

    @property
    def handle_position(self) -> np.ndarray:
        """Centre of the chosen drawer's handle bar."""
        return self.data.geom_xpos[self.handle_geoms[self.variation]]

    def openings(self) -> np.ndarray:
        return self.data.qpos[self.joint_adr]

    def success(self) -> bool:
        return bool(self.openings()[self.variation] > self.SUCCESS_OPENING)

    def low_dim_state(self) -> np.ndarray:
        return np.concatenate([self.handle_position, self.openings()])


TASKS: dict[str, type[Task]] = {task.name: task for task in (ReachTarget, OpenDrawer, PickAndLift)}
