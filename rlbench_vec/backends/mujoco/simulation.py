"""The MuJoCo world of one worker: model, data, robot, task, action executor and renderer.

Imported only inside a worker, after MUJOCO_GL is set (see backend.use_renderer).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from functools import partial

import mujoco
import numpy as np

from ...config import EnvConfig
from ..base import StepResult, write_padded
from .actions import ActionExecutor, InvalidAction
from .geometry import wxyz_to_xyzw
from .oracles import oracle_actions, reachable
from .renderer import CameraRenderer
from .robot import Panda
from .scene import CAMERA_FAR, CAMERA_NEAR, Scene, offscreen_size
from .success import SuccessEvaluator
from .tasks import find_task
from .tasks.base import DenseReward, ShapedReward
from .world import World

COPPELIA_CAMERA_AXES = np.diag([-1.0, 1.0, -1.0])  # MuJoCo camera frame -> CoppeliaSim vision sensor frame
SETTLE_STEPS = 10  # control steps an episode's start settles at most (RLBench's STEPS_BEFORE_EPISODE_START)
STILL_SPEED = 2e-3  # m/s and rad/s: every degree of freedom slower than this, the scene is at rest
PLACEMENT_ATTEMPTS = 50  # layouts drawn for an episode before giving up on one the oracle can reach


def check_joint_limits(model: mujoco.MjModel, data: mujoco.MjData, task: str) -> None:
    """ValueError naming a limited hinge or slide joint that an episode starts outside its range (physics
    would snap it back in the first steps)."""
    one_dof = (mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE)
    for joint in range(model.njnt):
        if model.jnt_limited[joint] and model.jnt_type[joint] in one_dof:
            value, (low, high) = data.qpos[model.jnt_qposadr[joint]], model.jnt_range[joint]
            if not low <= value <= high:
                raise ValueError(f"{task}: joint {model.joint(joint).name!r} starts at {value:.4g}, outside its "
                                 f"range [{low:.4g}, {high:.4g}]: start it inside")


class Simulation:
    """renderer: one shared with the other envs of the worker (None: this env makes its own, drawing
    up to `envs` envs per read-back)."""

    def __init__(self, config: EnvConfig, renderer: CameraRenderer | None = None, envs: int = 1):
        self.config = config
        self.task = find_task(config.one_task, config.backend)()
        scene = Scene(offscreen_size(len(config.cameras), config.width, config.height, config.modalities, envs))
        self.task.build(scene)
        self.model = mujoco.MjModel.from_xml_string(scene.to_xml())
        self.data = mujoco.MjData(self.model)
        self.world = World(self.model, self.data)
        self.success = SuccessEvaluator(self.world)
        self.variation = 0
        self.shaped: ShapedReward | None = None  # backend_options["shaped_rewards"]: the variation's reward()
        self.dense: DenseReward | None = None  # backend_options["dense_rewards"]: the variation's dense_reward()
        self.panda = Panda(self.model, self.data)
        self.executor = ActionExecutor(config, self.panda)
        self.executor.succeeded = self.success.met
        self.renderer = renderer
        self._owns_renderer = renderer is None
        if renderer is None and config.cameras and config.modalities:
            self.renderer = self._make_renderer(envs)  # fail at start, not at the first observation
        self._low_dim: dict[str, Callable[[], np.ndarray | float]] = {
            "joint_velocities": lambda: self.panda.qvel,
            "joint_positions": lambda: self.panda.qpos,
            "joint_forces": lambda: self.panda.joint_forces,
            "gripper_open": lambda: self.panda.gripper_open,
            "gripper_pose": self._gripper_pose,
            "gripper_matrix": self._gripper_matrix,
            "gripper_joint_positions": lambda: self.panda.finger_qpos,
            "task_low_dim_state": self.low_dim_state,
        }
        if config.misc:
            for camera in config.cameras:
                self._low_dim.update({
                    f"{camera}_camera_extrinsics": partial(self.camera_extrinsics, camera),
                    f"{camera}_camera_intrinsics": partial(self.camera_intrinsics, camera),
                    f"{camera}_camera_near": lambda: float(CAMERA_NEAR),
                    f"{camera}_camera_far": lambda: float(CAMERA_FAR),
                })

    def give_renderer(self) -> CameraRenderer | None:
        """Its renderer, to be shared with other simulations of the task: whoever takes it closes it."""
        self._owns_renderer = False
        return self.renderer

    def _make_renderer(self, envs: int = 1) -> CameraRenderer:
        c = self.config
        return CameraRenderer(self.model, c.cameras, c.width, c.height, c.modalities, c.depth_in_meters, envs)

    def reset(self, variation: int, rng: np.random.Generator) -> None:
        """A new episode of `variation` drawn from `rng`: a layout whose oracle waypoints the arm can reach
        (others are drawn again, as RLBench's placement retries), settled: stepped with the arm held until
        nothing moves (at most SETTLE_STEPS, as RLBench lets objects come to rest before an episode
        starts); its conditions measured from the settled state, and drawn again where they already hold
        (an episode never starts solved)."""
        self.variation = variation
        self.shaped = self.task.reward(variation) if self.config.backend_options.get("shaped_rewards") else None
        self.dense = self.task.dense_reward(variation) if self.config.backend_options.get("dense_rewards") else None
        for _ in range(PLACEMENT_ATTEMPTS):
            self._place(variation, rng)
            if not reachable(self.task.oracle(self.world, variation), self.panda):
                continue
            self._settle()
            self.restart_success()
            if not self.success.met_at_start():
                return
        raise RuntimeError(f"{self.task.name}: no layout of variation {variation} in {PLACEMENT_ATTEMPTS} draws "
                           "has oracle waypoints the arm can reach and starts unsolved; the task's placement "
                           "ranges are too wide")

    def restart_success(self) -> None:
        """The episode's success condition and indicators, measured from the state now (its start)."""
        self.success.start(self.task.success(self.variation), self.task.indicators(self.variation))

    def _settle(self) -> None:
        """Step with the arm held until nothing moves (at most SETTLE_STEPS), then forward."""
        for _ in range(SETTLE_STEPS):
            if np.all(np.abs(self.data.qvel) < STILL_SPEED) and self.data.time > 0:
                break
            self.panda.hold()
        mujoco.mj_forward(self.model, self.data)

    def _place(self, variation: int, rng: np.random.Generator) -> None:
        """The robot at home and the task's objects drawn for `variation`, not yet stepped."""
        mujoco.mj_resetData(self.model, self.data)
        self.panda.reset()
        self.task.init_episode(self.world, variation, rng)
        check_joint_limits(self.model, self.data, self.task.name)
        mujoco.mj_forward(self.model, self.data)

    def act(self, action: np.ndarray) -> StepResult:
        """Execute one action: reward 1 and termination on success (shaped_rewards: the task's reward(),
        termination still on success, as RLBench's TaskEnvironment.step; dense_rewards: the task's
        dense_reward(), 1 on success); an invalid action ends the episode with reward 0."""
        try:
            self.executor.apply(action)
        except InvalidAction as error:
            return StepResult(0.0, True, {"error": f"{error.kind}: {error}", "invalid_action": True})
        mujoco.mj_forward(self.model, self.data)  # positions, sites and contacts of the new state
        success = self.success.met()
        if self.dense is not None:
            reward = self.success.dense_reward(self.dense, success)
        else:
            reward = float(success) if self.shaped is None else self.world.shaped_reward(self.shaped)
        return StepResult(reward, success, self.motion_info())

    def motion_info(self) -> dict[str, bool]:
        """action_timing="fixed": what is still under way after the step (nothing: an empty info)."""
        info = {}
        if self.executor.arm_moving:
            info["arm_moving"] = True
        if self.panda.gripper_moving:
            info["gripper_moving"] = True
        return info

    def oracle_actions(self) -> Iterator[np.ndarray]:
        """The scripted solution of the current episode, one action at a time (see oracles.py)."""
        return oracle_actions(self.task.oracle(self.world, self.variation), self.panda, self.executor)

    def keyframe_actions(self) -> Iterator[np.ndarray]:
        """The keyframes of the current episode's own dense oracle demo, as pose actions (see keyframes.py)."""
        from .keyframes import keyframe_actions

        return keyframe_actions(self)

    def low_dim_state(self) -> np.ndarray:
        return self.world.state(self.task.low_dim_state(self.variation))

    def _gripper_pose(self) -> np.ndarray:
        position, quat, _ = self.panda.tcp_pose()
        return np.concatenate([position, wxyz_to_xyzw(quat)])

    def _gripper_matrix(self) -> np.ndarray:
        position, _, rotation = self.panda.tcp_pose()
        matrix = np.eye(4)
        matrix[:3, :3], matrix[:3, 3] = rotation, position
        return matrix

    def camera_extrinsics(self, camera: str) -> np.ndarray:
        """Camera-to-world pose in RLBench's (CoppeliaSim's) camera axes: it looks along +z, with x the
        other way round from MuJoCo's camera (which looks along -z)."""
        camera_id = self.model.camera(camera).id
        pose = np.eye(4)
        pose[:3, :3] = self.data.cam_xmat[camera_id].reshape(3, 3) @ COPPELIA_CAMERA_AXES
        pose[:3, 3] = self.data.cam_xpos[camera_id]
        return pose

    def camera_intrinsics(self, camera: str) -> np.ndarray:
        """PyRep's intrinsic matrix: negative focal lengths (pixels), principal point at the centre."""
        width, height = self.config.width, self.config.height
        focal = -(height / 2) / np.tan(np.deg2rad(self.model.camera(camera).fovy[0]) / 2)
        return np.array([[focal, 0.0, width / 2], [0.0, focal, height / 2], [0.0, 0.0, 1.0]])

    def write_observation(self, out: Mapping[str, np.ndarray]) -> None:
        if self.renderer is not None:
            self.renderer.render([(self.model, self.data, out)])
        self.write_low_dim(out)

    def write_low_dim(self, out: Mapping[str, np.ndarray]) -> None:
        for key, array in out.items():
            read = self._low_dim.get(key)
            if read is None:
                continue
            if key == "task_low_dim_state":
                write_padded(array, self.low_dim_state())
            else:
                array[...] = read()

    def render_rgb(self, camera: str) -> np.ndarray:
        if self.renderer is None:
            self.renderer, self._owns_renderer = self._make_renderer(), True
        return self.renderer.render_rgb(self.model, self.data, camera)

    def close(self) -> None:
        if self.renderer is not None and self._owns_renderer:
            self.renderer.close()
        self.renderer = None
