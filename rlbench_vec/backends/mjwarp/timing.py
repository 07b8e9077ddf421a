"""When a world's action ends, and each world on its own clock: the kernels after a control step.

A world whose action is DONE is frozen: simulation.py saves every world's physics state before a
control step, and `keep_frozen` puts the DONE worlds' state back after it, so a world's trajectory
depends on its own actions only, however long the others' actions run.

rlbench timing (`end_control_step`): the arm part runs until its budget is spent or, for ik, until
the arm reaches its goal or stops; then the gripper part until the fingers stop. fixed timing
(`end_fixed_step`): every action is one control step; `moving` keeps what is still under way.
`finish_action` reports each world's action once, when it is done.
"""

from __future__ import annotations

import warp as wp

from ..mujoco.robot import AT_REST_SPEED, FINGERS_STILL, MAX_GRIPPER_STEPS, REACHED_TOLERANCE, STILL_TOLERANCE
from .control import (
    ARM_MOVING,
    GRIPPER_MOVING,
    GRIPPER_SAME,
    PHASE_ARM,
    PHASE_DONE,
    PHASE_GRIPPER,
    Arm,
    Controller,
    arm_joints,
)
from .kinematics import vec7

_ARM_MOVING, _GRIPPER_MOVING = wp.constant(ARM_MOVING), wp.constant(GRIPPER_MOVING)
REACHED, STILL = wp.constant(float(REACHED_TOLERANCE)), wp.constant(float(STILL_TOLERANCE))
AT_REST = wp.constant(float(AT_REST_SPEED))
GRIPPER_STEPS, FINGER_STILL = wp.constant(MAX_GRIPPER_STEPS), wp.constant(float(FINGERS_STILL))


@wp.kernel
def keep_frozen(c: Controller, time: wp.array(dtype=float), qpos: wp.array2d(dtype=float),
                qvel: wp.array2d(dtype=float), act: wp.array2d(dtype=float), warmstart: wp.array2d(dtype=float),
                overflow: wp.array(dtype=int), saved_time: wp.array(dtype=float), saved_qpos: wp.array2d(dtype=float),
                saved_qvel: wp.array2d(dtype=float), saved_act: wp.array2d(dtype=float),
                saved_warmstart: wp.array2d(dtype=float), saved_overflow: wp.array(dtype=int)):
    """Put a DONE world's physics state back as it was before the control step the others took:
    everything the next step of that world starts from (MuJoCo's mjSTATE_FULLPHYSICS and warm start;
    controls, mocap poses and applied forces are not changed by a step), and its overflow flags."""
    world = wp.tid()
    if c.phase[world] != PHASE_DONE:
        return
    time[world] = saved_time[world]
    overflow[world] = saved_overflow[world]
    for i in range(qpos.shape[1]):
        qpos[world, i] = saved_qpos[world, i]
    for i in range(qvel.shape[1]):
        qvel[world, i] = saved_qvel[world, i]
        warmstart[world, i] = saved_warmstart[world, i]
    for i in range(act.shape[1]):
        act[world, i] = saved_act[world, i]


@wp.func
def arm_arrived(arm: Arm, c: Controller, world: int, q: vec7, qvel: wp.array2d(dtype=float)) -> bool:
    """The path is run out and the arm reached its goal at rest or stopped (robot.py's _run_path with wait)."""
    if c.path_s[world] < c.path_length[world]:
        return False
    goal = c.goal[world]
    previous = c.previous[world]
    reached = wp.bool(True)
    still = wp.bool(True)
    for j in range(7):
        if wp.abs(q[j] - goal[j]) >= REACHED:
            reached = False
        if wp.abs(q[j] - previous[j]) >= STILL:
            still = False
        if wp.abs(qvel[world, arm.dof_adr[j]]) >= AT_REST:
            reached = False
    return reached or still


@wp.func
def fingers_settled(arm: Arm, c: Controller, world: int, qvel: wp.array2d(dtype=float), steps: int) -> bool:
    """The gripper change is over: setpoint at its goal and the fingers still, or out of steps."""
    still = wp.bool(True)
    for i in range(2):
        if wp.abs(qvel[world, arm.finger_dof_adr[i]]) >= FINGER_STILL:
            still = False
    return (c.gripper_setpoint[world] == c.gripper_goal[world] and still) or steps >= GRIPPER_STEPS


@wp.func
def settle_fault(c: Controller, world: int, q: vec7, status: wp.array(dtype=int)) -> bool:
    """A faulted world (faults.py runs before the phase changes) is DONE and counted in status[1]."""
    if c.fault[world] == 0:
        return False
    wp.atomic_add(status, 1, 1)
    if c.phase[world] != PHASE_DONE:
        c.phase[world] = PHASE_DONE
        c.hold[world] = q
    return True


@wp.func
def count_phase(c: Controller, world: int, status: wp.array(dtype=int)):
    if c.phase[world] != PHASE_DONE:
        wp.atomic_add(status, 0, 1)
    elif c.pending[world] != 0:
        wp.atomic_add(status, 2, 1)


@wp.kernel
def count_phases(c: Controller, status: wp.array(dtype=int)):
    """status[0]: worlds in an action; status[2]: worlds whose action is done and not yet reported."""
    count_phase(c, wp.tid(), status)



@wp.kernel
def end_control_step(arm: Arm, c: Controller, wait: int, qpos: wp.array2d(dtype=float),
                     qvel: wp.array2d(dtype=float), status: wp.array(dtype=int)):
    """Phase changes after a control step (rlbench timing); counts into status [moving, faulted, done
    and unreported] (see count_phases)."""
    world = wp.tid()
    phase = c.phase[world]
    q = arm_joints(qpos, world, arm.qpos_adr)
    if settle_fault(c, world, q, status) or phase == PHASE_DONE:
        count_phase(c, world, status)
        return
    c.control_steps[world] = c.control_steps[world] + 1
    steps = c.steps[world] + 1
    c.steps[world] = steps
    if phase == PHASE_ARM:
        finished = steps >= c.budget[world] or (wait != 0 and arm_arrived(arm, c, world, q, qvel))
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
    elif fingers_settled(arm, c, world, qvel, steps):
        phase = PHASE_DONE
    c.phase[world] = phase
    count_phase(c, world, status)


@wp.kernel
def end_fixed_step(arm: Arm, c: Controller, paths: int, qpos: wp.array2d(dtype=float),
                   qvel: wp.array2d(dtype=float), status: wp.array(dtype=int)):
    """After the one control step of a fixed-timing action: the world is DONE; `moving` says whether
    the arm's move (paths: joint_position and ik, which run towards a goal) and the gripper's change
    are still under way."""
    world = wp.tid()
    q = arm_joints(qpos, world, arm.qpos_adr)
    if settle_fault(c, world, q, status) or c.phase[world] == PHASE_DONE:
        count_phase(c, world, status)
        return
    c.control_steps[world] = 1
    moving = c.moving[world] & _GRIPPER_MOVING
    if paths != 0 and not arm_arrived(arm, c, world, q, qvel):
        moving = moving | _ARM_MOVING
    if moving & _GRIPPER_MOVING:
        steps = c.gripper_steps[world] + 1
        c.gripper_steps[world] = steps
        if fingers_settled(arm, c, world, qvel, steps):
            moving = moving & ~_GRIPPER_MOVING
    c.moving[world] = moving
    c.previous[world] = q
    c.hold[world] = q
    c.phase[world] = PHASE_DONE
    count_phase(c, world, status)


@wp.kernel
def finish_action(c: Controller, success: wp.array(dtype=int), reward: wp.array(dtype=float),
                  terminated: wp.array(dtype=bool), truncated: wp.array(dtype=bool), fault: wp.array(dtype=int),
                  error: wp.array(dtype=int), control_steps: wp.array(dtype=int), moving: wp.array(dtype=int),
                  finished: wp.array(dtype=bool), restore: wp.array(dtype=bool)):
    """Step results of the worlds whose action is done (`finished`; reported once): reward 1 and
    termination on success; an invalid action ends the episode with reward 0; a fault truncates it
    and marks the world for restoring."""
    world = wp.tid()
    bits = c.fault[world]
    done = c.pending[world] != 0 and c.phase[world] == PHASE_DONE
    code = c.error[world]
    ran = done and bits == 0
    won = ran and code == 0 and success[world] != 0
    reward[world] = wp.float32(0.0)
    if won:
        reward[world] = 1.0
    terminated[world] = won or (ran and code != 0)
    truncated[world] = done and bits != 0
    fault[world] = bits
    error[world] = code
    control_steps[world] = c.control_steps[world]
    moving[world] = c.moving[world]
    finished[world] = done
    restore[world] = bits != 0
    if done:
        c.pending[world] = 0


@wp.kernel
def clear_motion(mask: wp.array(dtype=bool), c: Controller):
    """A reset or restored world starts with nothing under way."""
    world = wp.tid()
    if mask[world]:
        c.pending[world] = 0
        c.moving[world] = 0
        c.gripper_steps[world] = 0
