"""Success and task_low_dim_state of the embedded tasks for every world, as Warp kernels.

Ids and thresholds come from the host task of backends/mujoco/tasks.py, bound to the same compiled
model; only the arithmetic of its `success` and `low_dim_state` is restated here, per world.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import warp as wp

from ..mujoco.tasks import OpenDrawer, PickAndLift, ReachTarget, Task


def _ids(values, device) -> wp.array:
    return wp.array(np.asarray(values, dtype=np.int32), dtype=int, device=device)


@wp.kernel
def _reach_success(site_xpos: wp.array2d(dtype=wp.vec3), mocap_pos: wp.array2d(dtype=wp.vec3), tcp: int,
                   target: int, distance: float, success: wp.array(dtype=int)):
    world = wp.tid()
    success[world] = int(wp.length(site_xpos[world, tcp] - mocap_pos[world, target]) < distance)


@wp.kernel
def _mocap_positions(mocap_pos: wp.array2d(dtype=wp.vec3), mocaps: wp.array(dtype=int),
                     state: wp.array2d(dtype=wp.float64)):
    world = wp.tid()
    for k in range(mocaps.shape[0]):
        p = mocap_pos[world, mocaps[k]]
        for i in range(3):
            state[world, 3 * k + i] = wp.float64(p[i])


@wp.kernel
def _pads_touching(nacon: wp.array(dtype=int), geom: wp.array(dtype=wp.vec2i), worldid: wp.array(dtype=int),
                   block: int, pads: wp.array(dtype=int), touching: wp.array2d(dtype=int)):
    """touching[world, k] = 1 where a contact joins the block and finger pad k (zeroed before)."""
    i = wp.tid()
    if i >= nacon[0]:
        return
    pair = geom[i]
    other = wp.int32(-1)
    if pair[0] == block:
        other = pair[1]
    elif pair[1] == block:
        other = pair[0]
    for k in range(pads.shape[0]):
        if other == pads[k]:
            touching[worldid[i], k] = 1


@wp.kernel
def _lift_success(xpos: wp.array2d(dtype=wp.vec3), mocap_pos: wp.array2d(dtype=wp.vec3), block: int,
                  target: int, distance: float, touching: wp.array2d(dtype=int), success: wp.array(dtype=int)):
    world = wp.tid()
    grasped = wp.bool(True)
    for k in range(touching.shape[1]):
        if touching[world, k] == 0:
            grasped = False
    near = wp.length(xpos[world, block] - mocap_pos[world, target]) < distance
    success[world] = int(near and grasped)


@wp.kernel
def _lift_state(xpos: wp.array2d(dtype=wp.vec3), xquat: wp.array2d(dtype=wp.quat),
                mocap_pos: wp.array2d(dtype=wp.vec3), qpos: wp.array2d(dtype=float), block: int, target: int,
                distractor_adr: wp.array(dtype=int), state: wp.array2d(dtype=wp.float64)):
    """Block xyz + quaternion xyzw (MuJoCo stores wxyz), target xyz, the distractors' xyz."""
    world = wp.tid()
    p = xpos[world, block]
    q = xquat[world, block]
    t = mocap_pos[world, target]
    for i in range(3):
        state[world, i] = wp.float64(p[i])
        state[world, 3 + i] = wp.float64(q[1 + i])
        state[world, 7 + i] = wp.float64(t[i])
    state[world, 6] = wp.float64(q[0])
    for k in range(distractor_adr.shape[0]):
        for i in range(3):
            state[world, 10 + 3 * k + i] = wp.float64(qpos[world, distractor_adr[k] + i])


@wp.kernel
def _drawer_success(qpos: wp.array2d(dtype=float), joint_adr: wp.array(dtype=int), variation: wp.array(dtype=int),
                    opening: float, success: wp.array(dtype=int)):
    world = wp.tid()
    success[world] = int(qpos[world, joint_adr[variation[world]]] > opening)


@wp.kernel
def _drawer_state(geom_xpos: wp.array2d(dtype=wp.vec3), qpos: wp.array2d(dtype=float),
                  handles: wp.array(dtype=int), joint_adr: wp.array(dtype=int), variation: wp.array(dtype=int),
                  state: wp.array2d(dtype=wp.float64)):
    """The chosen drawer's handle xyz, then every drawer's opening."""
    world = wp.tid()
    handle = geom_xpos[world, handles[variation[world]]]
    for i in range(3):
        state[world, i] = wp.float64(handle[i])
    for k in range(joint_adr.shape[0]):
        state[world, 3 + k] = wp.float64(qpos[world, joint_adr[k]])


class BatchedTask:
    """A task's per-world success (int32 0/1) and low-dim state (float64), computed on the device
    from MuJoCo Warp data after forward kinematics and collision."""

    def __init__(self, task: Task, num_worlds: int, device: Any):
        self.task = task
        self.device = device

    def success(self, d: Any, variation: wp.array, out: wp.array) -> None:
        raise NotImplementedError

    def low_dim_state(self, d: Any, variation: wp.array, out: wp.array) -> None:
        raise NotImplementedError


class BatchedReachTarget(BatchedTask):
    def __init__(self, task: ReachTarget, num_worlds: int, device: Any):
        super().__init__(task, num_worlds, device)
        self.mocaps = _ids(task.mocap, device)

    def success(self, d, variation, out):
        wp.launch(_reach_success, dim=d.nworld, device=self.device, inputs=[
            d.site_xpos, d.mocap_pos, self.task.tcp_site, self.task.mocap[0], ReachTarget.SUCCESS_DISTANCE, out])

    def low_dim_state(self, d, variation, out):
        wp.launch(_mocap_positions, dim=d.nworld, device=self.device, inputs=[d.mocap_pos, self.mocaps, out])


class BatchedPickAndLift(BatchedTask):
    def __init__(self, task: PickAndLift, num_worlds: int, device: Any):
        super().__init__(task, num_worlds, device)
        self.pads = _ids(sorted(task.pads), device)
        self.distractors = _ids(task.qpos_adr[1:], device)
        self.touching = wp.zeros((num_worlds, self.pads.shape[0]), dtype=int, device=device)

    def success(self, d, variation, out):
        self.touching.zero_()
        wp.launch(_pads_touching, dim=d.naconmax, device=self.device, inputs=[
            d.nacon, d.contact.geom, d.contact.worldid, self.task.block_geom, self.pads, self.touching])
        wp.launch(_lift_success, dim=d.nworld, device=self.device, inputs=[
            d.xpos, d.mocap_pos, self.task.block_body, self.task.target_mocap, PickAndLift.SUCCESS_DISTANCE,
            self.touching, out])

    def low_dim_state(self, d, variation, out):
        wp.launch(_lift_state, dim=d.nworld, device=self.device, inputs=[
            d.xpos, d.xquat, d.mocap_pos, d.qpos, self.task.block_body, self.task.target_mocap, self.distractors,
            out])


class BatchedOpenDrawer(BatchedTask):
    def __init__(self, task: OpenDrawer, num_worlds: int, device: Any):
        super().__init__(task, num_worlds, device)
        self.joints = _ids(task.joint_adr, device)
        self.handles = _ids(task.handle_geoms, device)

    def success(self, d, variation, out):
        wp.launch(_drawer_success, dim=d.nworld, device=self.device, inputs=[
            d.qpos, self.joints, variation, OpenDrawer.SUCCESS_OPENING, out])

    def low_dim_state(self, d, variation, out):
        wp.launch(_drawer_state, dim=d.nworld, device=self.device, inputs=[
            d.geom_xpos, d.qpos, self.handles, self.joints, variation, out])


BATCHED_TASKS: dict[str, type[BatchedTask]] = {
    ReachTarget.name: BatchedReachTarget, PickAndLift.name: BatchedPickAndLift, OpenDrawer.name: BatchedOpenDrawer,
}
