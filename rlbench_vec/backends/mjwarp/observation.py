"""Observations of every world in RLBench's conventions, written into arrays on the device.

Cameras: MuJoCo Warp ray-traces all cameras of all worlds in one launch (rgb packed in uint32,
planar depth in metres with 0 for a miss, per pixel (geom id, object type)); kernels here convert
each camera into the observation arrays the mujoco backend's renderer writes: rgb uint8 (H, W, 3),
depth float32 normalised between the near and far planes (or metres), mask float32 holding the body
id of the geom seen (0: nothing or the floor), point_cloud float64 world points. Rows go top to
bottom, as RLBench's images. Low-dim fields follow backends/mujoco/simulation.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mujoco_warp as mjw
import numpy as np
import warp as wp

from ...config import EnvConfig
from ...spec import observation_spec
from ..mujoco.robot import GRIPPER_OPEN_FRACTION
from ..mujoco.scene import CAMERA_FAR, CAMERA_NEAR, FINGER_MAX
from .control import Arm
from .profile import BVH, LOW_DIM, RENDER, conversion
from .sequences import Pieces
from .tasks import BatchedTask

_GEOM = wp.constant(int(mjw.ObjType.GEOM))
_OPEN_FRACTION = wp.constant(float(GRIPPER_OPEN_FRACTION))
_FINGER_MAX = wp.constant(float(FINGER_MAX))
_WARP_DTYPES = {np.dtype(np.uint8): wp.uint8, np.dtype(np.float32): wp.float32, np.dtype(np.float64): wp.float64}
ROBOT_FIELDS = {  # low-dim fields the robot kernel writes, with their per-world shapes
    "joint_positions": (7,), "joint_velocities": (7,), "joint_forces": (7,), "gripper_open": (),
    "gripper_pose": (7,), "gripper_matrix": (4, 4), "gripper_joint_positions": (2,),
}


@wp.kernel
def _rgb(packed: wp.array2d(dtype=wp.uint32), offset: int, out: wp.array4d(dtype=wp.uint8)):
    world, pixel = wp.tid()
    y = pixel // out.shape[2]
    x = pixel - y * out.shape[2]
    value = packed[world, offset + pixel]
    out[world, y, x, 0] = wp.uint8((value >> wp.uint32(16)) & wp.uint32(255))
    out[world, y, x, 1] = wp.uint8((value >> wp.uint32(8)) & wp.uint32(255))
    out[world, y, x, 2] = wp.uint8(value & wp.uint32(255))


@wp.func
def _metres(depth: wp.array2d(dtype=float), world: int, index: int, far: float) -> float:
    metric = depth[world, index]
    if metric <= 0.0:
        return far
    return metric


@wp.kernel
def _depth(depth: wp.array2d(dtype=float), offset: int, near: float, far: float, in_meters: int,
           out: wp.array3d(dtype=float)):
    world, pixel = wp.tid()
    y = pixel // out.shape[2]
    x = pixel - y * out.shape[2]
    metric = _metres(depth, world, offset + pixel, far)
    if in_meters != 0:
        out[world, y, x] = metric
    else:
        out[world, y, x] = (metric - near) / (far - near)


@wp.kernel
def _point_cloud(depth: wp.array2d(dtype=float), offset: int, far: float, focal: float,
                 cam_xpos: wp.array2d(dtype=wp.vec3), cam_xmat: wp.array2d(dtype=wp.mat33), camera: int,
                 out: wp.array4d(dtype=wp.float64)):
    world, pixel = wp.tid()
    height = out.shape[1]
    width = out.shape[2]
    y = pixel // width
    x = pixel - y * width
    # The ray through the pixel at unit depth (camera frame: -z forward, y up), on PyRep's pixel grid
    # (integer coordinates from the centre) as renderer.py: clouds rebuild from depth and misc exactly.
    ray = wp.vec3((float(x) - float(width) * 0.5) / focal, -(float(y) - float(height) * 0.5) / focal, -1.0)
    point = cam_xmat[world, camera] @ ray * _metres(depth, world, offset + pixel, far) + cam_xpos[world, camera]
    for i in range(3):
        out[world, y, x, i] = wp.float64(point[i])


@wp.kernel
def _mask(seg: wp.array2d(dtype=wp.vec2i), offset: int, geom_body: wp.array(dtype=int),
          out: wp.array3d(dtype=float)):
    world, pixel = wp.tid()
    y = pixel // out.shape[2]
    x = pixel - y * out.shape[2]
    hit = seg[world, offset + pixel]
    body = wp.float32(0.0)
    if hit[0] >= 0 and hit[1] == _GEOM:
        body = float(geom_body[hit[0]])
    out[world, y, x] = body


@wp.kernel
def _extrinsics(cam_xpos: wp.array2d(dtype=wp.vec3), cam_xmat: wp.array2d(dtype=wp.mat33), camera: int,
                out: wp.array3d(dtype=wp.float64)):
    """Camera-to-world pose in RLBench's camera axes (simulation.py's camera_extrinsics): MuJoCo's
    camera frame turned by diag(-1, 1, -1)."""
    world = wp.tid()
    rotation = cam_xmat[world, camera]
    position = cam_xpos[world, camera]
    for i in range(3):
        out[world, i, 0] = wp.float64(-rotation[i, 0])
        out[world, i, 1] = wp.float64(rotation[i, 1])
        out[world, i, 2] = wp.float64(-rotation[i, 2])
        out[world, i, 3] = wp.float64(position[i])
        out[world, 3, i] = wp.float64(0.0)
    out[world, 3, 3] = wp.float64(1.0)


@wp.func
def _quat_xyzw(m: wp.mat33) -> wp.quat:
    """The branches of geometry.mat_to_quat (w >= 0), so both backends pick the same sign where the
    choice is close (half turns), in x, y, z, w order."""
    trace = m[0, 0] + m[1, 1] + m[2, 2]
    v = wp.vec3()
    w = wp.float32(0.0)
    if trace > 0.0:
        s = 2.0 * wp.sqrt(trace + 1.0)
        w = 0.25 * s
        v = wp.vec3(m[2, 1] - m[1, 2], m[0, 2] - m[2, 0], m[1, 0] - m[0, 1]) / s
    else:
        i = wp.int32(0)
        if m[1, 1] > m[i, i]:
            i = 1
        if m[2, 2] > m[i, i]:
            i = 2
        j = (i + 1) % 3
        k = (i + 2) % 3
        s = 2.0 * wp.sqrt(wp.max(1.0 + m[i, i] - m[j, j] - m[k, k], 0.0))
        v[i] = 0.25 * s
        v[j] = (m[j, i] + m[i, j]) / s
        v[k] = (m[k, i] + m[i, k]) / s
        w = (m[k, j] - m[j, k]) / s
    if w < 0.0:
        return wp.quat(-v[0], -v[1], -v[2], -w)
    return wp.quat(v[0], v[1], v[2], w)


@wp.kernel
def _robot(arm: Arm, qpos: wp.array2d(dtype=float), qvel: wp.array2d(dtype=float),
           qfrc_actuator: wp.array2d(dtype=float), site_xpos: wp.array2d(dtype=wp.vec3),
           site_xmat: wp.array2d(dtype=wp.mat33), joint_positions: wp.array2d(dtype=wp.float64),
           joint_velocities: wp.array2d(dtype=wp.float64), joint_forces: wp.array2d(dtype=wp.float64),
           gripper_open: wp.array(dtype=wp.float64), gripper_pose: wp.array2d(dtype=wp.float64),
           gripper_matrix: wp.array3d(dtype=wp.float64), gripper_joint_positions: wp.array2d(dtype=wp.float64)):
    world = wp.tid()
    for j in range(7):
        joint_positions[world, j] = wp.float64(qpos[world, arm.qpos_adr[j]])
        joint_velocities[world, j] = wp.float64(qvel[world, arm.dof_adr[j]])
        joint_forces[world, j] = wp.float64(qfrc_actuator[world, arm.dof_adr[j]])
    opening = wp.float32(0.0)
    for i in range(2):
        finger = qpos[world, arm.finger_qpos_adr[i]]
        gripper_joint_positions[world, i] = wp.float64(finger)
        opening += 0.5 * finger
    gripper_open[world] = wp.float64(0.0)
    if opening / _FINGER_MAX > _OPEN_FRACTION:
        gripper_open[world] = wp.float64(1.0)
    position = site_xpos[world, arm.tcp_site]
    rotation = site_xmat[world, arm.tcp_site]
    quat = _quat_xyzw(rotation)
    for i in range(3):
        gripper_pose[world, i] = wp.float64(position[i])
        gripper_matrix[world, i, 3] = wp.float64(position[i])
        gripper_matrix[world, 3, i] = wp.float64(0.0)
        for j in range(3):
            gripper_matrix[world, i, j] = wp.float64(rotation[i, j])
    for i in range(4):
        gripper_pose[world, 3 + i] = wp.float64(quat[i])
    gripper_matrix[world, 3, 3] = wp.float64(1.0)


class Observer:
    """Owns the observation arrays of every world (`arrays`: key -> warp array (num_worlds, ...))
    and fills them from the current MuJoCo Warp data with the launches of `pieces`."""

    def __init__(self, config: EnvConfig, mjm: Any, m: Any, d: Any, arm: Arm, task: BatchedTask, device: Any):
        self.config, self.m, self.d, self.arm, self.task = config, m, d, arm, task
        self.device = device
        n = d.nworld
        self.spec = observation_spec(config)
        self.arrays = {key: wp.zeros((n, *s.shape), dtype=_WARP_DTYPES[s.dtype], device=device)
                       for key, s in self.spec.items()}
        self.robot = {key: self.arrays[key] if key in self.arrays else wp.zeros((n, *shape), dtype=wp.float64,
                                                                                 device=device)
                      for key, shape in ROBOT_FIELDS.items()}
        self.cameras = config.cameras if config.modalities else ()
        self.context = self._render_context(mjm) if self.cameras else None
        self.camera_ids = [mjm.camera(name).id for name in self.cameras]
        # Where each camera's pixels start in the context's buffers (read once: no host reads in a graph).
        rc = self.context
        self.offsets = {} if rc is None else {
            kind: [int(a) for a in getattr(rc, f"{kind}_adr").numpy()] for kind in ("rgb", "depth", "seg")}
        # Pixels per unit of tan(angle): MuJoCo's fovy is vertical and pixels are square.
        self.focal = [(config.height / 2) / np.tan(np.deg2rad(mjm.cam_fovy[i]) / 2) for i in self.camera_ids]
        self.misc_cameras = {camera: mjm.camera(camera).id for camera in config.cameras} if config.misc else {}
        for camera, camera_id in self.misc_cameras.items():  # constant per camera: written once
            intrinsics = np.broadcast_to(self._intrinsics(mjm, camera_id), (n, 3, 3))
            self.arrays[f"{camera}_camera_intrinsics"].assign(np.ascontiguousarray(intrinsics))
            self.arrays[f"{camera}_camera_near"].fill_(CAMERA_NEAR)
            self.arrays[f"{camera}_camera_far"].fill_(CAMERA_FAR)

    def _intrinsics(self, mjm: Any, camera_id: int) -> np.ndarray:
        """PyRep's intrinsic matrix, as simulation.py's camera_intrinsics."""
        width, height = self.config.width, self.config.height
        focal = -(height / 2) / np.tan(np.deg2rad(mjm.cam_fovy[camera_id]) / 2)
        return np.array([[focal, 0.0, width / 2], [0.0, focal, height / 2], [0.0, 0.0, 1.0]])

    def _render_context(self, mjm: Any) -> Any:
        modalities = set(self.config.modalities)
        with wp.ScopedDevice(self.device):
            return mjw.create_render_context(
                mjm, nworld=self.d.nworld, cam_res=(self.config.width, self.config.height),
                render_rgb="rgb" in modalities, render_depth=bool({"depth", "point_cloud"} & modalities),
                render_seg="mask" in modalities, use_textures=False, use_shadows=False,
                cam_active=list(self.cameras))

    def pieces(self) -> Pieces:
        """The launches that fill `arrays` (capturable in a graph), as profile phases: the render, each
        camera's conversions, the low-dim fields."""
        pieces: Pieces = []
        if self.context is not None:
            m, d, rc = self.m, self.d, self.context
            pieces += [(BVH, lambda: mjw.refit_bvh(m, d, rc)), (RENDER, lambda: mjw.render(m, d, rc))]
            pieces += [(conversion(camera, modality), launch) for i, camera in enumerate(self.cameras)
                       for modality, launch in self._conversions(i, camera)]
        return [*pieces, (LOW_DIM, self._low_dim)]

    def _low_dim(self) -> None:
        r = self.robot
        wp.launch(_robot, dim=self.d.nworld, device=self.device, inputs=[
            self.arm, self.d.qpos, self.d.qvel, self.d.qfrc_actuator, self.d.site_xpos, self.d.site_xmat,
            r["joint_positions"], r["joint_velocities"], r["joint_forces"], r["gripper_open"], r["gripper_pose"],
            r["gripper_matrix"], r["gripper_joint_positions"]])
        for camera, camera_id in self.misc_cameras.items():
            wp.launch(_extrinsics, dim=self.d.nworld, device=self.device, inputs=[
                self.d.cam_xpos, self.d.cam_xmat, camera_id, self.arrays[f"{camera}_camera_extrinsics"]])
        state = self.arrays.get("task_low_dim_state")
        if state is not None:
            self.task.low_dim_state(self.d, state)

    def _conversions(self, i: int, camera: str) -> list[tuple[str, Callable[[], None]]]:
        """Camera i's modalities, each a launch that converts the render into its observation array."""
        m, d, rc, c, out = self.m, self.d, self.context, self.config, self.arrays
        dim = (d.nworld, c.width * c.height)
        rgb_adr, depth_adr, seg_adr = self.offsets["rgb"][i], self.offsets["depth"][i], self.offsets["seg"][i]
        kernels = {
            "rgb": (_rgb, [rc.rgb_data, rgb_adr]),
            "depth": (_depth, [rc.depth_data, depth_adr, CAMERA_NEAR, CAMERA_FAR, int(c.depth_in_meters)]),
            "point_cloud": (_point_cloud, [rc.depth_data, depth_adr, CAMERA_FAR, float(self.focal[i]), d.cam_xpos,
                                           d.cam_xmat, self.camera_ids[i]]),
            "mask": (_mask, [rc.seg_data, seg_adr, m.geom_bodyid]),
        }

        def launcher(kernel: Any, inputs: list[Any]) -> Callable[[], None]:
            return lambda: wp.launch(kernel, dim=dim, device=self.device, inputs=inputs)

        return [(modality, launcher(kernel, [*inputs, out[f"{camera}_{modality}"]]))
                for modality, (kernel, inputs) in kernels.items() if f"{camera}_{modality}" in out]
