"""Inverse kinematics of the Panda's tool centre point by damped least squares.

Solves on a private MjData, so the simulation is never disturbed. A null-space term pulls the
elbow towards the home posture, which keeps solutions repeatable and away from joint limits.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from ...spec import PANDA_Q_MAX, PANDA_Q_MIN
from .geometry import rotation_error
from .scene import HOME_QPOS

ARM_DOFS = 7


@dataclass
class IKResult:
    qpos: np.ndarray
    position_error: float  # metres
    rotation_error: float  # radians
    converged: bool


class PandaKinematics:
    # Iterate until this close; accept a solution (IKResult.converged) within the looser bounds.
    GOAL_POSITION, GOAL_ROTATION = 5e-4, 2e-3
    ACCEPT_POSITION, ACCEPT_ROTATION = 5e-3, 2e-2
    NULL_SPACE_GAIN = 0.03
    MAX_POSITION_ERROR, MAX_ROTATION_ERROR = 0.1, 0.3
    # Defaults of solve(): iterations, damping of the least squares, largest joint move per iteration (rad).
    ITERATIONS, DAMPING, MAX_STEP = 150, 0.02, 0.3

    def __init__(self, model: mujoco.MjModel):
        self.model = model
        self.data = mujoco.MjData(model)
        self.site = model.site("tcp").id
        self._jacp = np.zeros((3, model.nv))
        self._jacr = np.zeros((3, model.nv))
        self._quat = np.zeros(4)

    def forward(self, qpos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """TCP position and (w, x, y, z) orientation at arm configuration `qpos`."""
        self.data.qpos[:ARM_DOFS] = qpos
        mujoco.mj_kinematics(self.model, self.data)
        mujoco.mju_mat2Quat(self._quat, self.data.site_xmat[self.site])
        return self.data.site_xpos[self.site].copy(), self._quat.copy()

    def _jacobian(self) -> np.ndarray:
        mujoco.mj_comPos(self.model, self.data)
        mujoco.mj_jacSite(self.model, self.data, self._jacp, self._jacr, self.site)
        return np.vstack([self._jacp[:, :ARM_DOFS], self._jacr[:, :ARM_DOFS]])

    def solve(self, start: np.ndarray, position: np.ndarray, quat_wxyz: np.ndarray,
              iterations: int = ITERATIONS, damping: float = DAMPING, max_step: float = MAX_STEP) -> IKResult:
        """Arm configuration putting the TCP at (position, quat_wxyz), starting from `start`."""
        q = np.clip(np.array(start, dtype=float), PANDA_Q_MIN, PANDA_Q_MAX)
        for _ in range(iterations):
            current_pos, current_quat = self.forward(q)
            error = np.concatenate([position - current_pos, rotation_error(quat_wxyz, current_quat)])
            if np.linalg.norm(error[:3]) < self.GOAL_POSITION and np.linalg.norm(error[3:]) < self.GOAL_ROTATION:
                break
            # Clamp the error so each linearised step stays small (large rotations otherwise go astray).
            error[:3] *= min(1.0, self.MAX_POSITION_ERROR / max(float(np.linalg.norm(error[:3])), 1e-12))
            error[3:] *= min(1.0, self.MAX_ROTATION_ERROR / max(float(np.linalg.norm(error[3:])), 1e-12))
            jac = self._jacobian()
            pinv = jac.T @ np.linalg.inv(jac @ jac.T + damping**2 * np.eye(6))
            # Null-space motion towards the home posture (projected so it leaves the TCP where it is).
            step = pinv @ error + (np.eye(ARM_DOFS) - pinv @ jac) @ (self.NULL_SPACE_GAIN * (HOME_QPOS - q))
            scale = max(1.0, np.abs(step).max() / max_step)
            q = np.clip(q + step / scale, PANDA_Q_MIN, PANDA_Q_MAX)
        pos, quat = self.forward(q)
        pos_err = float(np.linalg.norm(position - pos))
        rot_err = float(np.linalg.norm(rotation_error(quat_wxyz, quat)))
        return IKResult(q, pos_err, rot_err, pos_err < self.ACCEPT_POSITION and rot_err < self.ACCEPT_ROTATION)

    def solve_near(self, start: np.ndarray, position: np.ndarray, quat_wxyz: np.ndarray) -> IKResult:
        """Like solve, retrying from the home posture when the current one leads to a local minimum."""
        result = self.solve(start, position, quat_wxyz)
        if not result.converged:
            retry = self.solve(HOME_QPOS, position, quat_wxyz)
            if retry.converged or retry.position_error < result.position_error:
                result = retry
        return result
