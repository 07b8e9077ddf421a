"""The shared scene as generated MJCF: a Franka Panda on a table, RLBench's five cameras, a light.

Pure Python (xml.etree): the main process may import it, and it never touches MuJoCo. Tasks add their
objects through `Scene.worldbody` before `Scene.to_xml()`.

The arm follows the kinematics and limits Franka publishes for the Panda (modified Denavit-Hartenberg
parameters; joint position, velocity, acceleration and torque limits); the links are drawn with
capsules and cylinders so a software rasteriser renders them cheaply.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass

import numpy as np

from ...spec import (
    FINGER_MAX,
    PANDA_Q_MAX,
    PANDA_Q_MIN,
    PANDA_TAU_MAX,
    ROBOT_BASE,
    TABLE_CENTER,
    TABLE_HALF,
    TABLE_TOP_Z,
)

# Franka Panda, modified DH (Craig): rows (a_{i-1}, d_i, alpha_{i-1}) for joints 1..7, metres / radians.
# Limits below: position (rad), velocity (rad/s), acceleration (rad/s^2), torque (Nm), from the datasheet.
PANDA_DH = (
    (0.0, 0.333, 0.0),
    (0.0, 0.0, -math.pi / 2),
    (0.0, 0.316, math.pi / 2),
    (0.0825, 0.0, math.pi / 2),
    (-0.0825, 0.384, -math.pi / 2),
    (0.0, 0.0, math.pi / 2),
    (0.088, 0.0, math.pi / 2),
)
FLANGE_OFFSET = 0.107  # joint 7 frame to flange, along its z axis
HAND_TCP_OFFSET = 0.1034  # flange to the point between the fingertips (Franka's default EE frame)
FINGER_BASE_OFFSET = 0.0584  # flange to the finger joints
PANDA_DDQ_MAX = np.array([15.0, 7.5, 10.0, 12.5, 15.0, 20.0, 20.0])
# Gripper pointing down over the table, elbow up: close to RLBench's initial Panda configuration.
HOME_QPOS = np.array([0.0, -0.3, 0.0, -2.3, 0.0, 2.0, math.pi / 4])

# Where tasks put things (x, y ranges on the table, in front of the robot); the table, the robot's limits and
# the workspace pose targets must lie in are the action layout's (spec)
SPAWN_LOW = np.array([0.0, -0.3])
SPAWN_HIGH = np.array([0.35, 0.3])

CAMERA_NEAR, CAMERA_FAR = 0.01, 4.5  # metres; depth is normalised between them like RLBench

# Collision groups: scenery and loose task objects collide with each other and the robot; robot geoms
# only with those and with articulated parts (so links never collide with each other); articulated parts
# (drawers, handles) only with the robot, so they slide freely in their housing; visual geoms with nothing.
SCENERY = {"contype": "1", "conaffinity": "3"}
ROBOT = {"contype": "2", "conaffinity": "1"}
ARTICULATED = {"contype": "4", "conaffinity": "2"}
VISUAL = {"contype": "0", "conaffinity": "0"}

WHITE = (0.92, 0.92, 0.92, 1.0)
DARK = (0.22, 0.22, 0.24, 1.0)


def render_passes(modalities) -> list[bool]:
    """Offscreen passes the modalities need: False for the lit colour pass, True for the flat
    segmentation pass (masks; also depth-only cameras, as it is the cheaper pass)."""
    passes = [False] if "rgb" in modalities else []
    if "mask" in modalities or (not passes and {"depth", "point_cloud"} & set(modalities)):
        passes.append(True)
    return passes


def offscreen_size(num_cameras: int, width: int, height: int, modalities, envs: int = 1) -> tuple[int, int]:
    """The offscreen buffer: a column per camera, a row per pass and env; at least one image for render_rgb."""
    return max(1, num_cameras) * width, envs * max(1, len(render_passes(modalities))) * height


def fmt(values) -> str:
    """MJCF number lists: '0.1 0 0.3'."""
    return " ".join(f"{float(v):.6g}" for v in np.atleast_1d(values))


def axis_angle_quat(axis, angle: float) -> np.ndarray:
    """Quaternion (w, x, y, z), MuJoCo's order."""
    axis = np.asarray(axis, dtype=float) / np.linalg.norm(axis)
    return np.concatenate([[math.cos(angle / 2)], math.sin(angle / 2) * axis])


def look_at_xyaxes(position, target, up=(0.0, 0.0, 1.0)) -> str:
    """MJCF camera orientation looking from `position` at `target` (MuJoCo cameras look along -z)."""
    forward = np.subtract(target, position, dtype=float)
    forward /= np.linalg.norm(forward)
    right = np.cross(forward, up)
    right /= np.linalg.norm(right)
    return fmt(np.concatenate([right, np.cross(right, forward)]))


@dataclass(frozen=True)
class CameraPlacement:
    position: tuple[float, float, float]
    target: tuple[float, float, float]
    fovy: float
    up: tuple[float, float, float] = (0.0, 0.0, 1.0)


# RLBench's fixed cameras: the shoulders behind and above the robot's base on either side (left = +y,
# the robot faces +x), overhead above the table, front across the table facing the robot.
FIXED_CAMERAS = {
    "left_shoulder": CameraPlacement((-0.25, 0.7, 1.6), (0.3, -0.05, TABLE_TOP_Z), 50.0),
    "right_shoulder": CameraPlacement((-0.25, -0.7, 1.6), (0.3, 0.05, TABLE_TOP_Z), 50.0),
    "overhead": CameraPlacement((0.25, 0.0, 2.3), (0.2, 0.0, TABLE_TOP_Z), 45.0, up=(1.0, 0.0, 0.0)),
    "front": CameraPlacement((1.25, 0.0, 1.55), (0.0, 0.0, TABLE_TOP_Z + 0.2), 45.0),
}
WRIST_FOVY = 70.0


def geom(parent: ET.Element, kind: str, rgba=WHITE, group=ROBOT, **attrs) -> ET.Element:
    attrs = {k: v if isinstance(v, str) else fmt(v) for k, v in attrs.items()}
    return ET.SubElement(parent, "geom", type=kind, rgba=fmt(rgba), **group, **attrs)


def capsule(parent: ET.Element, start, end, radius: float, rgba=WHITE, group=ROBOT) -> None:
    geom(parent, "capsule", rgba, group, fromto=np.concatenate([start, end]), size=radius)


def _joint_housing(parent: ET.Element, radius: float, half_length: float) -> None:
    """A dark cylinder along the joint axis (z), where the real arm has its motor."""
    geom(parent, "cylinder", DARK, VISUAL, size=(radius, half_length))


class Scene:
    """An MJCF document under construction. Names used by the runtime: joints panda_joint1..7,
    panda_finger_joint1/2, site 'tcp', body 'panda_hand', cameras as in config.CAMERAS."""

    def __init__(self, offscreen: tuple[int, int]):
        self.root = ET.Element("mujoco", model="rlbench_vec_panda")
        ET.SubElement(self.root, "compiler", angle="radian", autolimits="true")
        ET.SubElement(
            self.root, "option", timestep="0.002", integrator="implicitfast", cone="elliptic", impratio="10"
        )
        self._visual(offscreen)
        self.worldbody = ET.SubElement(self.root, "worldbody")
        self.actuators = ET.SubElement(self.root, "actuator")
        self.equalities = ET.SubElement(self.root, "equality")
        self.tendons = ET.SubElement(self.root, "tendon")
        self._scenery()
        self._panda()
        self._fixed_cameras()

    def _visual(self, offscreen: tuple[int, int]) -> None:
        visual = ET.SubElement(self.root, "visual")
        ET.SubElement(visual, "global", offwidth=str(offscreen[0]), offheight=str(offscreen[1]))
        # No multisampling, coarse tessellation and one quad per box face: a software rasteriser spends
        # most of a 128x128 frame on per-vertex work, so fewer vertices is the biggest saving.
        ET.SubElement(visual, "quality", offsamples="0", numslices="12", numstacks="6", numquads="1", shadowsize="0")
        ET.SubElement(visual, "map", znear=str(CAMERA_NEAR), zfar=str(CAMERA_FAR))
        ET.SubElement(visual, "headlight", ambient="0.35 0.35 0.35", diffuse="0.45 0.45 0.45", specular="0 0 0")
        # extent=1 makes znear/zfar absolute distances in metres.
        ET.SubElement(self.root, "statistic", extent="1", center=fmt([TABLE_CENTER[0], 0, TABLE_TOP_Z]))

    def _scenery(self) -> None:
        wb = self.worldbody
        ET.SubElement(wb, "light", name="sun", directional="true", castshadow="false",
                      pos="0.3 0.4 3", dir="-0.1 -0.2 -1", diffuse="0.55 0.55 0.55", specular="0.1 0.1 0.1")
        geom(wb, "plane", (0.55, 0.52, 0.48, 1.0), SCENERY, name="floor", size=(3.0, 3.0, 1.0))
        table = ET.SubElement(wb, "body", name="table", pos=fmt([*TABLE_CENTER, TABLE_TOP_Z]))
        thickness = 0.03
        geom(table, "box", (0.78, 0.68, 0.52, 1.0), SCENERY, name="table_top",
              pos=(0, 0, -thickness), size=(*TABLE_HALF, thickness), friction=(1.0, 0.005, 0.0001))
        leg_height = (TABLE_TOP_Z - 2 * thickness) / 2
        for sx in (-1, 1):
            for sy in (-1, 1):
                geom(table, "box", (0.45, 0.35, 0.25, 1.0), VISUAL, size=(0.03, 0.03, leg_height),
                      pos=(sx * (TABLE_HALF[0] - 0.06), sy * (TABLE_HALF[1] - 0.06), -2 * thickness - leg_height))

    def _panda(self) -> None:
        base = ET.SubElement(self.worldbody, "body", name="panda_link0", pos=fmt(ROBOT_BASE))
        geom(base, "cylinder", WHITE, VISUAL, size=(0.075, 0.07), pos=(0, 0, 0.07))
        geom(base, "box", DARK, VISUAL, size=(0.1, 0.1, 0.01), pos=(-0.02, 0, 0.01))
        capsule(base, (0, 0, 0.1), (0, 0, 0.2), 0.065, WHITE, VISUAL)
        parent = base
        for i, (a, d, alpha) in enumerate(PANDA_DH, start=1):
            # Modified DH: translate a along x, rotate alpha about x, then d along the new z.
            pos = np.array([a, -math.sin(alpha) * d, math.cos(alpha) * d])
            link = ET.SubElement(parent, "body", name=f"panda_link{i}", pos=fmt(pos),
                                 quat=fmt(axis_angle_quat((1, 0, 0), alpha)), gravcomp="1")
            # The wrist's armature 0.3: at 0.1 its saturated servo (torque capped at 12 N m, which implicitfast's
            # derivatives ignore) could lock into a sign flip every substep, +-0.115 rad/s held forever. Joints 1-4
            # keep 0.1: at 0.3 they lag a planned path enough to brush what it passes (tests/test_planner.py).
            ET.SubElement(link, "joint", name=f"panda_joint{i}", type="hinge", axis="0 0 1",
                          range=fmt([PANDA_Q_MIN[i - 1], PANDA_Q_MAX[i - 1]]), armature="0.1" if i <= 4 else "0.3",
                          damping="1",
                          actuatorfrcrange=fmt([-PANDA_TAU_MAX[i - 1], PANDA_TAU_MAX[i - 1]]))
            self._link_shape(link, i)
            parent = link
        self._hand(parent)
        # Per joint a position servo and a velocity servo (feed-forward of the setpoint's velocity, so a
        # moving setpoint is tracked without lag); the joint's actuatorfrcrange caps their sum at the
        # datasheet torque.
        for i in range(1, 8):
            kp, kv = (4500, 450) if i <= 4 else (2000, 200)
            ET.SubElement(self.actuators, "general", name=f"panda_act{i}", joint=f"panda_joint{i}",
                          gainprm=str(kp), biastype="affine", biasprm=fmt([0, -kp, 0]),
                          ctrlrange=fmt([PANDA_Q_MIN[i - 1], PANDA_Q_MAX[i - 1]]))
            ET.SubElement(self.actuators, "general", name=f"panda_vel{i}", joint=f"panda_joint{i}",
                          gainprm=str(kv), biastype="affine", biasprm=fmt([0, 0, -kv]))

    @staticmethod
    def _link_shape(link: ET.Element, i: int) -> None:
        """Capsules from this joint towards the next one, in this link's frame."""
        if i == 1:
            capsule(link, (0, 0, -0.13), (0, 0, -0.02), 0.065)
            _joint_housing(link, 0.068, 0.06)
        elif i == 2:
            capsule(link, (0, 0, 0), (0, -0.2, 0), 0.065)
            _joint_housing(link, 0.068, 0.07)
        elif i == 3:
            capsule(link, (0, 0, -0.12), (0, 0, -0.03), 0.06)
            capsule(link, (0, 0, -0.02), (0.0825, 0, -0.02), 0.058)
            _joint_housing(link, 0.062, 0.06)
        elif i == 4:
            capsule(link, (0, 0, 0), (-0.0825, 0.09, 0), 0.058)
            _joint_housing(link, 0.062, 0.065)
        elif i == 5:
            capsule(link, (0, 0, -0.26), (0, 0, -0.12), 0.05)
            capsule(link, (0, 0.06, -0.1), (0, 0.06, 0.0), 0.04)
            _joint_housing(link, 0.055, 0.06)
        elif i == 6:
            capsule(link, (0, 0, 0), (0.088, 0, 0), 0.05)
            _joint_housing(link, 0.055, 0.05)
        else:
            capsule(link, (0, 0, 0.0), (0, 0, 0.07), 0.045)
            _joint_housing(link, 0.045, 0.04)

    def _hand(self, link7: ET.Element) -> None:
        hand = ET.SubElement(link7, "body", name="panda_hand", pos=fmt([0, 0, FLANGE_OFFSET]),
                             quat=fmt(axis_angle_quat((0, 0, 1), -math.pi / 4)), gravcomp="1")
        geom(hand, "box", WHITE, ROBOT, size=(0.03, 0.1, 0.025), pos=(0, 0, 0.035))
        geom(hand, "cylinder", DARK, VISUAL, size=(0.04, 0.005), pos=(0, 0, 0.005))
        # Franka's EE frame: z along the fingers (the approach direction), y the finger opening axis.
        ET.SubElement(hand, "site", name="tcp", pos=fmt([0, 0, HAND_TCP_OFFSET]), size="0.005", group="5")
        ET.SubElement(hand, "camera", name="wrist", pos="0.07 0 0.03", fovy=str(WRIST_FOVY),
                      xyaxes=look_at_xyaxes((0.07, 0, 0.03), (0.0, 0, 0.16), up=(-1, 0, 0)))
        for side, sign in ((1, 1.0), (2, -1.0)):
            finger = ET.SubElement(hand, "body", name=f"panda_finger{side}", pos=fmt([0, 0, FINGER_BASE_OFFSET]),
                                   gravcomp="1")
            ET.SubElement(finger, "joint", name=f"panda_finger_joint{side}", type="slide",
                          axis=fmt([0, sign, 0]), range=fmt([0, FINGER_MAX]), armature="0.05", damping="2")
            geom(finger, "box", DARK, ROBOT, size=(0.011, 0.01, 0.026), pos=(0, sign * 0.012, 0.026),
                  name=f"panda_finger{side}_pad", mass="0.02", friction=(1.5, 0.01, 0.0005), condim="4")
        # Both fingers move together (Franka's hand is one motor): a tendon drives their mean opening.
        tendon = ET.SubElement(self.tendons, "fixed", name="panda_fingers")
        for side in (1, 2):
            ET.SubElement(tendon, "joint", joint=f"panda_finger_joint{side}", coef="0.5")
        ET.SubElement(self.equalities, "joint", joint1="panda_finger_joint1", joint2="panda_finger_joint2",
                      solref="0.005 1")
        ET.SubElement(self.actuators, "general", name="panda_gripper", tendon="panda_fingers",
                      gainprm="1000", biastype="affine", biasprm="0 -1000 -60", forcerange="-70 70",
                      ctrlrange=fmt([0, FINGER_MAX]))

    def _fixed_cameras(self) -> None:
        for name, cam in FIXED_CAMERAS.items():
            ET.SubElement(self.worldbody, "camera", name=name, pos=fmt(cam.position), fovy=str(cam.fovy),
                          xyaxes=look_at_xyaxes(cam.position, cam.target, cam.up))

    def to_xml(self) -> str:
        return ET.tostring(self.root, encoding="unicode")
