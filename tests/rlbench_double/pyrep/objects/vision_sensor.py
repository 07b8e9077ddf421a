"""The double's vision sensors: RLBench's scene cameras with a pose, a view angle and clipping planes.
Calibration follows PyRep 4.1's conventions (get_matrix: camera-to-world 4x4; get_intrinsic_matrix:
its formula, negative focal lengths included) so that point clouds and misc agree as upstream."""

import math

import numpy as np

from double_log import record


def _look_at(position, target) -> np.ndarray:
    """Camera-to-world matrix of a sensor at `position` looking along +z at `target`."""
    z = np.subtract(target, position, dtype=np.float64)
    z /= np.linalg.norm(z)
    x = np.cross([0.0, 0.0, 1.0], z)
    x /= np.linalg.norm(x)
    matrix = np.eye(4)
    matrix[:3, :3] = np.stack([x, np.cross(z, x), z], axis=1)
    matrix[:3, 3] = position
    return matrix


TABLE = (0.3, 0.0, 0.75)
# name: (camera-to-world pose, view angle in degrees, near, far). The wrist camera follows the gripper.
SENSORS = {
    'cam_over_shoulder_left': (_look_at((-0.2, 0.6, 1.6), TABLE), 40.0, 0.01, 4.5),
    'cam_over_shoulder_right': (_look_at((-0.2, -0.6, 1.6), TABLE), 40.0, 0.01, 4.5),
    'cam_overhead': (_look_at((0.2, 0.01, 2.2), TABLE), 40.0, 0.01, 4.5),
    'cam_wrist': (np.eye(4), 60.0, 0.01, 3.5),
    'cam_front': (_look_at((1.35, 0.0, 1.6), TABLE), 40.0, 0.01, 4.5),
}


class VisionSensor(object):

    def __init__(self, name: str):
        self._name = name
        matrix, self._view_angle, self._near, self._far = SENSORS[name.replace('_mask', '')]
        self._matrix = matrix.copy()
        self._resolution = [128, 128]
        self._render_mode = None
        self._exists = True

    def get_name(self) -> str:
        return self._name

    def still_exists(self) -> bool:
        return self._exists

    def remove(self) -> None:
        self._exists = False
        record("remove", sensor=self._name)

    def set_explicit_handling(self, value: int = 1) -> None:
        pass

    def handle_explicitly(self) -> None:
        assert self._exists, f"{self._name} was removed"

    def get_resolution(self):
        return list(self._resolution)

    def set_resolution(self, resolution) -> None:
        self._resolution = list(resolution)

    def set_render_mode(self, render_mode) -> None:
        self._render_mode = render_mode

    def get_perspective_angle(self) -> float:
        return self._view_angle

    def get_near_clipping_plane(self) -> float:
        return self._near

    def get_far_clipping_plane(self) -> float:
        return self._far

    def get_matrix(self, relative_to=None) -> np.ndarray:
        return self._matrix.copy()

    def set_matrix(self, matrix, relative_to=None) -> None:
        self._matrix = np.array(matrix, dtype=np.float64)

    def get_intrinsic_matrix(self) -> np.ndarray:
        resolution = np.array(self.get_resolution(), dtype=np.float64)  # [x, y]
        angle = math.radians(self.get_perspective_angle())
        angles = np.array([angle, angle])
        ratio = resolution[0] / resolution[1]
        if ratio > 1:  # the view angle spans the longer side
            angles[1] = 2 * np.arctan(np.tan(angle / 2) / ratio)
        elif ratio < 1:
            angles[0] = 2 * np.arctan(np.tan(angle / 2) * ratio)
        focal = -resolution / (2 * np.tan(angles / 2))
        return np.array([[focal[0], 0.0, resolution[0] / 2], [0.0, focal[1], resolution[1] / 2], [0.0, 0.0, 1.0]])

    def pointcloud_from_depth(self, depth: np.ndarray) -> np.ndarray:
        return VisionSensor.pointcloud_from_depth_and_camera_params(
            depth, self.get_matrix(), self.get_intrinsic_matrix())

    @staticmethod
    def pointcloud_from_depth_and_camera_params(depth: np.ndarray, extrinsics: np.ndarray,
                                                intrinsics: np.ndarray) -> np.ndarray:
        """World-frame points (H, W, 3) of a depth image in metres: pixel (column, row) * depth through
        the inverse intrinsics, then the camera-to-world pose."""
        rows, columns = np.indices(depth.shape, dtype=np.float64)
        pixels = np.stack([columns, rows, np.ones_like(rows)], axis=-1) * depth[..., None]
        camera = pixels @ np.linalg.inv(intrinsics).T
        return camera @ extrinsics[:3, :3].T + extrinsics[:3, 3]
