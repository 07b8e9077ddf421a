"""A GLX client that renders the way CoppeliaSim's vision sensors do: a compatibility-profile context
on $DISPLAY, an offscreen framebuffer object (RGBA8 colour and 24-bit depth renderbuffers), a
fixed-function scene (a lit sphere from vertex arrays, an unlit red triangle in front of it, an unlit
green square behind it), then glReadPixels of colour and depth.

    python tests/programs/glx_fbo_readback.py OUT_DIR [--size 256] [--frames 100] [--min_seconds 0]

Writes OUT_DIR/rgb.npy (size x size x 3 uint8, top row first) and OUT_DIR/depth.npy (float32 window
depth, 1.0 where nothing was drawn) and prints one JSON line: the GL strings and device UUIDs of the
context, and frames/s of render + readback over at least --frames frames and --min_seconds.
tests/test_display.py checks its image under Mesa; scripts/glx_gpu_check.sh compares Mesa's and NVIDIA's.

Where things land (glFrustum(-0.1, 0.1, -0.1, 0.1, near=0.2, far=10), eye 3 units before the sphere):
an eye-space point (x, y, z) maps to NDC (0.2 x / 0.1 / -z, ...) and window depth
(ndc_z + 1) / 2 with ndc_z = (far + near) / (far - near) + 2 far near / ((far - near) z).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import time
from pathlib import Path

import numpy as np

from rlbench_vec.display.glcheck import GLXContext

NEAR, FAR, HALF_WIDTH, EYE_DISTANCE = 0.2, 10.0, 0.1, 3.0
CLEAR = (0.2, 0.4, 0.6)  # exact in 8 bits: 51, 102, 153
TRIANGLE_Z, SQUARE_Z = 0.5, -1.5  # object space; the sphere (radius 1) is centred on the origin
TRIANGLE = ((-0.9, -0.9), (-0.2, -0.9), (-0.9, -0.2))
SQUARE = ((0.3, 0.3), (1.3, 0.3), (1.3, 1.3), (0.3, 1.3))
SPHERE_COLOUR = (0.8, 0.6, 0.2)
STACKS, SLICES = 96, 192

GL_FRAMEBUFFER, GL_RENDERBUFFER, GL_FRAMEBUFFER_COMPLETE = 0x8D40, 0x8D41, 0x8CD5
GL_RGBA8, GL_DEPTH_COMPONENT24, GL_COLOR_ATTACHMENT0, GL_DEPTH_ATTACHMENT = 0x8058, 0x81A6, 0x8CE0, 0x8D00
GL_DEPTH_TEST, GL_LIGHTING, GL_LIGHT0, GL_COLOR_MATERIAL, GL_NORMALIZE = 0x0B71, 0x0B50, 0x4000, 0x0B57, 0x0BA1
GL_POSITION, GL_PROJECTION, GL_MODELVIEW, GL_SMOOTH = 0x1203, 0x1701, 0x1700, 0x1D01
GL_COLOR_BUFFER_BIT, GL_DEPTH_BUFFER_BIT, GL_TRIANGLES = 0x4000, 0x0100, 0x0004
GL_VERTEX_ARRAY, GL_NORMAL_ARRAY, GL_COLOR_ARRAY, GL_FLOAT = 0x8074, 0x8075, 0x8076, 0x1406
GL_RGB, GL_UNSIGNED_BYTE, GL_DEPTH_COMPONENT, GL_PACK_ALIGNMENT = 0x1907, 0x1401, 0x1902, 0x0D05


def window_depth(eye_z: float) -> float:
    ndc = (FAR + NEAR) / (FAR - NEAR) + 2 * FAR * NEAR / ((FAR - NEAR) * eye_z)
    return (ndc + 1) / 2


def sphere() -> tuple[np.ndarray, np.ndarray]:
    """Triangles of a unit sphere: vertices (= normals), (n, 3) float32 each."""
    theta = np.linspace(0, np.pi, STACKS + 1)
    phi = np.linspace(0, 2 * np.pi, SLICES + 1)
    grid = np.stack([np.sin(theta)[:, None] * np.cos(phi), np.sin(theta)[:, None] * np.sin(phi),
                     np.cos(theta)[:, None] * np.ones_like(phi)], axis=-1)
    a, b, c, d = grid[:-1, :-1], grid[1:, :-1], grid[1:, 1:], grid[:-1, 1:]
    triangles = np.stack([a, b, c, a, c, d], axis=2).reshape(-1, 3).astype(np.float32)
    return triangles, triangles.copy()


def flat(corners, z: float) -> np.ndarray:
    """A fan of triangles over a convex polygon at height z."""
    points = [(x, y, z) for x, y in corners]
    return np.array([p for i in range(1, len(points) - 1) for p in (points[0], points[i], points[i + 1])], np.float32)


class Scene:
    def __init__(self, context: GLXContext, size: int):
        self.gl, self.size = context.gl, size
        gl, f = context.gl, context.function
        uint_p = ctypes.POINTER(ctypes.c_uint)
        gl.glClearColor.argtypes = [ctypes.c_float] * 4
        gl.glTranslatef.argtypes = [ctypes.c_float] * 3
        gl.glFrustum.argtypes = [ctypes.c_double] * 6
        gl.glLightfv.argtypes = [ctypes.c_uint, ctypes.c_uint, ctypes.POINTER(ctypes.c_float)]
        for name in ("glVertexPointer", "glColorPointer"):
            getattr(gl, name).argtypes = [ctypes.c_int, ctypes.c_uint, ctypes.c_int, ctypes.c_void_p]
        gl.glNormalPointer.argtypes = [ctypes.c_uint, ctypes.c_int, ctypes.c_void_p]
        gl.glReadPixels.argtypes = [ctypes.c_int] * 4 + [ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p]
        framebuffers, renderbuffers = (ctypes.c_uint * 1)(), (ctypes.c_uint * 2)()
        f("glGenFramebuffers", None, ctypes.c_int, uint_p)(1, framebuffers)
        f("glBindFramebuffer", None, ctypes.c_uint, ctypes.c_uint)(GL_FRAMEBUFFER, framebuffers[0])
        f("glGenRenderbuffers", None, ctypes.c_int, uint_p)(2, renderbuffers)
        bind = f("glBindRenderbuffer", None, ctypes.c_uint, ctypes.c_uint)
        storage = f("glRenderbufferStorage", None, ctypes.c_uint, ctypes.c_uint, ctypes.c_int, ctypes.c_int)
        attach = f("glFramebufferRenderbuffer", None, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint)
        for renderbuffer, (storage_format, attachment) in zip(
                renderbuffers, ((GL_RGBA8, GL_COLOR_ATTACHMENT0), (GL_DEPTH_COMPONENT24, GL_DEPTH_ATTACHMENT))):
            bind(GL_RENDERBUFFER, renderbuffer)
            storage(GL_RENDERBUFFER, storage_format, size, size)
            attach(GL_FRAMEBUFFER, attachment, GL_RENDERBUFFER, renderbuffer)
        status = f("glCheckFramebufferStatus", ctypes.c_uint, ctypes.c_uint)(GL_FRAMEBUFFER)
        if status != GL_FRAMEBUFFER_COMPLETE:
            raise RuntimeError(f"framebuffer incomplete: status 0x{status:x}")
        self.sphere_vertices, self.sphere_normals = sphere()
        self.sphere_colours = np.tile(np.float32(SPHERE_COLOUR), (len(self.sphere_vertices), 1))
        self.triangle = flat(TRIANGLE, TRIANGLE_Z)
        self.square = flat(SQUARE, SQUARE_Z)
        self.rgb = np.empty((size, size, 3), np.uint8)
        self.depth = np.empty((size, size), np.float32)

    def _draw(self, vertices: np.ndarray, colour: np.ndarray | tuple, normals: np.ndarray | None = None) -> None:
        gl = self.gl
        colours = colour if isinstance(colour, np.ndarray) else np.tile(np.float32(colour), (len(vertices), 1))
        gl.glVertexPointer(3, GL_FLOAT, 0, vertices.ctypes.data)
        gl.glColorPointer(3, GL_FLOAT, 0, colours.ctypes.data)
        if normals is not None:
            gl.glEnableClientState(GL_NORMAL_ARRAY)
            gl.glNormalPointer(GL_FLOAT, 0, normals.ctypes.data)
        gl.glDrawArrays(GL_TRIANGLES, 0, len(vertices))
        if normals is not None:
            gl.glDisableClientState(GL_NORMAL_ARRAY)

    def render(self) -> None:
        """Draw the scene and read colour and depth back into self.rgb / self.depth."""
        gl, size = self.gl, self.size
        gl.glViewport(0, 0, size, size)
        gl.glClearColor(*CLEAR, 1.0)
        gl.glClear(GL_COLOR_BUFFER_BIT | GL_DEPTH_BUFFER_BIT)
        gl.glEnable(GL_DEPTH_TEST)
        gl.glMatrixMode(GL_PROJECTION)
        gl.glLoadIdentity()
        gl.glFrustum(-HALF_WIDTH, HALF_WIDTH, -HALF_WIDTH, HALF_WIDTH, NEAR, FAR)
        gl.glMatrixMode(GL_MODELVIEW)
        gl.glLoadIdentity()
        gl.glTranslatef(0.0, 0.0, -EYE_DISTANCE)
        gl.glEnableClientState(GL_VERTEX_ARRAY)
        gl.glEnableClientState(GL_COLOR_ARRAY)
        gl.glShadeModel(GL_SMOOTH)
        gl.glEnable(GL_LIGHTING)
        gl.glEnable(GL_LIGHT0)
        gl.glEnable(GL_COLOR_MATERIAL)
        gl.glEnable(GL_NORMALIZE)
        gl.glLightfv(GL_LIGHT0, GL_POSITION, (ctypes.c_float * 4)(1.0, 1.0, 1.0, 0.0))  # directional
        self._draw(self.sphere_vertices, self.sphere_colours, self.sphere_normals)
        gl.glDisable(GL_LIGHTING)
        self._draw(self.triangle, (1.0, 0.0, 0.0))
        self._draw(self.square, (0.0, 1.0, 0.0))
        gl.glPixelStorei(GL_PACK_ALIGNMENT, 1)
        gl.glReadPixels(0, 0, size, size, GL_RGB, GL_UNSIGNED_BYTE, self.rgb.ctypes.data)
        gl.glReadPixels(0, 0, size, size, GL_DEPTH_COMPONENT, GL_FLOAT, self.depth.ctypes.data)
        error = gl.glGetError()
        if error:
            raise RuntimeError(f"OpenGL error 0x{error:x}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--frames", type=int, default=100, help="timed render + readback frames, at least")
    parser.add_argument("--min_seconds", type=float, default=0.0, help="keep rendering at least this long")
    args = parser.parse_args()
    context = GLXContext()
    try:
        scene = Scene(context, args.size)
        scene.render()  # first frame: compiles and uploads, not timed
        frames, start = 0, time.perf_counter()
        while frames < args.frames or time.perf_counter() - start < args.min_seconds:
            scene.render()
            frames += 1
        elapsed = time.perf_counter() - start
        args.out_dir.mkdir(parents=True, exist_ok=True)
        np.save(args.out_dir / "rgb.npy", scene.rgb[::-1])  # OpenGL's rows go bottom-up
        np.save(args.out_dir / "depth.npy", scene.depth[::-1])
        info = context.info()
    finally:
        context.close()
    print(
        json.dumps(
            {
                **info.__dict__,
                "size": args.size,
                "frames": frames,
                "frames_per_s": frames / elapsed,
                "triangles": len(scene.sphere_vertices) // 3 + 3,
            }
        )
    )


if __name__ == "__main__":
    main()
