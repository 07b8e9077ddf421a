"""The double's world: a Panda whose state the action modes set directly, and rendered-looking arrays
with upstream's dtypes and shapes. Image values encode (camera, step) so tests can tell frames apart."""

import numpy as np

from rlbench.backend.observation import CAMERAS, Observation

START_JOINTS = np.array([0.0, 0.17, 0.0, -0.87, 0.0, 1.05, 0.79])
START_POSE = np.array([0.28, 0.0, 1.47, 0.0, 1.0, 0.0, 0.0])  # x, y, z, qx, qy, qz, qw
NEAR, FAR = 0.01, 4.5


class Scene(object):

    def __init__(self, pyrep, obs_config, robot_setup='panda'):
        self.pyrep = pyrep
        self.robot_setup = robot_setup
        self.task = None
        self._obs_config = obs_config
        self._variation_index = 0
        # Cameras with nothing to capture are removed at launch, as upstream does
        self.removed_cameras = [
            c for c in CAMERAS
            if not any(getattr(getattr(obs_config, f"{c}_camera"), k) for k in ("rgb", "depth", "point_cloud", "mask"))
        ]
        self.reset()

    def reset(self):
        self.joint_positions = START_JOINTS.copy()
        self.joint_velocities = np.zeros(7)
        self.gripper_pose = START_POSE.copy()
        self.gripper_joints = np.array([0.04, 0.04])
        self.episode_steps = 0

    def step(self):
        self.pyrep.step()
        self.episode_steps += 1

    def _camera(self, index, camera, config):
        rgb = depth = pcd = mask = None
        w, h = config.image_size
        stamp = (10 * self.episode_steps + index) % 256
        if config.rgb or config.depth:  # upstream computes the point cloud only inside this branch
            if config.rgb:
                rgb = np.clip((np.full((h, w, 3), stamp / 255.0, np.float32) * 255.).astype(np.uint8), 0, 255)
            if config.depth or config.point_cloud:
                depth = np.full((h, w), 0.5, np.float32)
                if config.depth_in_meters:
                    depth = NEAR + depth * (FAR - NEAR)
            if config.point_cloud:
                pcd = np.full((h, w, 3), float(stamp), np.float64)
                if not config.depth:
                    depth = None
        if config.mask:
            handles = np.full((h, w, 3), stamp / 255.0, np.float32)
            if config.masks_as_one_channel:
                handles *= 255
                mask = handles[:, :, 0] + handles[:, :, 1] * 256 + handles[:, :, 2] * 256 * 256
            else:
                mask = handles
        return {f"{camera}_rgb": rgb, f"{camera}_depth": depth, f"{camera}_point_cloud": pcd, f"{camera}_mask": mask}

    def get_observation(self) -> Observation:
        self.pyrep.check_thread()
        c = self._obs_config
        images = {}
        for index, camera in enumerate(CAMERAS):
            images.update(self._camera(index, camera, getattr(c, f"{camera}_camera")))
        gripper_open = 1.0 if self.gripper_joints[0] / 0.04 > 0.9 else 0.0
        matrix = np.eye(4)
        matrix[:3, 3] = self.gripper_pose[:3]
        obs = Observation(
            joint_velocities=self.joint_velocities.copy() if c.joint_velocities else None,
            joint_positions=self.joint_positions.copy() if c.joint_positions else None,
            joint_forces=np.full(7, 0.1 * self.episode_steps) if c.joint_forces else None,
            gripper_open=gripper_open if c.gripper_open else None,
            gripper_pose=self.gripper_pose.copy() if c.gripper_pose else None,
            gripper_matrix=matrix if c.gripper_matrix else None,
            gripper_joint_positions=self.gripper_joints.copy() if c.gripper_joint_positions else None,
            gripper_touch_forces=None,
            task_low_dim_state=self.task.get_low_dim_state() if c.task_low_dim_state else None,
            misc={"variation_index": self._variation_index},
            **images,
        )
        return self.task.decorate_observation(obs)
