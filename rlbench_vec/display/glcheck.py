"""The OpenGL self-test: which renderer a GLX client really gets on a display (a child process
makes a context and reads it, so the caller loads no GL library), and where NVIDIA's GPUs and GLX
library are. GLXContext is also the test programs' way to render through GLX.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..errors import BackendUnavailableError

NVIDIA_GLX = "libGLX_nvidia.so.0"
PROBE_TIMEOUT_S = 30.0
LOG_LIMIT = 4000  # characters of the child's output quoted in an error


@dataclass(frozen=True)
class NvidiaGpu:
    index: int  # nvidia-smi's numbering: PCI bus order of the GPUs this process can open
    uuid: str | None  # as nvidia-smi prints it ("GPU-..."); None where the driver's /proc files are hidden
    minor: int  # /dev/nvidia<minor>
    model: str


@dataclass(frozen=True)
class GLInfo:
    """What a GLX client got: glGetString's answers, direct rendering, the device UUIDs of
    GL_EXT_memory_object (nvidia-smi's GPU UUIDs on NVIDIA) and whether libglvnd dispatched."""

    vendor: str
    renderer: str
    version: str
    direct: bool
    device_uuids: tuple[str, ...]
    glvnd: bool

    @property
    def nvidia(self) -> bool:
        return "NVIDIA" in self.vendor


def nvidia_gpus() -> list[NvidiaGpu]:
    """The NVIDIA GPUs this process can open, from the driver's /proc files (no GPU library loaded)."""
    gpus: list[NvidiaGpu] = []
    for information in sorted(Path("/proc/driver/nvidia/gpus").glob("*/information")):
        fields = dict(line.split(":", 1) for line in information.read_text().splitlines() if ":" in line)
        fields = {key.strip(): value.strip() for key, value in fields.items()}
        minor = int(fields.get("Device Minor", "-1"))
        if os.path.exists(f"/dev/nvidia{minor}"):
            gpus.append(NvidiaGpu(len(gpus), fields.get("GPU UUID"), minor, fields.get("Model", "")))
    if not gpus:  # /proc/driver/nvidia hidden (some containers): the device nodes alone
        minors = sorted(
            int(m.group(1)) for p in Path("/dev").glob("nvidia*") if (m := re.fullmatch(r"nvidia(\d+)", p.name))
        )
        gpus = [NvidiaGpu(index, None, minor, "") for index, minor in enumerate(minors)]
    return gpus


def nvidia_glx_library() -> str | None:
    """Where the dynamic linker finds NVIDIA's GLX library (libglvnd loads it by name), without loading it."""
    folders = [folder for folder in os.environ.get("LD_LIBRARY_PATH", "").split(":") if folder]
    for folder in folders:
        if os.path.exists(os.path.join(folder, NVIDIA_GLX)):
            return os.path.join(folder, NVIDIA_GLX)
    ldconfig = shutil.which("ldconfig") or "/sbin/ldconfig"
    try:
        cache = subprocess.run([ldconfig, "-p"], check=False, capture_output=True, text=True,
                               timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        cache = ""
    for line in cache.splitlines():
        if line.strip().startswith(NVIDIA_GLX + " ") and "=>" in line:
            return line.rsplit("=>", 1)[1].strip()
    for folder in ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib"):
        if os.path.exists(os.path.join(folder, NVIDIA_GLX)):
            return os.path.join(folder, NVIDIA_GLX)
    return None


def probe_gl(environ: Mapping[str, str], timeout_s: float = PROBE_TIMEOUT_S) -> GLInfo:
    """The OpenGL renderer a GLX client gets with `environ` over this process's environment: a child
    process makes a context and reads it, so this one loads no GL library. Raises
    BackendUnavailableError, quoting the child's output, when it gets no context."""
    root = str(Path(__file__).resolve().parents[2])  # import this very package in the child
    code = (f"import sys; sys.path.insert(0, {root!r}); "
            "from rlbench_vec.display.glcheck import print_gl_info; print_gl_info()")
    where = f"DISPLAY={environ.get('DISPLAY')}" + "".join(
        f" {key}={value}" for key, value in environ.items() if key not in ("DISPLAY", "XAUTHORITY"))
    try:
        result = subprocess.run([sys.executable, "-c", code], check=False, env={**os.environ, **environ},
                                capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise BackendUnavailableError(f"a GLX client ({where}) got no OpenGL context in {timeout_s:.0f} s") from None
    lines = result.stdout.strip().splitlines()
    if result.returncode != 0 or not lines:
        output = (result.stderr + result.stdout).strip()[-LOG_LIMIT:]
        raise BackendUnavailableError(f"a GLX client ({where}) got no OpenGL context (exit code "
                                      f"{result.returncode}): {output or '(no output)'}")
    fields = json.loads(lines[-1])
    return GLInfo(**{**fields, "device_uuids": tuple(fields["device_uuids"])})


def print_gl_info() -> None:
    """The self-test child: one JSON line with the GLInfo of a context on $DISPLAY."""
    context = GLXContext()
    try:
        print(json.dumps(asdict(context.info())), flush=True)
    finally:
        context.close()


class _XVisualInfo(ctypes.Structure):
    _fields_ = [("visual", ctypes.c_void_p), ("visualid", ctypes.c_ulong), ("screen", ctypes.c_int),
                ("depth", ctypes.c_int), ("c_class", ctypes.c_int), ("red_mask", ctypes.c_ulong),
                ("green_mask", ctypes.c_ulong), ("blue_mask", ctypes.c_ulong), ("colormap_size", ctypes.c_int),
                ("bits_per_rgb", ctypes.c_int)]


class _XSetWindowAttributes(ctypes.Structure):
    _fields_ = [("background_pixmap", ctypes.c_ulong), ("background_pixel", ctypes.c_ulong),
                ("border_pixmap", ctypes.c_ulong), ("border_pixel", ctypes.c_ulong), ("bit_gravity", ctypes.c_int),
                ("win_gravity", ctypes.c_int), ("backing_store", ctypes.c_int), ("backing_planes", ctypes.c_ulong),
                ("backing_pixel", ctypes.c_ulong), ("save_under", ctypes.c_int), ("event_mask", ctypes.c_long),
                ("do_not_propagate_mask", ctypes.c_long), ("override_redirect", ctypes.c_int),
                ("colormap", ctypes.c_ulong), ("cursor", ctypes.c_ulong)]


GLX_RGBA, GLX_DOUBLEBUFFER, GLX_RED_SIZE, GLX_GREEN_SIZE, GLX_BLUE_SIZE, GLX_DEPTH_SIZE = 4, 5, 8, 9, 10, 12
GL_VENDOR, GL_RENDERER, GL_VERSION, GL_EXTENSIONS = 0x1F00, 0x1F01, 0x1F02, 0x1F03
GL_NUM_DEVICE_UUIDS_EXT, GL_DEVICE_UUID_EXT, GL_UUID_SIZE_EXT = 0x9596, 0x9597, 16
CW_BORDER_PIXEL, CW_COLORMAP, INPUT_OUTPUT, ALLOC_NONE = 1 << 3, 1 << 13, 1, 0


class GLXContext:
    """A compatibility-profile OpenGL context on $DISPLAY, current in the calling thread, drawing to
    an unmapped window, as GLFW's and Qt's offscreen surfaces do. `gl` is libGL; `function` gives
    entry points beyond OpenGL 1.x. For the self-test and the GLX test programs."""

    def __init__(self, width: int = 16, height: int = 16):
        self.x11 = x11 = ctypes.CDLL("libX11.so.6")
        self.gl = gl = ctypes.CDLL("libGL.so.1")
        display_p, window, visual_p = ctypes.c_void_p, ctypes.c_ulong, ctypes.POINTER(_XVisualInfo)
        x11.XOpenDisplay.restype, x11.XOpenDisplay.argtypes = display_p, [ctypes.c_char_p]
        x11.XDefaultScreen.argtypes = [display_p]
        x11.XRootWindow.restype, x11.XRootWindow.argtypes = window, [display_p, ctypes.c_int]
        x11.XCreateColormap.restype = window
        x11.XCreateColormap.argtypes = [display_p, window, ctypes.c_void_p, ctypes.c_int]
        x11.XCreateWindow.restype = window
        x11.XCreateWindow.argtypes = [display_p, window, ctypes.c_int, ctypes.c_int, ctypes.c_uint, ctypes.c_uint,
                                      ctypes.c_uint, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p, ctypes.c_ulong,
                                      ctypes.POINTER(_XSetWindowAttributes)]
        x11.XDestroyWindow.argtypes = x11.XFreeColormap.argtypes = [display_p, window]
        x11.XFree.argtypes, x11.XCloseDisplay.argtypes = [ctypes.c_void_p], [display_p]
        gl.glXChooseVisual.restype = visual_p
        gl.glXChooseVisual.argtypes = [display_p, ctypes.c_int, ctypes.POINTER(ctypes.c_int)]
        gl.glXCreateContext.restype = ctypes.c_void_p
        gl.glXCreateContext.argtypes = [display_p, visual_p, ctypes.c_void_p, ctypes.c_int]
        gl.glXMakeCurrent.argtypes = [display_p, window, ctypes.c_void_p]
        gl.glXIsDirect.argtypes = gl.glXDestroyContext.argtypes = [display_p, ctypes.c_void_p]
        gl.glXGetProcAddressARB.restype, gl.glXGetProcAddressARB.argtypes = ctypes.c_void_p, [ctypes.c_char_p]
        gl.glGetString.restype, gl.glGetString.argtypes = ctypes.c_char_p, [ctypes.c_uint]

        self._window = self._colormap = self._context = None
        self._display = x11.XOpenDisplay(None)
        if not self._display:
            raise RuntimeError(f"cannot open X display {os.environ.get('DISPLAY')!r}")
        screen = x11.XDefaultScreen(self._display)
        attributes = (ctypes.c_int * 11)(GLX_RGBA, GLX_RED_SIZE, 8, GLX_GREEN_SIZE, 8, GLX_BLUE_SIZE, 8,
                                         GLX_DEPTH_SIZE, 24, GLX_DOUBLEBUFFER, 0)
        visual = gl.glXChooseVisual(self._display, screen, attributes)
        if not visual:
            self.close()
            raise RuntimeError("glXChooseVisual found no RGB visual with a 24-bit depth buffer")
        root = x11.XRootWindow(self._display, screen)
        self._colormap = x11.XCreateColormap(self._display, root, visual.contents.visual, ALLOC_NONE)
        window_attributes = _XSetWindowAttributes(colormap=self._colormap)
        self._window = x11.XCreateWindow(self._display, root, 0, 0, width, height, 0, visual.contents.depth,
                                         INPUT_OUTPUT, visual.contents.visual, CW_BORDER_PIXEL | CW_COLORMAP,
                                         ctypes.byref(window_attributes))
        self._context = gl.glXCreateContext(self._display, visual, None, True)
        x11.XFree(visual)
        if not self._context or not gl.glXMakeCurrent(self._display, self._window, self._context):
            self.close()
            raise RuntimeError("glXCreateContext or glXMakeCurrent failed")

    def function(self, name: str, restype: Any, *argtypes: Any) -> Callable:
        address = self.gl.glXGetProcAddressARB(name.encode())
        if not address:
            raise RuntimeError(f"{name} is not available")
        return ctypes.CFUNCTYPE(restype, *argtypes)(address)

    def info(self) -> GLInfo:
        def string(name: int) -> str:
            return (self.gl.glGetString(name) or b"").decode(errors="replace")

        uuids: list[str] = []
        if "GL_EXT_memory_object" in string(GL_EXTENSIONS).split():
            count = ctypes.c_int(0)
            self.gl.glGetIntegerv(GL_NUM_DEVICE_UUIDS_EXT, ctypes.byref(count))
            get = self.function("glGetUnsignedBytei_vEXT", None, ctypes.c_uint, ctypes.c_uint,
                                ctypes.POINTER(ctypes.c_ubyte))
            for index in range(count.value):
                data = (ctypes.c_ubyte * GL_UUID_SIZE_EXT)()
                get(GL_DEVICE_UUID_EXT, index, data)
                text = bytes(data).hex()
                uuids.append(f"GPU-{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}")
        direct = bool(self.gl.glXIsDirect(self._display, self._context))
        glvnd = "libGLdispatch.so" in Path("/proc/self/maps").read_text()
        return GLInfo(string(GL_VENDOR), string(GL_RENDERER), string(GL_VERSION), direct, tuple(uuids), glvnd)

    def close(self) -> None:
        if self._context:
            self.gl.glXMakeCurrent(self._display, 0, None)
            self.gl.glXDestroyContext(self._display, self._context)
        if self._window:
            self.x11.XDestroyWindow(self._display, self._window)
        if self._colormap:
            self.x11.XFreeColormap(self._display, self._colormap)
        if self._display:
            self.x11.XCloseDisplay(self._display)
        self._display = self._window = self._colormap = self._context = None
