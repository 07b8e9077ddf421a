CAMERAS = ("left_shoulder", "right_shoulder", "overhead", "wrist", "front")


class Observation(object):
    """Storage for both visual and low-dimensional observations (upstream's attributes, by keyword)."""

    def __init__(self, joint_velocities, joint_positions, joint_forces, gripper_open, gripper_pose,
                 gripper_matrix, gripper_joint_positions, gripper_touch_forces, task_low_dim_state, ignore_collisions,
                 misc, **images):
        for camera in CAMERAS:
            for kind in ("rgb", "depth", "mask", "point_cloud"):
                setattr(self, f"{camera}_{kind}", images.pop(f"{camera}_{kind}"))
        assert not images, images
        self.joint_velocities = joint_velocities
        self.joint_positions = joint_positions
        self.joint_forces = joint_forces
        self.gripper_open = gripper_open
        self.gripper_pose = gripper_pose
        self.gripper_matrix = gripper_matrix
        self.gripper_joint_positions = gripper_joint_positions
        self.gripper_touch_forces = gripper_touch_forces
        self.task_low_dim_state = task_low_dim_state
        self.ignore_collisions = ignore_collisions
        self.misc = misc
