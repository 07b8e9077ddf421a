"""The double's world: a Panda whose state the action modes set directly, and rendered-looking arrays
with upstream's dtypes and shapes. Image values encode (camera, step) so tests can tell frames apart.

As upstream: cameras whose rgb/depth/point cloud are all off lose their sensor at launch (and their
calibration in misc), a live demo records misc["joint_position_action"] (the commanded joint targets
and gripper state) from its second observation on, and that entry stays in misc after the demo."""

import numpy as np
from pyrep.objects import VisionSensor

from rlbench.backend.observation import CAMERAS, Observation
from rlbench.backend.task import SUCCESS_STEPS
from rlbench.backend.utils import rgb_handles_to_mask
from rlbench.demo import Demo

START_JOINTS = np.array([0.0, 0.17, 0.0, -0.87, 0.0, 1.05, 0.79])
START_POSE = np.array([0.28, 0.0, 1.47, 0.0, 1.0, 0.0, 0.0])  # x, y, z, qx, qy, qz, qw
DT = 0.05
GRASP_RADIUS = 0.01  # a closing gripper grasps a graspable object whose position is this close to the tip
TRACKING_GAIN = 0.8  # the arm covers this share of the way to its joint target in one step (its controller lags)
SENSOR_NAMES = {'left_shoulder': 'cam_over_shoulder_left', 'right_shoulder': 'cam_over_shoulder_right',
                'overhead': 'cam_overhead', 'wrist': 'cam_wrist', 'front': 'cam_front'}


def pose_matrix(pose) -> np.ndarray:
    """4x4 matrix of a pose x, y, z, qx, qy, qz, qw."""
    x, y, z, w = pose[3:]
    matrix = np.eye(4)
    matrix[:3, :3] = [[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                      [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                      [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]]
    matrix[:3, 3] = pose[:3]
    return matrix


class Scene(object):

    def __init__(self, pyrep, obs_config, robot_setup='panda'):
        self.pyrep = pyrep
        self.robot_setup = robot_setup
        self.task = None
        self._obs_config = obs_config
        self._variation_index = 0
        self._attempts = 0
        self._has_init_episode = False
        self._joint_position_action = None
        self._ignore_collisions_for_current_waypoint = False  # the double's demos follow no waypoints
        self._cameras = {c: VisionSensor(SENSOR_NAMES[c]) for c in CAMERAS}
        self._masks = {c: VisionSensor(SENSOR_NAMES[c] + '_mask') for c in CAMERAS}
        self._set_camera_properties()
        self.removed_cameras = [c for c in CAMERAS
                                if not (self._cameras[c].still_exists() or self._masks[c].still_exists())]
        self.reset()

    def _set_camera_properties(self):
        for camera in CAMERAS:
            conf = getattr(self._obs_config, f"{camera}_camera")
            if not (conf.rgb or conf.depth or conf.point_cloud):
                self._cameras[camera].remove()
            else:
                self._cameras[camera].set_explicit_handling(1)
                self._cameras[camera].set_resolution(conf.image_size)
                self._cameras[camera].set_render_mode(conf.render_mode)
            if not conf.mask:
                self._masks[camera].remove()
            else:
                self._masks[camera].set_explicit_handling(1)
                self._masks[camera].set_resolution(conf.image_size)

    def reset(self):
        self.joint_positions = START_JOINTS.copy()
        self.joint_velocities = np.zeros(7)
        self.gripper_pose = START_POSE.copy()
        self.gripper_joints = np.array([0.04, 0.04])
        self.episode_steps = 0
        self.grasped = []

    def init_episode(self, index: int, randomly_place: bool = True, max_attempts: int = 5,
                     place_demo: bool = False):
        """The task's init_episode; when placing a stored demo, run as many times as the demo needed
        (each draws from numpy's global generator, which reset_to_demo restored)."""
        self._variation_index = index
        self._attempts = 0
        descriptions = None
        while self._attempts < max_attempts:
            descriptions = self.task.init_episode(index)
            if not place_demo:
                break
            self._attempts += 1
        self._has_init_episode = True
        return descriptions

    def step(self):
        self.pyrep.step()
        for obj in self.grasped:  # what the hand holds moves with it
            obj.set_position(self.gripper_pose[:3])
        self.task.step()
        self.episode_steps += 1

    def gripper_is_open(self) -> bool:
        return self.gripper_joints[0] / 0.04 > 0.9  # upstream: every finger's open amount above 0.9

    def grasp(self, obj) -> bool:
        if np.linalg.norm(obj.get_position() - self.gripper_pose[:3]) < GRASP_RADIUS and obj not in self.grasped:
            self.grasped.append(obj)
        return obj in self.grasped

    def release(self) -> None:
        self.grasped = []

    def track_joint_targets(self, targets):
        previous = self.joint_positions
        self.joint_positions = previous + TRACKING_GAIN * (np.asarray(targets, dtype=np.float64) - previous)
        self.joint_velocities = (self.joint_positions - previous) / DT

    def get_demo(self, record: bool = True, callable_each_step=None, randomly_place: bool = True) -> Demo:
        """The double's motion planner: joint targets straight to a goal in SUCCESS_STEPS steps (the
        arm lags them), the hand straight to the target turning about z, the gripper closing last."""
        if not self._has_init_episode:
            self.init_episode(self._variation_index, randomly_place=randomly_place)
        self._has_init_episode = False
        self._joint_position_action = None
        self._ignore_collisions_for_current_waypoint = False  # the double's demos follow no waypoints
        demo = [self.get_observation()]
        start_pose, start_joints = self.gripper_pose.copy(), self.joint_positions.copy()
        goal_joints = start_joints + np.linspace(-0.3, 0.3, 7)
        for i in range(1, SUCCESS_STEPS + 1):
            f = i / SUCCESS_STEPS
            targets = start_joints + f * (goal_joints - start_joints)
            gripper_open = 0.0 if i == SUCCESS_STEPS else 1.0
            self.track_joint_targets(targets)
            half = 0.1 * f  # half the turn angle about z
            x, y, z, w = 0.0, 0.0, np.sin(half), np.cos(half)
            qx, qy, qz, qw = start_pose[3:]
            rotated = [w * qx + x * qw + y * qz - z * qy, w * qy - x * qz + y * qw + z * qx,
                       w * qz + x * qy - y * qx + z * qw, w * qw - x * qx - y * qy - z * qz]
            self.gripper_pose = np.concatenate([start_pose[:3] + f * (self.task.target - start_pose[:3]), rotated])
            self.gripper_joints = np.full(2, 0.04 * gripper_open)
            self.step()
            self._joint_position_action = np.append(targets, gripper_open)
            demo.append(self.get_observation())
        return Demo(demo, num_reset_attempts=self._attempts + 1)

    def _camera(self, index, camera, conf):
        rgb = depth = pcd = None
        sensor = self._cameras[camera]
        w, h = conf.image_size
        stamp = (10 * self.episode_steps + index) % 256
        if conf.rgb or conf.depth:  # upstream computes the point cloud only inside this branch
            sensor.handle_explicitly()
            if conf.rgb:
                rgb = np.clip((np.full((h, w, 3), stamp / 255.0, np.float32) * 255.).astype(np.uint8), 0, 255)
            if conf.depth or conf.point_cloud:
                depth = np.full((h, w), (100 + stamp) / 400, np.float32)
                near, far = sensor.get_near_clipping_plane(), sensor.get_far_clipping_plane()
                if conf.depth_in_meters:
                    depth = near + depth * (far - near)
            if conf.point_cloud:
                pcd = sensor.pointcloud_from_depth(depth if conf.depth_in_meters else near + depth * (far - near))
                if not conf.depth:
                    depth = None
        mask = None
        if conf.mask:
            self._masks[camera].handle_explicitly()
            handles = np.full((h, w, 3), stamp / 255.0, np.float32)
            mask = rgb_handles_to_mask(handles) if conf.masks_as_one_channel else handles
        return {f"{camera}_rgb": rgb, f"{camera}_depth": depth, f"{camera}_point_cloud": pcd, f"{camera}_mask": mask}

    def _get_misc(self) -> dict:
        misc = {}
        for camera in CAMERAS:
            sensor = self._cameras[camera]
            if sensor.still_exists():
                misc.update({f"{camera}_camera_extrinsics": sensor.get_matrix(),
                             f"{camera}_camera_intrinsics": sensor.get_intrinsic_matrix(),
                             f"{camera}_camera_near": sensor.get_near_clipping_plane(),
                             f"{camera}_camera_far": sensor.get_far_clipping_plane()})
        misc["variation_index"] = self._variation_index
        if self._joint_position_action is not None:
            misc["joint_position_action"] = self._joint_position_action
        misc["joint_poses"] = [np.array([0.0, 0.0, 0.3 + 0.1 * k, 0.0, 0.0, 0.0, 1.0]) for k in range(7)]
        return misc

    def get_observation(self) -> Observation:
        self.pyrep.check_thread()
        c = self._obs_config
        self._cameras['wrist'].set_matrix(pose_matrix(self.gripper_pose))  # the wrist camera rides on the hand
        images = {}
        for index, camera in enumerate(CAMERAS):
            images.update(self._camera(index, camera, getattr(c, f"{camera}_camera")))
        gripper_open = 1.0 if self.gripper_is_open() else 0.0
        obs = Observation(
            joint_velocities=self.joint_velocities.copy() if c.joint_velocities else None,
            joint_positions=self.joint_positions.copy() if c.joint_positions else None,
            joint_forces=np.full(7, 0.1 * self.episode_steps) if c.joint_forces else None,
            gripper_open=gripper_open if c.gripper_open else None,
            gripper_pose=self.gripper_pose.copy() if c.gripper_pose else None,
            gripper_matrix=pose_matrix(self.gripper_pose) if c.gripper_matrix else None,
            gripper_joint_positions=self.gripper_joints.copy() if c.gripper_joint_positions else None,
            gripper_touch_forces=None,
            task_low_dim_state=self.task.get_low_dim_state() if c.task_low_dim_state else None,
            ignore_collisions=np.array(1.0 if self._ignore_collisions_for_current_waypoint else 0.0),
            misc=self._get_misc(),
            **images,
        )
        return self.task.decorate_observation(obs)
