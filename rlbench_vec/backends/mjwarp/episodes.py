"""Episode starts of every world: drawn on the host, kept on the device, restored there.

A new episode is drawn exactly as the mujoco backend draws it: the same `Simulation.reset` (home
posture, then the task's own randomisation) on a host copy of the model, from a per-world generator
seeded like env `i` of the mujoco backend. So a world reset with seed s starts the same episode as
backend="mujoco" reset with seed s. With draw_ahead, host processes draw each world's next episode
while it runs (draw_ahead.py): the same episodes. The start (joint positions, controls, mocap poses, object
colours, variation) is kept per world on the device: a reset or a fault restores it there (the colours
too, which a task's indicators change during an episode).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import warp as wp

from ...config import EnvConfig
from ...errors import ConfigError
from ..mujoco.backend import choose_variation, task_class
from ..mujoco.simulation import Simulation
from .control import PHASE_DONE, Arm, Controller, arm_joints
from .draw_ahead import DrawAhead, spare_cores

Options = Mapping[str, Any] | Sequence[Mapping[str, Any] | None] | None


@wp.kernel
def _restore(mask: wp.array(dtype=bool), start_qpos: wp.array2d(dtype=float), start_ctrl: wp.array2d(dtype=float),
             start_mocap_pos: wp.array2d(dtype=wp.vec3), start_mocap_quat: wp.array2d(dtype=wp.quat),
             start_geom_rgba: wp.array2d(dtype=wp.vec4), arm: Arm, c: Controller, qpos: wp.array2d(dtype=float),
             ctrl: wp.array2d(dtype=float), mocap_pos: wp.array2d(dtype=wp.vec3), mocap_quat: wp.array2d(dtype=wp.quat),
             geom_rgba: wp.array2d(dtype=wp.vec4)):
    """Write the episode start of the masked worlds (after mujoco_warp.reset_data zeroed the rest)."""
    world = wp.tid()
    if not mask[world]:
        return
    for i in range(qpos.shape[1]):
        qpos[world, i] = start_qpos[world, i]
    for i in range(ctrl.shape[1]):
        ctrl[world, i] = start_ctrl[world, i]
    for i in range(mocap_pos.shape[1]):
        mocap_pos[world, i] = start_mocap_pos[world, i]
        mocap_quat[world, i] = start_mocap_quat[world, i]
    for i in range(geom_rgba.shape[1]):
        geom_rgba[world, i] = start_geom_rgba[world, i]
    c.phase[world] = PHASE_DONE
    c.hold[world] = arm_joints(start_qpos, world, arm.qpos_adr)
    c.fault[world] = 0
    c.error[world] = 0
    c.control_steps[world] = 0
    gripper = start_ctrl[world, arm.gripper_actuator]
    c.gripper_setpoint[world] = gripper
    c.gripper_goal[world] = gripper
    c.gripper_target[world] = gripper


class EpisodeStarts:
    """Per-world episode starts: host staging (pinned where the device is a GPU) and device copies."""

    def __init__(self, config: EnvConfig, host: Simulation, num_worlds: int, device: Any, geom_rgba: wp.array):
        self.config, self.host, self.num_worlds, self.device = config, host, num_worlds, device
        self.task = task_class(config)
        self.rngs = [np.random.default_rng(world) for world in range(num_worlds)]  # the mujoco backend's env i
        model = host.model
        shapes = {
            "qpos": ((num_worlds, model.nq), wp.float32), "ctrl": ((num_worlds, model.nu), wp.float32),
            "mocap_pos": ((num_worlds, model.nmocap), wp.vec3), "mocap_quat": ((num_worlds, model.nmocap), wp.quat),
            "variation": (num_worlds, wp.int32),
        }
        pinned = wp.get_device(device).is_cuda
        self.staging = {name: wp.zeros(shape, dtype=dtype, device="cpu", pinned=pinned)
                        for name, (shape, dtype) in shapes.items()}
        self.staging["geom_rgba"] = wp.zeros(geom_rgba.shape, dtype=wp.vec4, device="cpu", pinned=pinned)
        self.on_device = {name: wp.zeros(shape, dtype=dtype, device=device) for name, (shape, dtype) in shapes.items()}
        self.on_device["geom_rgba"] = wp.zeros(geom_rgba.shape, dtype=wp.vec4, device=device)
        self.geom_rgba = geom_rgba  # the model's per-world colours, restored from the start's
        self.host_view = {name: array.numpy() for name, array in self.staging.items()}
        ahead = config.backend_options.get("draw_ahead", 0)  # processes drawing the next episodes (draw_ahead.py)
        self.ahead = DrawAhead(config, spare_cores() if ahead == "auto" else ahead) if ahead else None

    @property
    def variation(self) -> wp.array:
        return self.on_device["variation"]

    def draw(self, worlds: np.ndarray, seeds: Sequence[int | None] | None, options: Options) -> dict[int, dict]:
        """Draw new episode starts for `worlds` into the host staging; returns each world's reset info."""
        if seeds is not None and len(seeds) != self.num_worlds:
            raise ConfigError(f"seeds must list one seed (or None) per world: {self.num_worlds}, got {len(seeds)}.")
        if options is not None and not isinstance(options, Mapping) and len(options) != self.num_worlds:
            raise ConfigError(f"per-world options must list {self.num_worlds} entries, got {len(options)}.")
        host, view, infos = self.host, self.host_view, {}
        for world in worlds.tolist():
            seeded = seeds is not None and seeds[world] is not None
            if seeded:
                self.rngs[world] = np.random.default_rng(seeds[world])
            world_options = options if options is None or isinstance(options, Mapping) else options[world]
            drawn = None
            if self.ahead is not None:
                if seeded or world_options:
                    self.ahead.drop(world)
                else:
                    drawn = self.ahead.take(world, self.rngs[world])
            if drawn is None:
                variation = choose_variation(self.task, self.config, world_options, self.rngs[world])
                host.reset(variation, self.rngs[world])
                start = {"qpos": host.data.qpos, "ctrl": host.data.ctrl, "mocap_pos": host.data.mocap_pos,
                         "mocap_quat": host.data.mocap_quat, "geom_rgba": host.model.geom_rgba}
            else:
                variation, start = drawn
            for name, array in start.items():
                view[name][world] = array
            view["variation"][world] = variation
            if self.ahead is not None:
                self.ahead.submit(world, self.rngs[world])  # the world's next episode, drawn while it runs
            infos[world] = {"descriptions": host.task.descriptions(variation), "variation_index": variation,
                            "task": host.task.name, "task_low_dim_size": self.task.state_size()}
        return infos

    def upload(self, stream: Any) -> None:
        for name, array in self.on_device.items():
            wp.copy(array, self.staging[name], stream=stream)

    def restore(self, mask: wp.array, arm: Arm, controller: Controller, d: Any) -> None:
        """Restore the masked worlds' episode starts (capturable); the caller runs forward after."""
        s = self.on_device
        wp.launch(_restore, dim=self.num_worlds, device=self.device, inputs=[
            mask, s["qpos"], s["ctrl"], s["mocap_pos"], s["mocap_quat"], s["geom_rgba"], arm, controller, d.qpos,
            d.ctrl, d.mocap_pos, d.mocap_quat, self.geom_rgba])
