"""The Panda's kinematic chain and damped-least-squares IK for every world, as Warp functions.

One thread per world: forward kinematics of the TCP from the chain's transforms (read from the
compiled model by simulation.py), its Jacobian, and the IK of backends/mujoco/ik.py (iteration
count, damping, null-space pull towards home, acceptance bounds imported from there).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import warp as wp

from ...spec import PANDA_Q_MAX, PANDA_Q_MIN
from ..mujoco.ik import PandaKinematics
from ..mujoco.scene import HOME_QPOS

vec7 = wp.types.vector(length=7, dtype=wp.float32)
vec6 = wp.types.vector(length=6, dtype=wp.float32)
mat66 = wp.types.matrix(shape=(6, 6), dtype=wp.float32)
mat67 = wp.types.matrix(shape=(6, 7), dtype=wp.float32)

Q_MIN, Q_MAX = wp.constant(vec7(*PANDA_Q_MIN)), wp.constant(vec7(*PANDA_Q_MAX))
HOME = wp.constant(vec7(*HOME_QPOS))

K = PandaKinematics
IK_ITERATIONS = wp.constant(K.ITERATIONS)
IK_DAMPING_SQ = wp.constant(float(K.DAMPING**2))
IK_MAX_STEP = wp.constant(float(K.MAX_STEP))
IK_NULL_GAIN = wp.constant(float(K.NULL_SPACE_GAIN))
IK_GOAL_POSITION, IK_GOAL_ROTATION = wp.constant(float(K.GOAL_POSITION)), wp.constant(float(K.GOAL_ROTATION))
IK_ACCEPT_POSITION = wp.constant(float(K.ACCEPT_POSITION))
IK_ACCEPT_ROTATION = wp.constant(float(K.ACCEPT_ROTATION))
IK_MAX_POSITION_ERROR = wp.constant(float(K.MAX_POSITION_ERROR))
IK_MAX_ROTATION_ERROR = wp.constant(float(K.MAX_ROTATION_ERROR))


@wp.func
def clip7(q: vec7, low: vec7, high: vec7) -> vec7:
    out = vec7()
    for j in range(7):
        out[j] = wp.clamp(q[j], low[j], high[j])
    return out


@wp.func
def max_abs7(q: vec7) -> float:
    m = wp.float32(0.0)
    for j in range(7):
        m = wp.max(m, wp.abs(q[j]))
    return m


@wp.func
def joint_turn(angle: float) -> wp.transform:
    return wp.transform(wp.vec3(0.0), wp.quat_from_axis_angle(wp.vec3(0.0, 0.0, 1.0), angle))


@wp.func
def tcp_transform(frames: wp.array(dtype=wp.transform), q: vec7) -> wp.transform:
    t = frames[0]
    for j in range(7):
        t = wp.transform_multiply(wp.transform_multiply(t, frames[1 + j]), joint_turn(q[j]))
    return wp.transform_multiply(wp.transform_multiply(t, frames[8]), frames[9])


@wp.func
def tcp_jacobian(frames: wp.array(dtype=wp.transform), q: vec7, tcp: wp.vec3) -> mat67:
    """Rows: linear then angular velocity of the TCP per unit joint velocity."""
    jac = mat67()
    t = frames[0]
    for j in range(7):
        t = wp.transform_multiply(wp.transform_multiply(t, frames[1 + j]), joint_turn(q[j]))
        axis = wp.quat_rotate(wp.transform_get_rotation(t), wp.vec3(0.0, 0.0, 1.0))
        linear = wp.cross(axis, tcp - wp.transform_get_translation(t))
        for i in range(3):
            jac[i, j] = linear[i]
            jac[3 + i, j] = axis[i]
    return jac


@wp.func
def rotation_error(target: wp.quat, current: wp.quat) -> wp.vec3:
    """World-frame rotation vector from `current` to `target`, the short way round."""
    e = target * wp.quat_inverse(current)
    if e[3] < 0.0:
        e = -e
    v = wp.vec3(e[0], e[1], e[2])
    s = wp.length(v)
    if s < 1e-7:
        return 2.0 * v
    return v * (2.0 * wp.atan2(s, e[3]) / s)


@wp.func
def cholesky6(a: mat66) -> mat66:
    low = mat66()
    for i in range(6):
        for j in range(i + 1):
            s = a[i, j]
            for k in range(j):
                s -= low[i, k] * low[j, k]
            if i == j:
                low[i, i] = wp.sqrt(wp.max(s, 1e-12))
            else:
                low[i, j] = s / low[j, j]
    return low


@wp.func
def cholesky_solve6(low: mat66, b: vec6) -> vec6:
    y = vec6()
    for i in range(6):
        s = b[i]
        for k in range(i):
            s -= low[i, k] * y[k]
        y[i] = s / low[i, i]
    x = vec6()
    for r in range(6):
        i = 5 - r
        s = y[i]
        for k in range(i + 1, 6):
            s -= low[k, i] * x[k]
        x[i] = s / low[i, i]
    return x


@wp.func
def clamp_norm(v: wp.vec3, limit: float) -> wp.vec3:
    return v * wp.min(1.0, limit / wp.max(wp.length(v), 1e-12))


@wp.func
def ik_solve(frames: wp.array(dtype=wp.transform), start: vec7, position: wp.vec3,
             rotation: wp.quat) -> tuple[vec7, float, float]:
    """Damped least squares with a null-space pull towards home (ik.py's PandaKinematics.solve).
    Returns the joints and the remaining position and rotation errors."""
    q = clip7(start, Q_MIN, Q_MAX)
    for _ in range(IK_ITERATIONS):
        t = tcp_transform(frames, q)
        tcp = wp.transform_get_translation(t)
        position_error = position - tcp
        angle_error = rotation_error(rotation, wp.transform_get_rotation(t))
        if wp.length(position_error) < IK_GOAL_POSITION and wp.length(angle_error) < IK_GOAL_ROTATION:
            break
        position_error = clamp_norm(position_error, IK_MAX_POSITION_ERROR)
        angle_error = clamp_norm(angle_error, IK_MAX_ROTATION_ERROR)
        jac = tcp_jacobian(frames, q, tcp)
        a = jac @ wp.transpose(jac)
        for i in range(6):
            a[i, i] = a[i, i] + IK_DAMPING_SQ
        low = cholesky6(a)
        error = vec6(position_error[0], position_error[1], position_error[2],
                     angle_error[0], angle_error[1], angle_error[2])
        pull = IK_NULL_GAIN * (HOME - q)
        # pinv @ error + (I - pinv @ jac) @ pull, with pinv = jac^T (jac jac^T + damping^2)^-1
        step = wp.transpose(jac) @ (cholesky_solve6(low, error) - cholesky_solve6(low, jac @ pull)) + pull
        q = clip7(q + step / wp.max(1.0, max_abs7(step) / IK_MAX_STEP), Q_MIN, Q_MAX)
    t = tcp_transform(frames, q)
    distance = wp.length(position - wp.transform_get_translation(t))
    return q, distance, wp.length(rotation_error(rotation, wp.transform_get_rotation(t)))


@wp.func
def ik_converged(position_error: float, rotation_error: float) -> bool:
    return position_error < IK_ACCEPT_POSITION and rotation_error < IK_ACCEPT_ROTATION


@wp.func
def ik_solve_near(frames: wp.array(dtype=wp.transform), start: vec7, position: wp.vec3,
                  rotation: wp.quat) -> tuple[vec7, bool]:
    """ik_solve from the current joints, retried from home when that lands in a local minimum."""
    q, position_error, angle_error = ik_solve(frames, start, position, rotation)
    if ik_converged(position_error, angle_error):
        return q, True
    q2, position_error2, angle_error2 = ik_solve(frames, HOME, position, rotation)
    if ik_converged(position_error2, angle_error2):
        return q2, True
    return q, False


def chain_frames(model: Any, data: Any) -> list[wp.transform]:
    """World->link0, link1..7 and hand relative to their parents, tcp relative to the hand, as warp
    transforms; checks that each arm joint is a hinge about its body's z axis at the body origin."""
    def frame(position, quat_wxyz) -> wp.transform:
        w, x, y, z = (float(v) for v in quat_wxyz)
        return wp.transform(wp.vec3(*map(float, position)), wp.quat(x, y, z, w))

    link0 = model.body("panda_link0").id
    frames = [frame(data.xpos[link0], data.xquat[link0])]
    parent = link0
    for i in range(1, 8):
        body = model.body(f"panda_link{i}")
        joint = model.joint(f"panda_joint{i}")
        if (body.parentid[0] != parent or joint.bodyid[0] != body.id or np.any(joint.pos != 0)
                or np.any(joint.axis != (0, 0, 1))):
            raise RuntimeError(f"panda_joint{i} is not a hinge about the z axis of its link's origin")
        frames.append(frame(body.pos, body.quat))
        parent = body.id
    hand = model.body("panda_hand")
    site = model.site("tcp")
    if hand.parentid[0] != parent or site.bodyid[0] != hand.id:
        raise RuntimeError("the tcp site must sit on panda_hand, a child of panda_link7")
    return frames + [frame(hand.pos, hand.quat), frame(site.pos, site.quat)]
