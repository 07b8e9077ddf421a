"""What a task module declares (one subclass of `Task`, exported as `TASK`), and the `World` it is
given to randomise episodes and plan its oracle.

Pure Python: the main process imports every task module for names, variation counts and state sizes
without MuJoCo. Both embedded backends run the same declaration: `mujoco` through
backends/mujoco/world.py and success.py, `mjwarp` by drawing episodes with the same code on the host
and evaluating `success` and `low_dim_state` in batched kernels (backends/mjwarp/tasks.py), so a task
needs no mjwarp code of its own.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar, Protocol

import numpy as np

from ..geometry import mat_to_quat, yaw_rotation
from ..scene import Scene
from .conditions import TCP, Condition

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

# Upstream's default yaw bound, radians: Task.base_rotation_bounds' (a task base turns ±3.14 unless its file
# says otherwise) and SpawnBoundary.sample's (a loose object turned up to ±3.14 from its pose on the base).
DEFAULT_YAW = 3.14

STATE_SIZES = {"body_position": 3, "body_quat": 4, "site_position": 3, "geom_position": 3, "joint_position": 1}


@dataclass(frozen=True)
class StateTerm:
    """One piece of task_low_dim_state: kind (a key of STATE_SIZES; body_quat is xyzw) of a named element."""

    kind: str
    name: str

    @property
    def size(self) -> int:
        return STATE_SIZES[self.kind]


def body_position(name: str) -> StateTerm:
    return StateTerm("body_position", name)


def body_quat(name: str) -> StateTerm:
    return StateTerm("body_quat", name)


def site_position(name: str) -> StateTerm:
    return StateTerm("site_position", name)


def geom_position(name: str) -> StateTerm:
    return StateTerm("geom_position", name)


def joint_position(name: str) -> StateTerm:
    return StateTerm("joint_position", name)


POINT_KINDS = ("body_position", "site_position", "geom_position")
TIP = StateTerm("site_position", TCP)  # RLBench's robot.arm.get_tip(): the tool centre


@dataclass(frozen=True, init=False)
class ShapedReward:
    """RLBench's task reward() (what Environment(shaped_rewards=True) makes step return): minus the sum of
    the distances between the two points of each pair; points are position terms (POINT_KINDS)."""

    distances: tuple[tuple[StateTerm, StateTerm], ...]

    def __init__(self, *distances: tuple[StateTerm, StateTerm]):
        for pair in distances:
            if len(pair) != 2 or any(point.kind not in POINT_KINDS for point in pair):
                raise ValueError(f"a shaped reward's distance is between two of {POINT_KINDS}, got {pair}")
        object.__setattr__(self, "distances", tuple(distances))


CLOSENESS_SCALE = 5.0  # per metre: ManiSkill3's 1 - tanh(5 d)


@dataclass(frozen=True)
class Closeness:
    """A dense reward stage's value: 1 - tanh(5 d), d the distance between two points (POINT_KINDS)."""

    a: StateTerm
    b: StateTerm

    def __post_init__(self):
        if self.a.kind not in POINT_KINDS or self.b.kind not in POINT_KINDS:
            raise ValueError(f"Closeness is between two of {POINT_KINDS}, got {self.a} and {self.b}")


@dataclass(frozen=True)
class Met:
    """A dense reward stage's value: 1 while `condition` (one that keeps no progress) holds, else 0."""

    condition: Condition


@dataclass(frozen=True)
class Progress:
    """A dense reward stage's value: how far `joint` moved from its episode start, over `travel` (capped at 1)."""

    joint: str
    travel: float


@dataclass(frozen=True)
class Stage:
    """One stage of a dense reward: its value, counted only while `once` holds (None: always)."""

    value: Closeness | Met | Progress
    once: Condition | None = None


@dataclass(frozen=True, init=False)
class DenseReward:
    """This package's staged dense reward (backend_options={"dense_rewards": True}; not RLBench's), as
    ManiSkill3's normalised dense rewards: the stages' values summed and divided by len(stages) + 1, so each
    step's reward lies in [0, 1) until success, which gives 1 (and still ends the episode)."""

    stages: tuple[Stage, ...]

    def __init__(self, *stages: Stage):
        object.__setattr__(self, "stages", tuple(stages))


@dataclass
class Waypoint:
    """A tool-centre pose of an oracle: position, quaternion (w, x, y, z), gripper open or closed.
    straight: the tool must move there in a straight line (e.g. pulling a drawer, pressing a button).
    ignore_collisions: RLBench's waypoint mark of the same name (its Observation.ignore_collisions, PerAct's 9th
    action number): the move may touch the scene; None: what `straight` says (an approach, insertion, pull or
    push into contact, which RLBench's tasks mark so)."""

    position: np.ndarray
    quat: np.ndarray
    gripper_open: bool
    straight: bool = False
    ignore_collisions: bool | None = None

    @property
    def touches(self) -> bool:
        """Whether the move to this waypoint ignores collisions (see ignore_collisions)."""
        return self.straight if self.ignore_collisions is None else self.ignore_collisions


@dataclass(frozen=True)
class Indicator:
    """RLBench's colouring in a task's step(): once `condition` is met in an episode, the geoms `geoms`
    take colour `rgb` until the episode ends (init_episode gives them their starting colour). Evaluated
    after every action, as success; `condition` may not keep progress (an ordered ConditionSet)."""

    condition: Condition
    geoms: tuple[str, ...]
    rgb: tuple[float, float, float]


class World(Protocol):
    """One env's simulator state as a task sees it (backends/mujoco/world.py implements it). Positions
    are world-frame metres, quaternions (w, x, y, z) as MuJoCo stores them."""

    def position(self, body: str) -> np.ndarray: ...
    def quat(self, body: str) -> np.ndarray: ...
    def site_position(self, site: str) -> np.ndarray: ...
    def geom_position(self, geom: str) -> np.ndarray: ...
    def joint(self, joint: str) -> float: ...
    def tcp_pose(self) -> tuple[np.ndarray, np.ndarray]: ...
    def set_pose(self, body: str, position, quat=None) -> None: ...
    def set_joint(self, joint: str, value: float) -> None: ...
    def set_colour(self, geom: str, rgb) -> None: ...


class Task:
    """A task declaration. Subclasses set `name` (RLBench's snake_case name) and `variation_count`
    (RLBench's), and implement every method below. Only what `init_episode` writes through the World
    (poses of mocap and free bodies, joint positions, geom colours) may change between episodes: the
    mjwarp backend copies exactly that to each world."""

    name: ClassVar[str]
    variation_count: ClassVar[int]

    def build(self, scene: Scene) -> None:
        """Add the task's bodies, joints and region sites to the MJCF scene (tasks/objects.py helps)."""
        raise NotImplementedError

    def descriptions(self, variation: int) -> list[str]:
        """RLBench's descriptions of the variation (same meaning, first one first)."""
        raise NotImplementedError

    def init_episode(self, world: World, variation: int, rng: np.random.Generator) -> None:
        """Place and colour the objects of a new episode; draw only from `rng` (seeded episodes)."""
        raise NotImplementedError

    def success(self, variation: int) -> Condition:
        """RLBench's success conditions of the variation (tasks/conditions.py)."""
        raise NotImplementedError

    def low_dim_state(self, variation: int) -> tuple[StateTerm, ...]:
        """task_low_dim_state, as terms; every variation must give the same sizes in the same order."""
        raise NotImplementedError

    def reward(self, variation: int) -> ShapedReward | None:
        """RLBench's reward() of the task, for shaped_rewards; None (the default) where upstream defines none."""
        return None

    def dense_reward(self, variation: int) -> DenseReward | None:
        """This package's staged dense reward (dense_rewards), declared per task; None (the default): none."""
        return None

    def indicators(self, variation: int) -> tuple[Indicator, ...]:
        """Colour changes RLBench's task makes when a condition is met (push_buttons' plates turning
        green); none by default."""
        return ()

    def oracle(self, world: World, variation: int) -> list[Waypoint]:
        """Tool waypoints solving the episode, planned from its first state (privileged information)."""
        raise NotImplementedError

    @classmethod
    def state_size(cls) -> int:
        return sum(term.size for term in cls().low_dim_state(0))

    @classmethod
    def has_reward(cls) -> bool:
        return cls().reward(0) is not None

    @classmethod
    def has_dense_reward(cls) -> bool:
        return cls().dense_reward(0) is not None


def pick_colours(rng: np.random.Generator, variation: int, distractors: int) -> list[tuple[float, float, float]]:
    """The variation's colour from COLORS, then `distractors` other colours drawn without repeats."""
    others = [i for i in range(len(COLORS)) if i != variation]
    chosen = rng.choice(others, size=distractors, replace=False)
    return [COLORS[variation][1]] + [COLORS[i][1] for i in chosen]


def sample_apart(rng: np.random.Generator, count: int, low, high, min_distance: float) -> np.ndarray:
    """`count` uniform points in the box [low, high], pairwise at least `min_distance` apart."""
    points: list[np.ndarray] = []
    while len(points) < count:
        candidate = rng.uniform(low, high)
        if all(np.linalg.norm(candidate - p) >= min_distance for p in points):
            points.append(candidate)
    return np.array(points)


def top_down_quat(yaw: float) -> np.ndarray:
    """The gripper pointing straight down, fingers closing along the direction `yaw` + 90 degrees."""
    return mat_to_quat(yaw_rotation(yaw) @ np.diag([1.0, -1.0, -1.0]))


def base_offset(yaw: float, offset) -> np.ndarray:
    """An (x, y) offset in the frame of a task base turned by `yaw`, in world axes (z 0): where a part fixed
    to the base lies from the base's origin."""
    return yaw_rotation(yaw) @ np.array([offset[0], offset[1], 0.0])


def body_yaw(quat: np.ndarray) -> float:
    """Yaw of a (w, x, y, z) rotation about z."""
    return 2 * math.atan2(quat[3], quat[0])


def square_yaw(yaw: float, symmetry: float) -> float:
    """The gripper yaw within ±symmetry/2 that grasps an object of yaw `yaw` looking the same every
    `symmetry` radians (a cube: pi/2; a bar grasped across: pi)."""
    return (yaw + symmetry / 2) % symmetry - symmetry / 2


HAND_HALF_LENGTH = 0.1  # m: half the Panda hand's length, along the fingers' closing direction


def closing_direction(yaw: float) -> np.ndarray:
    """The xy direction a top-down gripper of yaw `yaw` closes its fingers along."""
    return np.array([-math.sin(yaw), math.cos(yaw)])


def hand_points(centre: np.ndarray, yaw: float) -> list[np.ndarray]:
    """Nine xy points along a top-down hand of yaw `yaw` over `centre` (xy), end to end."""
    along = closing_direction(yaw)
    return [centre + t * along for t in np.linspace(-HAND_HALF_LENGTH, HAND_HALF_LENGTH, 9)]


def clearest_face_yaw(yaw: float, clearance: Callable[[float], float]) -> float:
    """Of the two gripper yaws with the fingers on the faces of a box of yaw `yaw` (square_yaw's, and it turned a
    quarter), the one with the larger clearance(gripper_yaw) (the nearer on a tie)."""
    base = square_yaw(yaw, math.pi / 2)
    turned = base - math.copysign(math.pi / 2, base)
    return base if clearance(base) >= clearance(turned) else turned


def pick_and_place(start: np.ndarray, quat: np.ndarray, drop: np.ndarray, clearance: float = 0.1,
                   drop_quat: np.ndarray | None = None) -> list[Waypoint]:
    """Grasp what lies at tool-centre position `start`, carry it above `drop`, lower it there, let go and
    back off upwards (so NothingGrasped holds). drop_quat: the gripper's orientation from the carry on
    (default: the grasp's)."""
    up = np.array([0.0, 0.0, clearance])
    turned = quat if drop_quat is None else drop_quat
    return [
        Waypoint(start + up, quat, True),
        Waypoint(start, quat, True, straight=True),
        Waypoint(start, quat, False),
        Waypoint(start + 1.2 * up, quat, False, straight=True),
        Waypoint(drop + up, turned, False),
        Waypoint(drop, turned, False, straight=True),
        Waypoint(drop, turned, True),
        Waypoint(drop + up, turned, True, straight=True),
    ]
