"""Offscreen camera rendering: every requested camera of several envs in one framebuffer, read back
with one call.

Layout of the offscreen buffer: one column per camera, one row per pass and env (a band of rows per
env). The colour pass (lit, rgb) and the segmentation pass (flat id colours, for masks) each draw all
cameras side by side; one mjr_readPixels then returns the colour and depth of every env, camera and
pass, and the conversions write straight into the observation arrays. Depth comes from whichever
pass is drawn (the geometry is the same); a camera that needs depth or a point cloud but neither rgb
nor mask uses the cheaper flat pass. The envs of one worker share this renderer (one GL context):
their models come from the same scene, so one GPU copy of its meshes and textures serves them all.

Imported only inside a worker, after MUJOCO_GL is set.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import mujoco
import numpy as np

from .scene import CAMERA_FAR, CAMERA_NEAR, render_passes

BACKGROUND_ID = 0.0  # mask value where no object is seen (the world body's id; the floor is part of it)


class CameraRenderer:
    """One GL context and one scene per worker, reused for every env, camera and step. `envs`: how
    many envs one read-back holds (the model's offscreen buffer must be that tall)."""

    def __init__(self, model: mujoco.MjModel, cameras: tuple[str, ...], width: int, height: int,
                 modalities: tuple[str, ...], depth_in_meters: bool, envs: int = 1):
        self.model = model
        self.envs = envs
        self.width, self.height = width, height
        self.cameras = cameras
        self.modalities = frozenset(modalities)
        self.depth_in_meters = depth_in_meters
        self.passes = render_passes(modalities) if cameras else []  # False: colour pass, True: segmentation

        self._gl = mujoco.GLContext(model.vis.global_.offwidth, model.vis.global_.offheight)
        self._gl.make_current()
        self._context = mujoco.MjrContext(model, mujoco.mjtFontScale.mjFONTSCALE_100.value)
        mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN.value, self._context)
        self._context.readDepthMap = mujoco.mjtDepthMap.mjDEPTH_ZEROFAR

        self._scene = mujoco.MjvScene(model, maxgeom=max(100, 2 * model.ngeom))
        # Shadows, reflections, skybox and fog are the expensive parts of a software rasteriser's frame.
        for flag in ("mjRND_SHADOW", "mjRND_REFLECTION", "mjRND_SKYBOX", "mjRND_FOG", "mjRND_HAZE"):
            self._scene.flags[getattr(mujoco.mjtRndFlag, flag)] = 0
        self._option = mujoco.MjvOption()
        self._cameras = {model.cam(i).name: self._fixed_camera(i) for i in range(model.ncam)}
        self._body_of_geom = model.geom_bodyid.astype(np.float32)

        # What one read returns: all passes (rows) of all cameras (columns), for up to `envs` envs.
        self._rgb = np.empty((envs * max(1, len(self.passes)) * height, max(1, len(cameras)) * width, 3), np.uint8)
        self._depth = np.empty(self._rgb.shape[:2], np.float32)
        self._metric = np.empty((height, width), np.float64)
        self._rays = {name: self._pixel_rays(name) for name in cameras}

    @staticmethod
    def _fixed_camera(camera_id: int) -> mujoco.MjvCamera:
        camera = mujoco.MjvCamera()
        camera.type = mujoco.mjtCamera.mjCAMERA_FIXED
        camera.fixedcamid = camera_id
        return camera

    def focal_length(self, camera: str) -> float:
        """In pixels; MuJoCo's fovy is vertical and pixels are square."""
        return (self.height / 2) / np.tan(np.deg2rad(self.model.cam(camera).fovy[0]) / 2)

    def _pixel_rays(self, camera: str) -> np.ndarray:
        """Camera-frame rays through each pixel at unit depth (OpenGL camera: -z forward, y up). Pixel
        (u, v) is taken at integer coordinates from the centre (width / 2, height / 2), as PyRep's
        pointcloud_from_depth_and_camera_params does: RLBench's point clouds, and those its loader
        rebuilds from depth and the camera matrices in misc, then agree with ours exactly."""
        focal = self.focal_length(camera)
        rays = np.empty((self.height, self.width, 3))
        rays[..., 0] = (np.arange(self.width) - self.width / 2)[None, :] / focal
        rays[..., 1] = -(np.arange(self.height) - self.height / 2)[:, None] / focal  # rows go down
        rays[..., 2] = -1.0
        return rays

    def _update_geoms(self, model: mujoco.MjModel, data: mujoco.MjData, camera: str) -> None:
        mujoco.mjv_updateScene(model, data, self._option, None, self._cameras[camera],
                               mujoco.mjtCatBit.mjCAT_ALL.value, self._scene)

    def _draw(self, model: mujoco.MjModel, data: mujoco.MjData, cameras: tuple[str, ...], row: int,
              segmentation: bool) -> None:
        flags = self._scene.flags
        flags[mujoco.mjtRndFlag.mjRND_SEGMENT] = flags[mujoco.mjtRndFlag.mjRND_IDCOLOR] = int(segmentation)
        for column, name in enumerate(cameras):
            mujoco.mjv_updateCamera(model, data, self._cameras[name], self._scene)
            mujoco.mjv_makeLights(model, data, self._scene)  # the headlight follows the camera
            viewport = mujoco.MjrRect(column * self.width, row * self.height, self.width, self.height)
            mujoco.mjr_render(viewport, self._scene, self._context)

    def _cell(self, image: np.ndarray, column: int, row: int) -> np.ndarray:
        """One camera's image of one pass, flipped from OpenGL's bottom-up rows."""
        h, w = self.height, self.width
        return image[row * h:(row + 1) * h, column * w:(column + 1) * w][::-1]

    def render(self, items: Sequence[tuple[mujoco.MjModel, mujoco.MjData, Mapping[str, np.ndarray]]]) -> None:
        """Render the configured cameras of each (model, data) and write their `{camera}_{modality}`
        arrays of its `out` in place: up to `envs` of them per read-back."""
        if not self.passes:
            return
        self._gl.make_current()
        passes = len(self.passes)
        needs_depth = bool({"depth", "point_cloud"} & self.modalities)
        for first in range(0, len(items), self.envs):
            batch = items[first:first + self.envs]
            lut = None
            for band, (model, data, _) in enumerate(batch):
                self._update_geoms(model, data, self.cameras[0])
                if lut is None and "mask" in self.modalities:
                    lut = self._segment_lut()  # the same for every env: their scenes come from one model
                for p, segmentation in enumerate(self.passes):
                    self._draw(model, data, self.cameras, band * passes + p, segmentation)
            used = len(batch) * passes * self.height
            rect = mujoco.MjrRect(0, 0, self._rgb.shape[1], used)
            mujoco.mjr_readPixels(self._rgb[:used], self._depth[:used] if needs_depth else None, rect, self._context)
            for band, (_, data, out) in enumerate(batch):
                for column, camera in enumerate(self.cameras):
                    if "rgb" in self.modalities:
                        out[f"{camera}_rgb"][...] = self._cell(self._rgb, column, band * passes)
                    if lut is not None:
                        colours = self._cell(self._rgb, column, band * passes + passes - 1)
                        self._write_mask(out[f"{camera}_mask"], colours, lut)
                    if needs_depth:
                        self._write_depth(data, camera, self._cell(self._depth, column, band * passes), out)

    def _segment_lut(self) -> np.ndarray:
        """Segmentation colour (segid + 1; 0 is background) -> body id of the geom drawn there."""
        scene = self._scene
        lut = np.full(scene.ngeom + 1, BACKGROUND_ID, np.float32)
        for i in range(scene.ngeom):
            geom = scene.geoms[i]
            if geom.objtype == mujoco.mjtObj.mjOBJ_GEOM and geom.segid >= 0:
                lut[geom.segid + 1] = self._body_of_geom[geom.objid]
        return lut

    @staticmethod
    def _write_mask(mask: np.ndarray, colours: np.ndarray, lut: np.ndarray) -> None:
        segment = colours[..., 0].astype(np.int32)
        segment |= colours[..., 1].astype(np.int32) << 8
        segment |= colours[..., 2].astype(np.int32) << 16
        np.take(lut, segment, out=mask, mode="clip")

    def _write_depth(self, data: mujoco.MjData, camera: str, zbuffer: np.ndarray,
                     out: Mapping[str, np.ndarray]) -> None:
        # Reversed-Z buffer (1 at near, 0 at far) -> distance along the optical axis, in float64.
        metric = self._metric
        np.multiply(zbuffer, CAMERA_FAR - CAMERA_NEAR, out=metric)
        metric += CAMERA_NEAR
        np.divide(CAMERA_FAR * CAMERA_NEAR, metric, out=metric)
        depth = out.get(f"{camera}_depth")
        if depth is not None:
            if self.depth_in_meters:
                depth[...] = metric
            else:
                np.subtract(metric, CAMERA_NEAR, out=depth, casting="same_kind")
                depth /= CAMERA_FAR - CAMERA_NEAR
        cloud = out.get(f"{camera}_point_cloud")
        if cloud is not None:
            camera_id = self._cameras[camera].fixedcamid
            np.matmul(self._rays[camera], data.cam_xmat[camera_id].reshape(3, 3).T, out=cloud)
            cloud *= metric[..., None]
            cloud += data.cam_xpos[camera_id]

    def render_rgb(self, model: mujoco.MjModel, data: mujoco.MjData, camera: str) -> np.ndarray:
        """One camera's rgb image (any camera of the model), drawn in the buffer's first cell."""
        self._gl.make_current()
        self._update_geoms(model, data, camera)
        self._draw(model, data, (camera,), 0, segmentation=False)
        image = np.empty((self.height, self.width, 3), np.uint8)
        mujoco.mjr_readPixels(image, None, mujoco.MjrRect(0, 0, self.width, self.height), self._context)
        return image[::-1].copy()

    def close(self) -> None:
        if self._context is not None:
            self._gl.make_current()
            self._context.free()
            self._context = None
        if self._gl is not None:
            self._gl.free()
            self._gl = None
