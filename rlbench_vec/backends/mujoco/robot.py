"""The simulated Panda: its state as RLBench reports it, and the motions behind each action mode.

Control: joint position servos (stiff PD actuators on gravity-compensated links) track a setpoint
that this class moves at most at Franka's joint velocity limits, every physics substep. So joint
targets, velocities and poses all become smooth, speed-limited motions with real contacts.
One control step is CONTROL_DT of simulated time, like RLBench's 0.05 s simulation step.
"""

from __future__ import annotations

import mujoco
import numpy as np

from .geometry import mat_to_quat
from .ik import ARM_DOFS, PandaKinematics
from .scene import FINGER_MAX, HOME_QPOS, PANDA_DQ_MAX, PANDA_Q_MAX, PANDA_Q_MIN

CONTROL_DT = 0.05
GRIPPER_SPEED = 0.2  # m/s of finger travel, RLBench's gripper actuation velocity
REACHED_TOLERANCE = 0.01  # rad, as RLBench's "joints reached their targets" check
STILL_TOLERANCE = 0.001  # rad per control step: the arm stopped (e.g. blocked by a contact)
MAX_MOTION_STEPS = 100  # control steps (5 s) one ik/planning action may take
MAX_GRIPPER_STEPS = 20  # control steps (1 s) one gripper actuation may take


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
        self.gripper_actuator = model.actuator("panda_gripper").id
        self.tcp = model.site("tcp").id
        self.max_arm_step = PANDA_DQ_MAX * self.dt
        self.setpoint = HOME_QPOS.copy()
        self.gripper_setpoint = self.gripper_goal = FINGER_MAX

    def reset(self) -> None:
        """Home posture, gripper open, at rest (the caller runs mj_forward)."""
        self.data.qpos[self.arm_qpos_adr] = HOME_QPOS
        self.data.qpos[self.finger_qpos_adr] = FINGER_MAX
        self.data.qvel[self.arm_dof_adr] = 0.0
        self.data.qvel[self.finger_dof_adr] = 0.0
        self.setpoint = HOME_QPOS.copy()
        self.gripper_setpoint = self.gripper_goal = FINGER_MAX
        self._apply_setpoints()

    # --- state -------------------------------------------------------------------------------------

    @property
    def qpos(self) -> np.ndarray:
        return self.data.qpos[self.arm_qpos_adr]

    @property
    def qvel(self) -> np.ndarray:
        return self.data.qvel[self.arm_dof_adr]

    @property
    def joint_forces(self) -> np.ndarray:
        return self.data.actuator_force[self.arm_actuators]

    @property
    def finger_qpos(self) -> np.ndarray:
        return self.data.qpos[self.finger_qpos_adr]

    @property
    def gripper_open(self) -> float:
        """1.0 when the fingers are more than 90% open, as RLBench."""
        return float(self.finger_qpos.mean() / FINGER_MAX > 0.9)

    def tcp_pose(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Position, quaternion (w, x, y, z) and rotation matrix of the TCP."""
        rotation = self.data.site_xmat[self.tcp].reshape(3, 3)
        return self.data.site_xpos[self.tcp].copy(), mat_to_quat(rotation), rotation.copy()

    # --- motion ------------------------------------------------------------------------------------

    def _apply_setpoints(self) -> None:
        self.data.ctrl[self.arm_actuators] = self.setpoint
        self.data.ctrl[self.gripper_actuator] = self.gripper_setpoint

    def _substep(self) -> None:
        step, remaining = GRIPPER_SPEED * self.dt, self.gripper_goal - self.gripper_setpoint
        self.gripper_setpoint = self.gripper_goal if abs(remaining) <= step else self.gripper_setpoint + np.sign(remaining) * step
        self._apply_setpoints()
        mujoco.mj_step(self.model, self.data)

    def run_velocities(self, velocities: np.ndarray) -> None:
        """One control step at these joint velocities (clipped to the joint velocity limits)."""
        velocities = np.clip(velocities, -PANDA_DQ_MAX, PANDA_DQ_MAX)
        for _ in range(self.substeps):
            self.setpoint = np.clip(self.setpoint + velocities * self.dt, PANDA_Q_MIN, PANDA_Q_MAX)
            self._substep()

    def _move_setpoint(self, goal: np.ndarray) -> bool:
        """Advance the setpoint along the straight joint-space line to `goal`, every joint within its
        velocity limit; True once it is there."""
        delta = goal - self.setpoint
        scale = float(np.min(self.max_arm_step / np.maximum(np.abs(delta), 1e-12)))
        if scale >= 1.0:
            self.setpoint = goal.copy()
            return True
        self.setpoint = self.setpoint + scale * delta
        return False

    def step_towards(self, goal: np.ndarray) -> None:
        """One control step moving towards joint positions `goal` (RLBench's JointPosition: the arm
        gets there only if it can within the step)."""
        goal = np.clip(goal, PANDA_Q_MIN, PANDA_Q_MAX)
        for _ in range(self.substeps):
            self._move_setpoint(goal)
            self._substep()

    def follow(self, path: list[np.ndarray]) -> int:
        """Move through joint-space waypoints, then until the arm reaches the last one or stops moving
        (RLBench's ik/planning loop), within MAX_MOTION_STEPS. Returns the control steps taken."""
        waypoints = list(path)
        previous = self.qpos.copy()
        for control_step in range(1, MAX_MOTION_STEPS + 1):
            for _ in range(self.substeps):
                if self._move_setpoint(waypoints[0]) and len(waypoints) > 1:
                    waypoints.pop(0)
                self._substep()
            current = self.qpos
            if len(waypoints) == 1 and np.array_equal(self.setpoint, waypoints[0]):
                reached = np.all(np.abs(current - waypoints[0]) < REACHED_TOLERANCE)
                still = np.all(np.abs(current - previous) < STILL_TOLERANCE)
                if reached or still:
                    return control_step
            previous = current.copy()
        return MAX_MOTION_STEPS

    def actuate_gripper(self, opening: float) -> None:
        """Drive both fingers to `opening` (0..FINGER_MAX each) and wait until they stop, as RLBench's
        gripper actuation; nothing happens when that is already the goal."""
        opening = float(np.clip(opening, 0.0, FINGER_MAX))
        if abs(opening - self.gripper_goal) < 1e-6:
            return
        self.gripper_goal = opening
        for _ in range(MAX_GRIPPER_STEPS):
            for _ in range(self.substeps):
                self._substep()
            if self.gripper_setpoint == self.gripper_goal and np.all(np.abs(self.data.qvel[self.finger_dof_adr]) < 1e-3):
                return
