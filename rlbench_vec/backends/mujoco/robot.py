"""The simulated Panda: its state as RLBench reports it, and the motions behind each action mode.

Control: per joint a position servo and a velocity servo (on gravity-compensated links) track a
setpoint and its velocity. Every physics substep this class moves the setpoint within Franka's joint
velocity and acceleration limits, so joint targets, velocities and poses all become smooth motions
the servos can follow, with real contacts.
One control step is CONTROL_DT of simulated time, like RLBench's 0.05 s simulation step.
"""

from __future__ import annotations

from collections.abc import Callable

import mujoco
import numpy as np

from ...spec import PANDA_DQ_MAX, PANDA_Q_MAX, PANDA_Q_MIN
from .geometry import mat_to_quat
from .ik import ARM_DOFS, PandaKinematics
from .scene import FINGER_MAX, HOME_QPOS, PANDA_DDQ_MAX

CONTROL_DT = 0.05
GRIPPER_SPEED = 0.2  # m/s of finger travel, RLBench's gripper actuation velocity
REACHED_TOLERANCE = 0.01  # rad, as RLBench's "joints reached their targets" check
STILL_TOLERANCE = 0.001  # rad per control step: the arm stopped (e.g. blocked by a contact)
# rad/s: every joint slower than this, the arm is at rest. A move ends at rest, as RLBench's paths do, so a
# demo shows each waypoint as a rest to PerAct's keypoint rule (stopping_delta 0.1 rad/s).
AT_REST_SPEED = 0.05
MAX_MOTION_STEPS = 100  # control steps (5 s) one ik/planning action may take
MAX_GRIPPER_STEPS = 20  # control steps (1 s) one gripper actuation may take
GRIPPER_OPEN_FRACTION = 0.9  # gripper_open: the fingers are more than this open, as RLBench
GRIPPER_SAME_GOAL = 1e-6  # m: a gripper target this close to the current goal changes nothing
FINGERS_STILL = 1e-3  # m/s: the fingers stopped moving


# Acceleration along a joint-space path, in "full speed per second" (the weakest joint decides).
PATH_ACCELERATION = float(np.min(PANDA_DDQ_MAX / PANDA_DQ_MAX))


def line_duration(delta: np.ndarray) -> float:
    """Seconds to move by `delta` in joint space at full speed (the slowest joint at its limit)."""
    return float(np.max(np.abs(delta) / PANDA_DQ_MAX))


class JointPath:
    """A piecewise-linear joint-space path, parameterised by s = seconds at full speed from its start."""

    def __init__(self, points: list[np.ndarray]):
        self.points = points
        self.durations = np.array([line_duration(b - a) for a, b in zip(points, points[1:])])
        self.starts = np.concatenate([[0.0], np.cumsum(self.durations)])
        self.length = float(self.starts[-1])

    def at(self, s: float) -> tuple[np.ndarray, np.ndarray]:
        """Position at s and its derivative (joint velocity at full speed)."""
        if self.length == 0.0:
            return self.points[-1], np.zeros_like(self.points[-1])
        i = min(int(np.searchsorted(self.starts, s, side="right")) - 1, len(self.durations) - 1)
        while self.durations[i] == 0.0:
            i -= 1
        direction = (self.points[i + 1] - self.points[i]) / self.durations[i]
        return self.points[i] + (s - self.starts[i]) * direction, direction


class Panda:
    def __init__(self, model: mujoco.MjModel, data: mujoco.MjData):
        self.model, self.data = model, data
        self.kinematics = PandaKinematics(model)
        self.substeps = round(CONTROL_DT / model.opt.timestep)
        self.dt = model.opt.timestep
        self.arm_qpos_adr = np.array([model.joint(f"panda_joint{i}").qposadr[0] for i in range(1, 8)])
        self.arm_dof_adr = np.array([model.joint(f"panda_joint{i}").dofadr[0] for i in range(1, 8)])
        self.finger_qpos_adr = np.array([model.joint(f"panda_finger_joint{i}").qposadr[0] for i in (1, 2)])
        self.finger_dof_adr = np.array([model.joint(f"panda_finger_joint{i}").dofadr[0] for i in (1, 2)])
        self.arm_actuators = np.array([model.actuator(f"panda_act{i}").id for i in range(1, 8)])
        self.velocity_actuators = np.array([model.actuator(f"panda_vel{i}").id for i in range(1, 8)])
        self.gripper_actuator = model.actuator("panda_gripper").id
        self.tcp = model.site("tcp").id
        self.max_velocity_change = PANDA_DDQ_MAX * self.dt
        self.gripper_setpoint = self.gripper_goal = FINGER_MAX
        self.gripper_moving, self.gripper_steps = False, 0  # fixed timing: a gripper change under way

    def reset(self) -> None:
        """Home posture, gripper open, at rest (the caller runs mj_forward)."""
        self.data.qpos[self.arm_qpos_adr] = HOME_QPOS
        self.data.qpos[self.finger_qpos_adr] = FINGER_MAX
        self.data.qvel[self.arm_dof_adr] = 0.0
        self.data.qvel[self.finger_dof_adr] = 0.0
        self.gripper_setpoint = self.gripper_goal = FINGER_MAX
        self.gripper_moving, self.gripper_steps = False, 0
        self.data.ctrl[self.arm_actuators] = HOME_QPOS
        self.data.ctrl[self.velocity_actuators] = 0.0
        self.data.ctrl[self.gripper_actuator] = FINGER_MAX

    # --- state -------------------------------------------------------------------------------------

    @property
    def qpos(self) -> np.ndarray:
        return self.data.qpos[self.arm_qpos_adr]

    @property
    def qvel(self) -> np.ndarray:
        return self.data.qvel[self.arm_dof_adr]

    @property
    def joint_forces(self) -> np.ndarray:
        return self.data.qfrc_actuator[self.arm_dof_adr]

    @property
    def at_rest(self) -> bool:
        return bool(np.all(np.abs(self.qvel) < AT_REST_SPEED))

    @property
    def finger_qpos(self) -> np.ndarray:
        return self.data.qpos[self.finger_qpos_adr]

    @property
    def gripper_open(self) -> float:
        """1.0 when the fingers are more than 90% open, as RLBench."""
        return float(self.finger_qpos.mean() / FINGER_MAX > GRIPPER_OPEN_FRACTION)

    def tcp_pose(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Position, quaternion (w, x, y, z) and rotation matrix of the TCP."""
        rotation = self.data.site_xmat[self.tcp].reshape(3, 3)
        return self.data.site_xpos[self.tcp].copy(), mat_to_quat(rotation), rotation.copy()

    # --- motion ------------------------------------------------------------------------------------

    def _substep(self, setpoint: np.ndarray, velocity: np.ndarray) -> None:
        """One physics step with the arm servos tracking (setpoint, velocity) and the gripper's setpoint
        moving towards its goal at the gripper speed."""
        self.data.ctrl[self.arm_actuators] = setpoint
        self.data.ctrl[self.velocity_actuators] = velocity
        step, remaining = GRIPPER_SPEED * self.dt, self.gripper_goal - self.gripper_setpoint
        moved = self.gripper_setpoint + np.sign(remaining) * step
        self.gripper_setpoint = self.gripper_goal if abs(remaining) <= step else moved
        self.data.ctrl[self.gripper_actuator] = self.gripper_setpoint
        mujoco.mj_step(self.model, self.data)

    def run_velocities(self, velocities: np.ndarray) -> None:
        """One control step at these joint velocities (clipped to the velocity limits), reached within
        the acceleration limits from the arm's current velocity."""
        velocities = np.clip(velocities, -PANDA_DQ_MAX, PANDA_DQ_MAX)
        setpoint, velocity = self.qpos.copy(), self.qvel.copy()
        for _ in range(self.substeps):
            velocity = velocity + np.clip(velocities - velocity, -self.max_velocity_change, self.max_velocity_change)
            setpoint = np.clip(setpoint + velocity * self.dt, PANDA_Q_MIN, PANDA_Q_MAX)
            self._substep(setpoint, velocity)

    def _run_path(self, waypoints: list[np.ndarray], max_steps: int, wait: bool,
                  stop: Callable[[], bool] | None = None) -> bool:
        """Move the setpoint along the joint-space path from the arm's current position through
        `waypoints`: trapezoidal speed within the velocity and acceleration limits, starting from the
        arm's current velocity along the path and stopping at its end. With `wait`, continue until the
        arm reaches the end at rest or stops moving (RLBench's ik/planning loop); `stop`, checked after every control
        step, ends it early (planning: the task succeeded, as RLBench's). Returns whether it did (the
        path run out, the arm at its end or stopped) by the last control step."""
        start = self.qpos.copy()
        path = JointPath([start] + [np.clip(q, PANDA_Q_MIN, PANDA_Q_MAX) for q in waypoints])
        _, direction = path.at(0.0)
        speed = float(np.clip(self.qvel @ direction / max(direction @ direction, 1e-12), 0.0, 1.0))
        s, previous, arrived = 0.0, start, False
        for _ in range(max_steps):
            for _ in range(self.substeps):
                braking = np.sqrt(2.0 * PATH_ACCELERATION * (path.length - s))
                speed = min(speed + PATH_ACCELERATION * self.dt, 1.0, braking)
                s = min(path.length, s + speed * self.dt)
                setpoint, direction = path.at(s)
                self._substep(setpoint, direction * speed if s < path.length else np.zeros(ARM_DOFS))
            current = self.qpos
            reached = np.all(np.abs(current - path.points[-1]) < REACHED_TOLERANCE) and self.at_rest
            arrived = s >= path.length and bool(reached or np.all(np.abs(current - previous) < STILL_TOLERANCE))
            if (wait and arrived) or (stop is not None and stop()):
                break
            previous = current.copy()
        return arrived

    def step_towards(self, goal: np.ndarray) -> bool:
        """One control step moving towards joint positions `goal` (RLBench's JointPosition: the arm
        gets there only if it can within the step). Returns whether it got there (or stopped)."""
        return self._run_path([goal], max_steps=1, wait=False)

    def follow(self, path: list[np.ndarray], max_steps: int = MAX_MOTION_STEPS,
               stop: Callable[[], bool] | None = None) -> bool:
        """Move through joint-space waypoints, then until the arm reaches the last one or stops moving (or
        `stop()` holds), within `max_steps` (RLBench's ik/planning loop; fixed timing: one). Returns whether it did."""
        return self._run_path(path, max_steps, wait=True, stop=stop)

    def hold(self) -> None:
        """One control step with the arm's servos holding their setpoints and the gripper at its goal
        (an episode's start settles with the arm held so)."""
        hold, still = self.data.ctrl[self.arm_actuators].copy(), np.zeros(ARM_DOFS)
        for _ in range(self.substeps):
            self._substep(hold, still)

    def set_gripper_goal(self, opening: float) -> None:
        """Fixed timing: the fingers head for `opening` from the next substep on, alongside the arm."""
        opening = float(np.clip(opening, 0.0, FINGER_MAX))
        if abs(opening - self.gripper_goal) >= GRIPPER_SAME_GOAL:
            self.gripper_goal, self.gripper_moving, self.gripper_steps = opening, True, 0

    def settle_gripper(self) -> None:
        """Fixed timing, after a control step: the gripper change is over once the fingers stopped at
        their goal (or after MAX_GRIPPER_STEPS, as actuate_gripper)."""
        if self.gripper_moving:
            self.gripper_steps += 1
            self.gripper_moving = not (self._fingers_settled() or self.gripper_steps >= MAX_GRIPPER_STEPS)

    def _fingers_settled(self) -> bool:
        fingers = self.data.qvel[self.finger_dof_adr]
        return self.gripper_setpoint == self.gripper_goal and bool(np.all(np.abs(fingers) < FINGERS_STILL))

    def actuate_gripper(self, opening: float) -> None:
        """Drive both fingers to `opening` (0..FINGER_MAX each) and wait until they stop, as RLBench's
        gripper actuation; nothing happens when that is already the goal."""
        opening = float(np.clip(opening, 0.0, FINGER_MAX))
        if abs(opening - self.gripper_goal) < GRIPPER_SAME_GOAL:
            return
        self.gripper_goal = opening
        hold, still = self.qpos.copy(), np.zeros(ARM_DOFS)
        for _ in range(MAX_GRIPPER_STEPS):
            for _ in range(self.substeps):
                self._substep(hold, still)
            if self._fingers_settled():
                return
