"""Rotation helpers in plain numpy. MuJoCo stores quaternions as (w, x, y, z); RLBench's poses use
(x, y, z, w): the names say which."""

from __future__ import annotations

import numpy as np


def wxyz_to_xyzw(q: np.ndarray) -> np.ndarray:
    return np.asarray(q)[..., [1, 2, 3, 0]]


def xyzw_to_wxyz(q: np.ndarray) -> np.ndarray:
    return np.asarray(q)[..., [3, 0, 1, 2]]


def quat_multiply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product of (w, x, y, z) quaternions: rotate by b, then by a."""
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return np.array([
        aw * bw - ax * bx - ay * by - az * bz,
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
    ])


def quat_conjugate(q: np.ndarray) -> np.ndarray:
    return np.array([q[0], -q[1], -q[2], -q[3]])


def quat_to_rotvec(q: np.ndarray) -> np.ndarray:
    """Axis * angle of a (w, x, y, z) quaternion, taking the short way round."""
    q = q if q[0] >= 0 else -q
    sin_half = np.linalg.norm(q[1:])
    if sin_half < 1e-12:
        return 2.0 * q[1:]
    return q[1:] / sin_half * 2.0 * np.arctan2(sin_half, q[0])


def rotation_error(target_wxyz: np.ndarray, current_wxyz: np.ndarray) -> np.ndarray:
    """World-frame rotation vector taking the current orientation to the target."""
    return quat_to_rotvec(quat_multiply(target_wxyz, quat_conjugate(current_wxyz)))


def slerp(a: np.ndarray, b: np.ndarray, t: float) -> np.ndarray:
    dot = float(np.dot(a, b))
    if dot < 0.0:
        b, dot = -b, -dot
    if dot > 0.9995:
        q = a + t * (b - a)
        return q / np.linalg.norm(q)
    theta = np.arccos(dot)
    return (np.sin((1 - t) * theta) * a + np.sin(t * theta) * b) / np.sin(theta)


def mat_to_quat(m: np.ndarray) -> np.ndarray:
    """3x3 rotation matrix -> (w, x, y, z), w >= 0."""
    trace = np.trace(m)
    if trace > 0:
        s = 2.0 * np.sqrt(trace + 1.0)
        q = np.array([0.25 * s, (m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s])
    else:
        i = int(np.argmax(np.diag(m)))
        j, k = (i + 1) % 3, (i + 2) % 3
        s = 2.0 * np.sqrt(1.0 + m[i, i] - m[j, j] - m[k, k])
        q = np.empty(4)
        q[0] = (m[k, j] - m[j, k]) / s
        q[1 + i] = 0.25 * s
        q[1 + j] = (m[j, i] + m[i, j]) / s
        q[1 + k] = (m[k, i] + m[i, k]) / s
    return q if q[0] >= 0 else -q


def frame_quat(x_axis, y_axis) -> np.ndarray:
    """Quaternion (w, x, y, z) of the frame with these x and y axes (z completes it)."""
    x = np.asarray(x_axis, float) / np.linalg.norm(x_axis)
    y = np.asarray(y_axis, float) - np.dot(y_axis, x) * x
    y /= np.linalg.norm(y)
    return mat_to_quat(np.column_stack([x, y, np.cross(x, y)]))


def yaw_rotation(yaw: float) -> np.ndarray:
    c, s = np.cos(yaw), np.sin(yaw)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
