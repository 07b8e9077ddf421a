"""RLBench's MoveArmThenGripper for every world at once, as Warp kernels: an action's start and the
servo setpoints of each physics substep.

Each world runs the motions of backends/mujoco/robot.py (same servos, limits, path profile and
stopping rules; the numbers are imported from there) through a small state machine: ARM (the arm
part of the action), then GRIPPER (only when the gripper target changed), then DONE. One control
step of all worlds is CONTROL_DT of simulated time; a DONE world is left alone (and frozen: see
timing.py, which also ends the phases after each control step).

Two timings (EnvConfig.action_timing): "rlbench" runs an action until it is done in its world;
"fixed" runs one control step per action, the gripper starting at once, alongside the arm, its goal
and the arm's target kept by the controllers across steps until reached or replaced.
IK for pose actions: kinematics.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import warp as wp

from ...spec import PANDA_DQ_MAX, WORKSPACE_HIGH, WORKSPACE_LOW
from ..mujoco.actions import UNIT_QUATERNION_TOLERANCE
from ..mujoco.robot import GRIPPER_SAME_GOAL, GRIPPER_SPEED, MAX_MOTION_STEPS, PATH_ACCELERATION
from ..mujoco.scene import FINGER_MAX, PANDA_DDQ_MAX
from .kinematics import Q_MAX, Q_MIN, clip7, ik_solve_near, vec7

ARM, GRIPPER, DONE = 0, 1, 2
PHASE_ARM, PHASE_GRIPPER, PHASE_DONE = wp.constant(ARM), wp.constant(GRIPPER), wp.constant(DONE)
ARM_MOVING, GRIPPER_MOVING = 1, 2  # Controller.moving bits (fixed timing)
_GRIPPER_MOVING = wp.constant(GRIPPER_MOVING)

# Why an action was refused (the world does not move and its episode ends, as RLBench's InvalidActionError).
ERROR_MESSAGES = {
    1: "action contains NaN or infinity",
    2: "action contained a non-unit quaternion",
    3: "target position is outside the workspace",
    4: "IK found no joint configuration for the target pose",
}
NON_FINITE, NON_UNIT_QUATERNION, OUTSIDE_WORKSPACE, IK_FAILED = (wp.constant(code) for code in ERROR_MESSAGES)

DQ_MAX, DDQ_MAX = wp.constant(vec7(*PANDA_DQ_MAX)), wp.constant(vec7(*PANDA_DDQ_MAX))
SPACE_LOW, SPACE_HIGH = wp.constant(wp.vec3(*WORKSPACE_LOW)), wp.constant(wp.vec3(*WORKSPACE_HIGH))
FINGER_OPEN = wp.constant(float(FINGER_MAX))
PATH_ACCEL = wp.constant(float(PATH_ACCELERATION))
MOTION_STEPS = wp.constant(MAX_MOTION_STEPS)
GRIPPER_VELOCITY = wp.constant(float(GRIPPER_SPEED))
QUAT_TOLERANCE = wp.constant(float(UNIT_QUATERNION_TOLERANCE))
GRIPPER_SAME = wp.constant(float(GRIPPER_SAME_GOAL))


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
    pending: wp.array(dtype=int)  # 1 from an action's start until its result is reported
    steps: wp.array(dtype=int)  # control steps in the current phase
    budget: wp.array(dtype=int)  # control steps the arm part may take
    control_steps: wp.array(dtype=int)  # control steps this action took
    error: wp.array(dtype=int)  # 0, or a key of ERROR_MESSAGES
    fault: wp.array(dtype=int)  # faults.py bits, sticky until the world is restored
    moving: wp.array(dtype=int)  # fixed timing: ARM_MOVING | GRIPPER_MOVING still under way after the step
    gripper_steps: wp.array(dtype=int)  # fixed timing: control steps since the gripper's goal changed
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
    hold: wp.array(dtype=vec7)  # where the arm waits (gripper phase)
    gripper_setpoint: wp.array(dtype=float)
    gripper_goal: wp.array(dtype=float)
    gripper_target: wp.array(dtype=float)  # this action's gripper part, applied after the arm part


# --- small helpers ----------------------------------------------------------------------------------


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
    """The world does not move this action (an invalid action)."""
    c.error[world] = error
    c.phase[world] = PHASE_DONE
    c.hold[world] = q


@wp.func
def start_action(c: Controller, world: int, q: vec7, actions: wp.array2d(dtype=float),
                 active: wp.array(dtype=int)) -> bool:
    """Begin the world's action; False if it has none (it stays as it is: frozen, or still in its
    previous action) or if it is not finite (refused)."""
    if active[world] == 0:
        return False
    c.pending[world] = 1
    c.steps[world] = 0
    c.control_steps[world] = 0
    c.error[world] = 0
    c.previous[world] = q
    c.phase[world] = PHASE_ARM
    if not finite_action(actions, world):
        refuse(c, world, q, NON_FINITE)
        return False
    return True


@wp.func
def start_gripper(c: Controller, world: int, action: float, discrete: int, fixed: int):
    """The gripper part: run after the arm part (rlbench timing), or at once, alongside it (fixed)."""
    target = action_gripper(action, discrete)
    c.gripper_target[world] = target
    if fixed != 0 and wp.abs(target - c.gripper_goal[world]) >= GRIPPER_SAME:
        c.gripper_goal[world] = target
        c.gripper_steps[world] = 0
        c.moving[world] = c.moving[world] | _GRIPPER_MOVING


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



# --- one action: begin, per physics substep, per control step ----------------------------------------


@wp.kernel
def begin_joint_velocity(arm: Arm, c: Controller, actions: wp.array2d(dtype=float), active: wp.array(dtype=int),
                         qpos: wp.array2d(dtype=float), qvel: wp.array2d(dtype=float), discrete: int, fixed: int):
    world = wp.tid()
    q = arm_joints(qpos, world, arm.qpos_adr)
    if not start_action(c, world, q, actions, active):
        return
    c.target_velocity[world] = clip7(action_joints(actions, world), -DQ_MAX, DQ_MAX)
    c.setpoint[world] = q
    c.velocity[world] = arm_joints(qvel, world, arm.dof_adr)
    c.budget[world] = 1
    start_gripper(c, world, actions[world, 7], discrete, fixed)


@wp.kernel
def begin_joint_position(arm: Arm, c: Controller, actions: wp.array2d(dtype=float), active: wp.array(dtype=int),
                         qpos: wp.array2d(dtype=float), qvel: wp.array2d(dtype=float), discrete: int, fixed: int,
                         absolute: int):
    world = wp.tid()
    q = arm_joints(qpos, world, arm.qpos_adr)
    if not start_action(c, world, q, actions, active):
        return
    goal = action_joints(actions, world)
    if absolute == 0:
        goal = goal + q
    start_path(c, world, q, arm_joints(qvel, world, arm.dof_adr), goal, 1)
    start_gripper(c, world, actions[world, 7], discrete, fixed)


@wp.kernel
def begin_pose(arm: Arm, c: Controller, actions: wp.array2d(dtype=float), active: wp.array(dtype=int),
               qpos: wp.array2d(dtype=float), qvel: wp.array2d(dtype=float), discrete: int, fixed: int, absolute: int,
               site_xpos: wp.array2d(dtype=wp.vec3), site_xmat: wp.array2d(dtype=wp.mat33)):
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
    budget = MOTION_STEPS
    if fixed != 0:
        budget = 1
    start_path(c, world, q, arm_joints(qvel, world, arm.dof_adr), goal, budget)
    start_gripper(c, world, actions[world, 7], discrete, fixed)


@wp.kernel
def control_substep(arm: Arm, c: Controller, velocity_mode: int, dt: float, ctrl: wp.array2d(dtype=float)):
    """Servo setpoints for one physics step: the arm's (per phase and mode) and the gripper's, which
    moves towards its goal at the gripper speed (robot.py's _substep). A DONE world is left alone."""
    world = wp.tid()
    if c.phase[world] == PHASE_DONE:
        return
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


def make_arm(panda: Any, frames: list[wp.transform], device: Any) -> Arm:
    """The Arm of a host Panda (backends/mujoco/robot.py) and its chain's frames (kinematics.chain_frames)."""
    def ids(values: Any) -> wp.array:
        return wp.array(np.asarray(values, np.int32), dtype=int, device=device)

    arm = Arm()
    arm.qpos_adr, arm.dof_adr = ids(panda.arm_qpos_adr), ids(panda.arm_dof_adr)
    arm.finger_qpos_adr, arm.finger_dof_adr = ids(panda.finger_qpos_adr), ids(panda.finger_dof_adr)
    arm.position_actuators, arm.velocity_actuators = ids(panda.arm_actuators), ids(panda.velocity_actuators)
    arm.gripper_actuator, arm.tcp_site = int(panda.gripper_actuator), int(panda.tcp)
    arm.frames = wp.array(frames, dtype=wp.transform, device=device)
    return arm


def make_controller(num_worlds: int, device) -> Controller:
    """A Controller with every per-world array zeroed."""
    controller = Controller()
    for name, var in Controller.vars.items():
        setattr(controller, name, wp.zeros(num_worlds, dtype=var.type.dtype, device=device))
    return controller
