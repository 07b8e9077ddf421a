"""The double's scene objects: a pose (position, quaternion x, y, z, w) and an extension string, with PyRep's
accessors. Euler angles follow CoppeliaSim's order (rotation = Rx(a) Ry(b) Rz(g))."""

import numpy as np


def _axis_quaternion(axis: int, angle: float) -> np.ndarray:
    q = np.zeros(4)
    q[axis], q[3] = np.sin(angle / 2), np.cos(angle / 2)
    return q


def quaternion_product(a, b) -> np.ndarray:
    """a * b, quaternions stored x, y, z, w."""
    ax, ay, az, aw = a
    bx, by, bz, bw = b
    return np.array([aw * bx + ax * bw + ay * bz - az * by, aw * by - ax * bz + ay * bw + az * bx,
                     aw * bz + ax * by - ay * bx + az * bw, aw * bw - ax * bx - ay * by - az * bz])


def euler_to_quaternion(euler) -> np.ndarray:
    a, b, g = euler
    return quaternion_product(quaternion_product(_axis_quaternion(0, a), _axis_quaternion(1, b)),
                              _axis_quaternion(2, g))


class Object(object):

    def __init__(self, position=(0.0, 0.0, 0.0), quaternion=(0.0, 0.0, 0.0, 1.0), extension: str = ''):
        self._position = np.array(position, dtype=np.float64)
        self._quaternion = np.array(quaternion, dtype=np.float64)
        self._extension = extension
        self._removed = False

    def get_position(self, relative_to=None) -> np.ndarray:
        return self._position.copy()

    def set_position(self, position, relative_to=None, reset_dynamics=True) -> None:
        self._position = np.array(position, dtype=np.float64)

    def get_quaternion(self, relative_to=None) -> np.ndarray:
        return self._quaternion.copy()

    def set_quaternion(self, quaternion, relative_to=None, reset_dynamics=True) -> None:
        quaternion = np.asarray(quaternion, dtype=np.float64)
        self._quaternion = quaternion / np.linalg.norm(quaternion)

    def set_orientation(self, orientation, relative_to=None, reset_dynamics=True) -> None:
        self._quaternion = euler_to_quaternion(orientation)

    def get_pose(self, relative_to=None) -> np.ndarray:
        return np.r_[self.get_position(), self.get_quaternion()]

    def get_extension_string(self) -> str:
        return self._extension

    def still_exists(self) -> bool:
        return not self._removed

    def remove(self) -> None:
        self._removed = True
