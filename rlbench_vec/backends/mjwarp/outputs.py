"""What BatchedSimulation's step and step_chunk return: per-world tensors on the simulation's device, which
the next call overwrites (simulation.py); the codes they hold are faults.FAULT_NAMES and
control.ERROR_MESSAGES.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class StepOutput:
    """One action of every world; (num_worlds,) tensors on the simulation's device."""

    reward: torch.Tensor  # float32: 1.0 on success (shaped_rewards: the task's reward())
    terminated: torch.Tensor  # bool: success, or an invalid action (error != 0)
    truncated: torch.Tensor  # bool: a fault ended the episode; the world was restored to its episode start
    fault: torch.Tensor  # int32 bits, see faults.FAULT_NAMES
    error: torch.Tensor  # int32: 0, or a key of control.ERROR_MESSAGES (the action was refused)
    control_steps: torch.Tensor  # int32: control steps (CONTROL_DT each) the action took in this world
    moving: torch.Tensor  # int32: fixed timing: control.ARM_MOVING | GRIPPER_MOVING still under way after it
    finished: torch.Tensor  # bool: the world's action is done and reported here (the others' rows mean nothing)


@dataclass(frozen=True)
class ChunkOutput:
    """K actions of every world: (num_worlds, K) tensors. A world stops at its episode's end:
    `executed` is False for the actions after it (the world holds still until the chunk ends)."""

    reward: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    fault: torch.Tensor
    error: torch.Tensor
    moving: torch.Tensor
    executed: torch.Tensor
