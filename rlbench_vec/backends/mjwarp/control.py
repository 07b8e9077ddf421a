"""RLBench's MoveArmThenGripper for every world at once, as Warp kernels.

Each world runs the motions of backends/mujoco/robot.py (same servos, limits, path profile and
stopping rules; the numbers are imported from there) through a small state machine: ARM (the arm
part of the action), then GRIPPER (only when the gripper target changed), then DONE. One control
step of all worlds is CONTROL_DT of simulated time; the simulation repeats control steps until
every world is DONE. A world that is DONE holds its joints where they were and waits for the
others: "move until reached" holds per world, and the waiting worlds keep being simulated.

IK for pose actions is damped least squares on the Panda's kinematic chain (read from the compiled
model), one thread per world, with the iteration count, damping, null-space pull and acceptance
bounds of backends/mujoco/ik.py.
"""

from __future__ import annotations

import warp as wp

from ..mujoco.actions import UNIT_QUATERNION_TOLERANCE
from ..mujoco.ik import PandaKinematics
from ..mujoco.robot import (
    FINGERS_STILL,
    GRIPPER_SAME_GOAL,
    GRIPPER_SPEED,
    MAX_GRIPPER_STEPS,
    MAX_MOTION_STEPS,
    PATH_ACCELERATION,
    REACHED_TOLERANCE,
    STILL_TOLERANCE,
)
from ..mujoco.scene import (
    FINGER_MAX,
    HOME_QPOS,
    PANDA_DDQ_MAX,
    PANDA_DQ_MAX,
    PANDA_Q_MAX,
    PANDA_Q_MIN,
    WORKSPACE_HIGH,
    WORKSPACE_LOW,
)

vec7 = wp.types.vector(length=7, dtype=wp.float32)
vec6 = wp.types.vector(length=6, dtype=wp.float32)
mat66 = wp.types.matrix(shape=(6, 6), dtype=wp.float32)
mat67 = wp.types.matrix(shape=(6, 7), dtype=wp.float32)

ARM, GRIPPER, DONE = 0, 1, 2
PHASE_ARM, PHASE_GRIPPER, PHASE_DONE = wp.constant(ARM), wp.constant(GRIPPER), wp.constant(DONE)

# Why an action was refused (the world does not move and its episode ends, as RLBench's InvalidActionError).
ERROR_MESSAGES = {
    1: "action contains NaN or infinity",
    2: "action contained a non-unit quaternion",
    3: "target position is outside the workspace",
    4: "IK found no joint configuration for the target pose",
}
NON_FINITE, NON_UNIT_QUATERNION, OUTSIDE_WORKSPACE, IK_FAILED = (wp.constant(code) for code in ERROR_MESSAGES)

Q_MIN, Q_MAX = wp.constant(vec7(*PANDA_Q_MIN)), wp.constant(vec7(*PANDA_Q_MAX))
DQ_MAX, DDQ_MAX = wp.constant(vec7(*PANDA_DQ_MAX)), wp.constant(vec7(*PANDA_DDQ_MAX))
HOME = wp.constant(vec7(*HOME_QPOS))
SPACE_LOW, SPACE_HIGH = wp.constant(wp.vec3(*WORKSPACE_LOW)), wp.constant(wp.vec3(*WORKSPACE_HIGH))
FINGER_OPEN = wp.constant(float(FINGER_MAX))
PATH_ACCEL = wp.constant(float(PATH_ACCELERATION))
REACHED, STILL = wp.constant(float(REACHED_TOLERANCE)), wp.constant(float(STILL_TOLERANCE))
MOTION_STEPS, GRIPPER_STEPS = wp.constant(MAX_MOTION_STEPS), wp.constant(MAX_GRIPPER_STEPS)
GRIPPER_VELOCITY = wp.constant(float(GRIPPER_SPEED))
QUAT_TOLERANCE = wp.constant(float(UNIT_QUATERNION_TOLERANCE))
FINGER_STILL, GRIPPER_SAME = wp.constant(float(FINGERS_STILL)), wp.constant(float(GRIPPER_SAME_GOAL))

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


@wp.struct
class Arm:
    """Where the Panda lives in the model: addresses, actuators, its kinematic chain."""

    qpos_adr: wp.array(dtype=int)  # 7 arm joints
    dof_adr: wp.array(dtype=int)
    finger_qpos_adr: wp.array(dtype=int)  # 2 fingers
    finger_dof_adr: wp.array(dtype=int)
    position_actuators: wp.array(dtype=int)  # 7 position servos
    velocity_actuators: wp.array(dtype=int)  # 7 velocity servos
    gripper_actuator: int
    tcp_site: int
    # Transforms (warp's xyzw quaternions): world->link0, then link1..7 each relative to its parent (the
    # hinge turns about the local z after it), hand relative to link7, tcp site relative to the hand.
    frames: wp.array(dtype=wp.transform)


@wp.struct
class Controller:
    """Per-world motion state (arrays of num_worlds)."""

    phase: wp.array(dtype=int)
    steps: wp.array(dtype=int)  # control steps in the current phase
    budget: wp.array(dtype=int)  # control steps the arm part may take
    control_steps: wp.array(dtype=int)  # control steps this action took
    error: wp.array(dtype=int)  # 0, or a key of ERROR_MESSAGES
    fault: wp.array(dtype=int)  # faults.py bits, sticky until the world is restored
    setpoint: wp.array(dtype=vec7)  # joint_velocity: the integrated position setpoint
    velocity: wp.array(dtype=vec7)  # joint_velocity: the commanded velocity
    target_velocity: wp.array(dtype=vec7)
    path_start: wp.array(dtype=vec7)  # joint_position / ik: straight joint-space path start -> goal
    path_direction: wp.array(dtype=vec7)  # joint velocity at full speed along the path
    path_length: wp.array(dtype=float)  # seconds at full speed
    path_s: wp.array(dtype=float)
    path_speed: wp.array(dtype=float)  # fraction of full speed
    goal: wp.array(dtype=vec7)
    previous: wp.array(dtype=vec7)  # arm joints at the end of the previous control step
    hold: wp.array(dtype=vec7)  # where the arm waits (gripper phase, done)
    gripper_setpoint: wp.array(dtype=float)
    gripper_goal: wp.array(dtype=float)
    gripper_target: wp.array(dtype=float)  # this action's gripper part, applied after the arm part


# --- small helpers ----------------------------------------------------------------------------------


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
def arm_joints(values: wp.array2d(dtype=float), world: int, adr: wp.array(dtype=int)) -> vec7:
    q = vec7()
    for j in range(7):
        q[j] = values[world, adr[j]]
    return q


@wp.func
def action_joints(actions: wp.array2d(dtype=float), world: int) -> vec7:
    """The seven joint values of a world's action (its first seven columns)."""
    a = vec7()
    for j in range(7):
        a[j] = actions[world, j]
    return a


@wp.func
def action_gripper(action: float, discrete: int) -> float:
    """Finger opening requested by the gripper part (discrete: > 0.5 opens)."""
    if discrete != 0:
        if action > 0.5:
            return FINGER_OPEN
        return 0.0
    return wp.clamp(action, 0.0, FINGER_OPEN)


@wp.func
def finite_action(actions: wp.array2d(dtype=float), world: int) -> bool:
    ok = wp.bool(True)
    for i in range(actions.shape[1]):
        if not wp.isfinite(actions[world, i]):
            ok = False
    return ok


@wp.func
def refuse(c: Controller, world: int, q: vec7, error: int):
    """The world does not move this action (invalid or inactive)."""
    c.error[world] = error
    c.phase[world] = PHASE_DONE
    c.hold[world] = q


@wp.func
def start_action(c: Controller, world: int, q: vec7, actions: wp.array2d(dtype=float),
                 active: wp.array(dtype=int)) -> bool:
    """Begin the world's action; False (and the world refused) if it is inactive or not finite."""
    c.steps[world] = 0
    c.control_steps[world] = 0
    c.error[world] = 0
    c.previous[world] = q
    c.phase[world] = PHASE_ARM
    if active[world] == 0:
        refuse(c, world, q, 0)
        return False
    if not finite_action(actions, world):
        refuse(c, world, q, NON_FINITE)
        return False
    return True


@wp.func
def start_path(c: Controller, world: int, q: vec7, qd: vec7, goal: vec7, budget: int):
    """A straight joint-space path to `goal` (clipped to the limits), entered at the arm's current
    speed along it (robot.py's _run_path for one waypoint)."""
    goal = clip7(goal, Q_MIN, Q_MAX)
    delta = goal - q
    length = wp.float32(0.0)
    for j in range(7):
        length = wp.max(length, wp.abs(delta[j]) / DQ_MAX[j])
    direction = vec7()
    speed = wp.float32(0.0)
    if length > 0.0:
        direction = delta / length
        speed = wp.clamp(wp.dot(qd, direction) / wp.max(wp.dot(direction, direction), 1e-12), 0.0, 1.0)
    c.path_start[world] = q
    c.path_direction[world] = direction
    c.path_length[world] = length
    c.path_s[world] = 0.0
    c.path_speed[world] = speed
    c.goal[world] = goal
    c.budget[world] = budget


# --- kinematics and IK --------------------------------------------------------------------------------


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


# --- one action: begin, per physics substep, per control step ----------------------------------------


@wp.kernel
def begin_joint_velocity(arm: Arm, c: Controller, actions: wp.array2d(dtype=float), active: wp.array(dtype=int),
                         qpos: wp.array2d(dtype=float), qvel: wp.array2d(dtype=float), discrete: int,
                         status: wp.array(dtype=int)):
    world = wp.tid()
    q = arm_joints(qpos, world, arm.qpos_adr)
    if not start_action(c, world, q, actions, active):
        return
    c.target_velocity[world] = clip7(action_joints(actions, world), -DQ_MAX, DQ_MAX)
    c.setpoint[world] = q
    c.velocity[world] = arm_joints(qvel, world, arm.dof_adr)
    c.budget[world] = 1
    c.gripper_target[world] = action_gripper(actions[world, 7], discrete)
    wp.atomic_add(status, 0, 1)


@wp.kernel
def begin_joint_position(arm: Arm, c: Controller, actions: wp.array2d(dtype=float), active: wp.array(dtype=int),
                         qpos: wp.array2d(dtype=float), qvel: wp.array2d(dtype=float), discrete: int,
                         absolute: int, status: wp.array(dtype=int)):
    world = wp.tid()
    q = arm_joints(qpos, world, arm.qpos_adr)
    if not start_action(c, world, q, actions, active):
        return
    goal = action_joints(actions, world)
    if absolute == 0:
        goal = goal + q
    start_path(c, world, q, arm_joints(qvel, world, arm.dof_adr), goal, 1)
    c.gripper_target[world] = action_gripper(actions[world, 7], discrete)
    wp.atomic_add(status, 0, 1)


@wp.kernel
def begin_pose(arm: Arm, c: Controller, actions: wp.array2d(dtype=float), active: wp.array(dtype=int),
               qpos: wp.array2d(dtype=float), qvel: wp.array2d(dtype=float), discrete: int, absolute: int,
               site_xpos: wp.array2d(dtype=wp.vec3), site_xmat: wp.array2d(dtype=wp.mat33),
               status: wp.array(dtype=int)):
    """Pose actions: xyz + quaternion xyzw (warp's order); delta mode adds the position and composes
    the rotation before the current one. Checked like actions.py, then solved by IK."""
    world = wp.tid()
    q = arm_joints(qpos, world, arm.qpos_adr)
    if not start_action(c, world, q, actions, active):
        return
    rotation = wp.quat(actions[world, 3], actions[world, 4], actions[world, 5], actions[world, 6])
    norm = wp.length(rotation)
    if wp.abs(norm - 1.0) > QUAT_TOLERANCE:
        refuse(c, world, q, NON_UNIT_QUATERNION)
        return
    rotation = rotation / norm
    position = wp.vec3(actions[world, 0], actions[world, 1], actions[world, 2])
    if absolute == 0:
        position = position + site_xpos[world, arm.tcp_site]
        rotation = rotation * wp.quat_from_matrix(site_xmat[world, arm.tcp_site])
    for i in range(3):
        if position[i] < SPACE_LOW[i] or position[i] > SPACE_HIGH[i]:
            refuse(c, world, q, OUTSIDE_WORKSPACE)
            return
    goal, converged = ik_solve_near(arm.frames, q, position, rotation)
    if not converged:
        refuse(c, world, q, IK_FAILED)
        return
    start_path(c, world, q, arm_joints(qvel, world, arm.dof_adr), goal, MOTION_STEPS)
    c.gripper_target[world] = action_gripper(actions[world, 7], discrete)
    wp.atomic_add(status, 0, 1)


@wp.kernel
def control_substep(arm: Arm, c: Controller, velocity_mode: int, dt: float, ctrl: wp.array2d(dtype=float)):
    """Servo setpoints for one physics step: the arm's (per phase and mode) and the gripper's, which
    moves towards its goal at the gripper speed (robot.py's _substep)."""
    world = wp.tid()
    position = c.hold[world]
    velocity = vec7()
    if c.phase[world] == PHASE_ARM:
        if velocity_mode != 0:
            velocity = c.velocity[world]
            target = c.target_velocity[world]
            position = c.setpoint[world]
            for j in range(7):
                change = DDQ_MAX[j] * dt
                velocity[j] = velocity[j] + wp.clamp(target[j] - velocity[j], -change, change)
                position[j] = wp.clamp(position[j] + velocity[j] * dt, Q_MIN[j], Q_MAX[j])
            c.velocity[world] = velocity
            c.setpoint[world] = position
        else:
            length = c.path_length[world]
            s = c.path_s[world]
            braking = wp.sqrt(2.0 * PATH_ACCEL * wp.max(length - s, 0.0))
            speed = wp.min(wp.min(c.path_speed[world] + PATH_ACCEL * dt, 1.0), braking)
            s = wp.min(length, s + speed * dt)
            c.path_s[world] = s
            c.path_speed[world] = speed
            if length > 0.0:
                direction = c.path_direction[world]
                position = c.path_start[world] + s * direction
                if s < length:
                    velocity = direction * speed
            else:
                position = c.goal[world]
    for j in range(7):
        ctrl[world, arm.position_actuators[j]] = position[j]
        ctrl[world, arm.velocity_actuators[j]] = velocity[j]
    setpoint = c.gripper_setpoint[world]
    remaining = c.gripper_goal[world] - setpoint
    step = GRIPPER_VELOCITY * dt
    if wp.abs(remaining) <= step:
        setpoint = c.gripper_goal[world]
    else:
        setpoint = setpoint + wp.sign(remaining) * step
    c.gripper_setpoint[world] = setpoint
    ctrl[world, arm.gripper_actuator] = setpoint


@wp.kernel
def end_control_step(arm: Arm, c: Controller, wait: int, qpos: wp.array2d(dtype=float),
                     qvel: wp.array2d(dtype=float), status: wp.array(dtype=int)):
    """Phase changes after a control step; counts the worlds still moving into status[0] and the
    worlds with a fault this action into status[1] (faults.py runs before this). A faulted world is DONE."""
    world = wp.tid()
    phase = c.phase[world]
    q = arm_joints(qpos, world, arm.qpos_adr)
    if c.fault[world] != 0:
        wp.atomic_add(status, 1, 1)
        if phase != PHASE_DONE:
            c.phase[world] = PHASE_DONE
            c.hold[world] = q
        return
    if phase == PHASE_DONE:
        return
    c.control_steps[world] = c.control_steps[world] + 1
    steps = c.steps[world] + 1
    c.steps[world] = steps
    if phase == PHASE_ARM:
        finished = steps >= c.budget[world]
        if wait != 0 and c.path_s[world] >= c.path_length[world]:
            goal = c.goal[world]
            previous = c.previous[world]
            reached = wp.bool(True)
            still = wp.bool(True)
            for j in range(7):
                if wp.abs(q[j] - goal[j]) >= REACHED:
                    reached = False
                if wp.abs(q[j] - previous[j]) >= STILL:
                    still = False
            finished = finished or reached or still
        c.previous[world] = q
        if finished:
            c.hold[world] = q
            target = c.gripper_target[world]
            if wp.abs(target - c.gripper_goal[world]) < GRIPPER_SAME:
                phase = PHASE_DONE
            else:
                c.gripper_goal[world] = target
                c.steps[world] = 0
                phase = PHASE_GRIPPER
    else:
        still = wp.bool(True)
        for i in range(2):
            if wp.abs(qvel[world, arm.finger_dof_adr[i]]) >= FINGER_STILL:
                still = False
        if (c.gripper_setpoint[world] == c.gripper_goal[world] and still) or steps >= GRIPPER_STEPS:
            phase = PHASE_DONE
    c.phase[world] = phase
    if phase != PHASE_DONE:
        wp.atomic_add(status, 0, 1)


@wp.kernel
def finish_action(c: Controller, active: wp.array(dtype=int), success: wp.array(dtype=int),
                  reward: wp.array(dtype=float), terminated: wp.array(dtype=bool), truncated: wp.array(dtype=bool),
                  fault: wp.array(dtype=int), error: wp.array(dtype=int), control_steps: wp.array(dtype=int),
                  restore: wp.array(dtype=bool)):
    """Step results: reward 1 and termination on success; an invalid action ends the episode with
    reward 0; a fault truncates it and marks the world for restoring."""
    world = wp.tid()
    bits = c.fault[world]
    code = c.error[world]
    ran = active[world] != 0 and bits == 0
    won = ran and code == 0 and success[world] != 0
    reward[world] = wp.float32(0.0)
    if won:
        reward[world] = 1.0
    terminated[world] = won or (ran and code != 0)
    truncated[world] = bits != 0
    fault[world] = bits
    error[world] = code
    control_steps[world] = c.control_steps[world]
    restore[world] = bits != 0


def make_controller(num_worlds: int, device) -> Controller:
    """A Controller with every per-world array zeroed."""
    controller = Controller()
    for name, var in Controller.vars.items():
        setattr(controller, name, wp.zeros(num_worlds, dtype=var.type.dtype, device=device))
    return controller
