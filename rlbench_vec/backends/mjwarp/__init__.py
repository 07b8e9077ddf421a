"""Batched MuJoCo Warp backend core: every world of one task in one simulator on one device.

`BatchedSimulation` (simulation.py) steps N copies of the embedded MuJoCo backend's scene and task
(backends/mujoco: the same Scene, task build, episode randomisation and constants) with MuJoCo Warp,
ray-traces their cameras in one launch and hands observations out as torch tensors on the device.
See docs/mjwarp.md.

Importing this package imports neither warp, mujoco_warp nor mujoco: the main process may call
`check_config` and `available`; the simulator modules are imported by whoever owns the worlds.
"""

from __future__ import annotations

import importlib.util
import os
from functools import cache

from ...config import EnvConfig
from ...errors import BackendUnavailableError, ConfigError
from ..mujoco.backend import task_class

REQUIREMENTS = ("mujoco_warp", "warp", "torch")
ARM_MODES = ("joint_velocity", "joint_position", "ik")
INSTALL_HINT = "pip install -e .[gpu] (mujoco-warp, warp-lang) and a torch build of your choice"
BENCH_HINT = ("--backend mjwarp is available here (mujoco-warp and an NVIDIA GPU): the same tasks as the worlds of one "
              "GPU simulator; docs/mjwarp.md measured 17,683 env-steps/s at 1024 envs on one H100 (pick_and_lift, "
              "five cameras, --action_timing fixed; 3,644 with RLBench's timing).")


def available() -> bool:
    """Whether mujoco_warp, warp and torch are installed (found without importing them)."""
    return all(importlib.util.find_spec(name) is not None for name in REQUIREMENTS)


def usable_here() -> bool:
    """mujoco-warp installed and an NVIDIA GPU on this machine (what the bench suggests it for)."""
    return os.path.exists("/dev/nvidia0") and available()


def require() -> None:
    missing = [name for name in REQUIREMENTS if importlib.util.find_spec(name) is None]
    if missing:
        raise BackendUnavailableError(f"the mjwarp backend needs {', '.join(missing)}: {INSTALL_HINT}.")


def check_config(config: EnvConfig) -> None:
    """ConfigError for what the batched core does not run (checked without importing a simulator)."""
    task_class(config)
    if config.arm_mode == "planning" or config.ignore_collisions_flag:
        raise ConfigError("the mjwarp backend has no motion planner (arm_mode='planning', ignore_collisions_flag): "
                          "keyframe agents run on backend='mujoco' (RRTConnect in joint space) or 'rlbench'; or use "
                          "arm_mode='ik' here (a joint-space move, no collision checking).")


@cache
def _default_device() -> str:
    import torch

    return "cuda:0" if torch.cuda.is_available() else "cpu"


def device_of(config: EnvConfig) -> str:
    """The device the worlds run on: backend_options["device"] ("cpu", "cuda", "cuda:N"), else the
    first GPU when torch sees one, else warp's CPU device."""
    device = config.backend_options.get("device")
    if device is None:
        return _default_device()
    if not isinstance(device, str) or not (device in ("cpu", "cuda") or device.removeprefix("cuda:").isdigit()):
        raise ConfigError(f"mjwarp backend_options['device'] must be 'cpu', 'cuda' or 'cuda:N', got {device!r}.")
    return "cuda:0" if device == "cuda" else device
