"""X displays for simulators that render through GLX (CoppeliaSim 4.1 has no EGL), with a start-up
self-test of the OpenGL renderer a GLX client really gets on them.

GPU rendering with no X server on the GPU: inside a plain Xvfb, a GLX client whose environment
holds __GLX_VENDOR_LIBRARY_NAME=nvidia gets NVIDIA's GLX library through libglvnd, and that renders
on the GPU (docs/headless_gpu.md). Without an NVIDIA GPU, Mesa's llvmpipe renders on the CPU.

Settings (VectorConfig.display; a list gives one per worker):
  None        own Xvfb per worker when the backend needs a display, as "xvfb" (RLBENCH_PER_PROCESS_XVFB=0:
              the existing $DISPLAY instead)
  "xvfb"      own Xvfb; NVIDIA GPU rendering where an NVIDIA GPU and NVIDIA's GLX library are present and
              the self-test gets it, else Mesa on the CPU (facts()["gl_fallback"] says why)
  "xvfb-gpu"  own Xvfb, NVIDIA GPU rendering, else a BackendUnavailableError at start saying what is missing
  "xvfb-cpu"  own Xvfb, Mesa's llvmpipe on the CPU
  "shared"    the existing $DISPLAY, for every worker
  ":0.1"      that display (e.g. an X server on a GPU)
With several GPUs, worker i renders on GPU i mod their count.

Each own Xvfb accepts only clients holding its MIT cookie (-auth, a private Xauthority file exported
to its worker as XAUTHORITY). Use from the engine:
  main process  check_display(setting, needs_display) before any worker starts; sweep_stale_displays()
                at start; remove_stale_display_files(facts) after a worker died or closed
  worker        open_display(setting, needs_display, worker_index) before importing the simulator (it
                exports DISPLAY, XAUTHORITY and the GLX vendor); report Display.facts(); poll
                Display.alive(); Display.close() after the simulator
This module loads no GL library itself: the self-test is a child process.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import secrets
import select
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, BinaryIO

from .errors import BackendUnavailableError, ConfigError
from .process import parent_death_signal
from .shm import pid_namespace

PER_PROCESS_ENV = "RLBENCH_PER_PROCESS_XVFB"
AUTO, GPU, CPU = XVFB_MODES = ("xvfb", "xvfb-gpu", "xvfb-cpu")
XVFB_ARGS = ("-nolisten", "tcp", "-screen", "0", "1280x1024x24", "+extension", "GLX", "+render", "-noreset")
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 5.0
GONE_WAIT_S = 2.0  # a SIGKILLed worker's Xvfb gets its parent-death SIGKILL a moment later
LOG_LIMIT = 4000  # bytes of Xvfb's output (its end) quoted in an error
DETAIL_LIMIT = 600  # characters of a self-test failure kept in facts()
X11_SOCKET = "/tmp/.X11-unix/X{}"
DIR_PREFIX = "rlbench_vec-x11-"  # + owner pid + pid namespace: a display's Xauthority and record
VENDOR_ENV = "__GLX_VENDOR_LIBRARY_NAME"
NVIDIA_GLX = "libGLX_nvidia.so.0"
COOKIE_NAME = b"MIT-MAGIC-COOKIE-1"
FAMILY_WILD = 0xFFFF  # an Xauthority entry for any host and (empty number) any display
_DISPLAY_NAME = re.compile(r"^[\w.-]*:\d+(\.\d+)?$")  # [host]:display[.screen]
_OWN_DIR = re.compile(rf"^{DIR_PREFIX}(\d+)-(\d+)-")


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


class Display:
    """An X display a worker renders on. Owns its Xvfb process when it started one."""

    def __init__(self, name: str, process: subprocess.Popen | None = None, log: BinaryIO | None = None,
                 directory: str | None = None):
        self.name = name
        self.process = process
        self.environ: dict[str, str] = {"DISPLAY": name}  # what a GLX client on it needs exported
        self.gl: GLInfo | None = None
        self.details: dict[str, Any] = {}  # self-test results: gl_mode, gpu, gl_gpu, gl_fallback, gl_error
        self._log = log
        self._record: dict[str, Any] = {}
        if process is not None:
            self._record = {
                "xvfb_pid": process.pid,
                "xvfb_start": _process_start(process.pid),
                "display_dir": directory,
                "owner_pid": os.getpid(),
                "owner_start": _process_start(os.getpid()),
            }

    @property
    def xauthority(self) -> str | None:
        directory = self._record.get("display_dir")
        return None if directory is None else os.path.join(directory, "Xauthority")

    def _numbered(self, number: int) -> None:
        """The own Xvfb reported its number: name the display and record it beside its Xauthority."""
        self.name = self._record["display"] = f":{number}"
        self.environ = {"DISPLAY": self.name, "XAUTHORITY": self.xauthority or ""}
        record = Path(self._record["display_dir"]) / "display.json"
        record.write_text(json.dumps(self._record))

    def use(self, environ: Mapping[str, str], gl: GLInfo | None, **details: Any) -> None:
        self.environ, self.gl = dict(environ), gl
        self.details.update(details)

    def alive(self) -> bool:
        """False once the Xvfb this display started has exited (a display it did not start: always True)."""
        return self.process is None or self.process.poll() is None

    def facts(self) -> dict[str, Any]:
        """Small picklable values for the main process: the display, its Xvfb (what
        remove_stale_display_files needs) and the renderer the self-test got."""
        facts: dict[str, Any] = {"display": self.name, **self._record, **self.details}
        if self.gl is not None:
            facts.update(gl_vendor=self.gl.vendor, gl_renderer=self.gl.renderer, gl_version=self.gl.version,
                         gl_direct=self.gl.direct)
        return facts

    def close(self) -> None:
        """Stop the Xvfb this display started, if any, and remove its files. Safe to call more than once."""
        process, self.process = self.process, None
        if process is not None:
            _stop(process)
            remove_stale_display_files(self._record)
        if self._log is not None:
            self._log.close()
            self._log = None


# ---------------------------------------------------------------------------------------------- settings

def _per_process_xvfb() -> bool:
    return os.environ.get(PER_PROCESS_ENV, "1") != "0"


def _existing_display(why: str) -> str:
    name = os.environ.get("DISPLAY")
    if not name:
        raise BackendUnavailableError(
            f"{why} uses the existing X display, but $DISPLAY is not set. Start an X server (e.g. "
            "`Xvfb :99 -screen 0 1280x1024x24 +extension GLX +render -noreset &` then `export DISPLAY=:99`), "
            f"or use display=None with {PER_PROCESS_ENV} unset to give each worker its own Xvfb."
        )
    return name


def _check_name(name: str) -> str:
    if not _DISPLAY_NAME.match(name):
        raise ConfigError(
            f"display {name!r} is not an X display name or mode; use None, 'xvfb', 'xvfb-gpu', 'xvfb-cpu', "
            "'shared', a name like ':0' or ':0.1', or a list with one of these per worker."
        )
    return name


def _setting_for(setting: str | list | tuple | None, worker_index: int) -> str | None:
    if isinstance(setting, (list, tuple)):
        if not 0 <= worker_index < len(setting):
            raise ConfigError(f"display lists {len(setting)} displays, none for worker {worker_index}.")
        return setting[worker_index]
    return setting


def _resolve(item: str | None, needs_display: bool) -> str | None:
    """What one setting means here: one of XVFB_MODES, an existing display's name, or None (no display)."""
    if item is None:
        if not needs_display:
            return None
        return AUTO if _per_process_xvfb() else _existing_display(f"{PER_PROCESS_ENV}=0")
    if item in XVFB_MODES:
        return item
    if item == "shared":
        return _existing_display("display='shared'")
    return _check_name(item)


def _xvfb_path() -> str:
    path = shutil.which("Xvfb")
    if path is None:
        raise BackendUnavailableError(
            "this backend renders through X, and each worker starts its own Xvfb, but Xvfb is not installed "
            "(or not on PATH). Install it with `apt-get install xvfb`, or pass display='shared' / a display "
            "name to use an X server you run yourself."
        )
    return path


def check_display(setting: str | list | tuple | None, needs_display: bool) -> None:
    """Main-process check: raise BackendUnavailableError/ConfigError now rather than in every worker."""
    for item in setting if isinstance(setting, (list, tuple)) else [setting]:
        mode = _resolve(item, needs_display)
        if mode in XVFB_MODES:
            _xvfb_path()
        if mode == GPU:
            missing = _missing_for_gpu(nvidia_gpus(), nvidia_glx_library())
            if missing:
                raise BackendUnavailableError(_gpu_unavailable(missing))


def open_display(setting: str | list | tuple | None, needs_display: bool, worker_index: int) -> Display | None:
    """The display worker `worker_index` renders on (None: it needs none), self-tested, with its
    variables (DISPLAY, XAUTHORITY, the GLX vendor) exported into os.environ: call it in the worker
    before the simulator is imported. Starts an Xvfb if so configured."""
    mode = _resolve(_setting_for(setting, worker_index), needs_display)
    if mode is None:
        return None
    display = start_xvfb() if mode in XVFB_MODES else Display(mode)
    try:
        _set_up_gl(display, mode, worker_index)
    except BaseException:
        display.close()
        raise
    os.environ.update(display.environ)
    return display


# ------------------------------------------------------------------------------------ renderer choice

def _set_up_gl(display: Display, mode: str, worker_index: int) -> None:
    if mode not in XVFB_MODES:  # an X server of the user's: report what it renders with, change nothing
        _use_whatever_renders(display, display.environ, gl_mode="unchanged")
        return
    mesa = {**display.environ, VENDOR_ENV: "mesa"}
    if mode == CPU:
        _use_whatever_renders(display, mesa, gl_mode="mesa")
        return
    gpus = nvidia_gpus()
    missing = _missing_for_gpu(gpus, nvidia_glx_library())
    if not missing:
        try:
            _use_gpu(display, gpus, gpus[worker_index % len(gpus)])
            return
        except BackendUnavailableError as error:
            missing = [str(error)]
    if mode == GPU:
        raise BackendUnavailableError(_gpu_unavailable(missing))
    _use_whatever_renders(display, mesa, gl_mode="mesa", gl_fallback="; ".join(missing)[:DETAIL_LIMIT])


def _use_whatever_renders(display: Display, environ: dict[str, str], **details: Any) -> None:
    """Use `environ` whatever the self-test finds: a failure is reported in facts, and the simulator's
    own error follows when it starts."""
    try:
        display.use(environ, probe_gl(environ), **details)
    except BackendUnavailableError as error:
        display.use(environ, None, gl_error=str(error)[:DETAIL_LIMIT], **details)


def _use_gpu(display: Display, gpus: list[NvidiaGpu], gpu: NvidiaGpu) -> None:
    """Render through NVIDIA's GLX library; with several GPUs, on `gpu` if a selector gets there."""
    environ = {**display.environ, VENDOR_ENV: "nvidia"}
    info = probe_gl(environ)
    if not info.nvidia:
        raise BackendUnavailableError(_not_nvidia(info))
    if len(gpus) > 1 and _gpu_index(info, gpus) not in (gpu.index, None):
        for select_gpu in _GPU_SELECTORS:
            candidate = {**environ, **select_gpu(gpu)}
            try:
                candidate_info = probe_gl(candidate)
            except BackendUnavailableError:
                continue
            if candidate_info.nvidia and _gpu_index(candidate_info, gpus) == gpu.index:
                environ, info = candidate, candidate_info
                break
    display.use(environ, info, gl_mode="nvidia", gpu=gpu.index, gl_gpu=_gpu_index(info, gpus))


# How a GLX client in Xvfb picks one of several GPUs is not documented for this mode. Where the
# driver's own choice is another GPU, these are tried in turn; a context reporting the asked GPU's
# UUID keeps its variables, else the worker stays on the driver's choice (facts: gpu vs gl_gpu).
_GPU_SELECTORS: tuple[Callable[[NvidiaGpu], dict[str, str]], ...] = (
    lambda gpu: {"__NV_PRIME_RENDER_OFFLOAD": "1", "__NV_PRIME_RENDER_OFFLOAD_PROVIDER": f"NVIDIA-G{gpu.index}"},
    lambda gpu: {"CUDA_VISIBLE_DEVICES": gpu.uuid or str(gpu.index)},
)


def _gpu_index(info: GLInfo, gpus: list[NvidiaGpu]) -> int | None:
    """The GPU a context renders on, by its device UUID; None where it reports none we know."""
    return next((gpu.index for gpu in gpus if gpu.uuid in info.device_uuids), None)


def _missing_for_gpu(gpus: list[NvidiaGpu], library: str | None) -> list[str]:
    missing = []
    if not gpus:
        missing.append(
            "no NVIDIA GPU is visible (no /dev/nvidia0): give the container the GPUs (docker run --gpus all)"
        )
    if library is None:
        missing.append(
            f"NVIDIA's GLX library {NVIDIA_GLX} is not installed: in a container, set NVIDIA_DRIVER_CAPABILITIES "
            "to include graphics (e.g. -e NVIDIA_DRIVER_CAPABILITIES=all); on a host, install the driver's "
            "OpenGL libraries (e.g. libnvidia-gl-<version>)"
        )
    return missing


def _gpu_unavailable(missing: list[str]) -> str:
    return (f"display='xvfb-gpu' asks for NVIDIA GPU rendering in each worker's Xvfb, which this machine cannot "
            f"give: {'; '.join(missing)}. display='xvfb' renders on the GPU where it works and on the CPU "
            "otherwise; 'xvfb-cpu' always on the CPU.")


def _not_nvidia(info: GLInfo) -> str:
    why = ("libGL.so.1 is not libglvnd's, so it ignores " + VENDOR_ENV + ": install libglvnd (apt-get install "
           "libgl1 libglx0)") if not info.glvnd else (
        "NVIDIA's GLX library did not take this Xvfb's clients (GLX on an X server without NVIDIA's driver needs "
        "a recent NVIDIA driver; see docs/headless_gpu.md)")
    return f"with {VENDOR_ENV}=nvidia a GLX client got {info.renderer!r} from {info.vendor!r}: {why}"


# ------------------------------------------------------------------------------------- NVIDIA lookup

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


# ------------------------------------------------------------------------------------------ self-test

def probe_gl(environ: Mapping[str, str], timeout_s: float = START_TIMEOUT_S) -> GLInfo:
    """The OpenGL renderer a GLX client gets with `environ` over this process's environment: a child
    process makes a context and reads it, so this one loads no GL library. Raises
    BackendUnavailableError, quoting the child's output, when it gets no context."""
    root = str(Path(__file__).resolve().parents[1])  # import this very package in the child
    code = f"import sys; sys.path.insert(0, {root!r}); from rlbench_vec.display import _print_gl_info; _print_gl_info()"
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


def _print_gl_info() -> None:
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


# --------------------------------------------------------------------------------------------- Xvfb

def _start_in_own_group_dying_with(parent_pid: int):
    """A preexec_fn for the Xvfb child: SIGKILL it when its parent dies (even by SIGKILL: the kernel
    sends PR_SET_PDEATHSIG when the thread that forked it exits, so call this from the worker's main
    thread), and give it its own process group so a Ctrl-C in the terminal does not reach it first."""
    arm_parent_death_signal = parent_death_signal()  # looked up before fork: the child only calls it

    def preexec() -> None:
        os.setpgid(0, 0)
        arm_parent_death_signal()
        if os.getppid() != parent_pid:  # the parent died before the signal was armed
            os._exit(1)

    return preexec


def _write_xauthority(path: str, cookie: bytes) -> None:
    """One MIT-MAGIC-COOKIE-1 entry for any host and display: written before Xvfb picks its number."""
    def counted(data: bytes) -> bytes:
        return struct.pack(">H", len(data)) + data

    entry = struct.pack(">H", FAMILY_WILD) + counted(b"") + counted(b"") + counted(COOKIE_NAME) + counted(cookie)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as file:
        file.write(entry)


def start_xvfb(timeout_s: float = START_TIMEOUT_S) -> Display:
    """Start an Xvfb on a free display number and wait until it accepts connections.

    `-displayfd` lets Xvfb pick the number itself: it takes the first free one under its own lock
    files and reports it only once it listens, so vector envs or torchrun ranks starting together on
    one host never race for a number. Needs Xvfb >= 1.13 (2012). `-auth` makes it accept only
    clients holding a fresh random cookie, kept in a private directory (Display.environ's
    XAUTHORITY). Its output goes to a file (a pipe nobody reads could fill up and block it during a
    long run) and is quoted on failure. The display's GLX vendor is chosen by open_display.
    """
    xvfb = _xvfb_path()
    deadline = time.monotonic() + timeout_s
    directory = tempfile.mkdtemp(prefix=f"{DIR_PREFIX}{os.getpid()}-{pid_namespace()}-")
    cookie = secrets.token_bytes(16)
    # Xvfb's output: an unlinked file, gone with the last descriptor even if the worker is SIGKILLed
    log = tempfile.TemporaryFile(prefix="rlbench_vec-xvfb-")  # noqa: SIM115 (the Display owns it)
    read_fd, write_fd = os.pipe()
    try:
        _write_xauthority(os.path.join(directory, "Xauthority"), cookie)
        process = subprocess.Popen(
            [xvfb, "-displayfd", str(write_fd), "-auth", os.path.join(directory, "Xauthority"), *XVFB_ARGS],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, pass_fds=(write_fd,),
            preexec_fn=_start_in_own_group_dying_with(os.getpid()),  # noqa: PLW1509 (async-signal-safe calls only)
        )
    except BaseException:
        os.close(read_fd)
        log.close()
        shutil.rmtree(directory, ignore_errors=True)
        raise
    finally:
        os.close(write_fd)  # Xvfb holds the only write end: EOF here means it exited
    display = Display("", process, log, directory)
    try:
        number = _read_display_number(read_fd, process, deadline)
        display._numbered(number)
        _wait_until_accepting(number, cookie, process, deadline)
    except BackendUnavailableError as error:
        size = os.fstat(log.fileno()).st_size
        output = os.pread(log.fileno(), LOG_LIMIT, max(0, size - LOG_LIMIT)).decode(errors="replace").strip()
        display.close()
        raise BackendUnavailableError(f"{error}\n--- Xvfb output ---\n{output or '(none)'}") from None
    except BaseException:
        display.close()
        raise
    finally:
        os.close(read_fd)
    return display


def _read_display_number(read_fd: int, process: subprocess.Popen, deadline: float) -> int:
    data = b""
    while not data.endswith(b"\n"):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise BackendUnavailableError(f"Xvfb (pid {process.pid}) reported no display number in time.")
        ready, _, _ = select.select([read_fd], [], [], remaining)
        if ready:
            chunk = os.read(read_fd, 64)
            if not chunk:
                raise BackendUnavailableError(f"Xvfb exited with code {process.wait()} before it was ready.")
            data += chunk
    return int(data)


def _wait_until_accepting(number: int, cookie: bytes, process: subprocess.Popen, deadline: float) -> None:
    """Xvfb reports its number once it listens; make sure an X client with the cookie really gets in."""
    while not x_connection_accepted(number, cookie):
        if process.poll() is not None:
            raise BackendUnavailableError(f"Xvfb :{number} exited with code {process.returncode}.")
        if time.monotonic() > deadline:
            raise BackendUnavailableError(f"Xvfb :{number} did not accept connections in time.")
        time.sleep(0.05)


def _padded(field: bytes) -> bytes:
    return field + b"\0" * (-len(field) % 4)  # X11 pads every field to 4 bytes


def x_connection_accepted(number: int, cookie: bytes | None) -> bool:
    """Open an X11 connection to local display `number`, offering `cookie` (MIT-MAGIC-COOKIE-1) or no
    authorization, and read the server's answer: 1 means the setup succeeded. The test xdpyinfo
    makes, without needing it."""
    name, data = (COOKIE_NAME, cookie) if cookie else (b"", b"")
    request = struct.pack("<cxHHHHxx", b"l", 11, 0, len(name), len(data)) + _padded(name) + _padded(data)
    path = X11_SOCKET.format(number)
    for address in (path, "\0" + path):  # filesystem socket, else Linux's abstract one
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(2.0)
                sock.connect(address)
                sock.sendall(request)
                return sock.recv(1) == b"\x01"
        except OSError:
            continue
    return False


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# ------------------------------------------------------------------------------------ stale files

def _process_start(pid: int) -> int | None:
    """When a live (not zombie) process started, in clock ticks after boot; None when there is none.
    With the pid, it tells a process from a later one that reuses the pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    state, *fields = stat[stat.rindex(")") + 2:].split()
    return None if state in ("Z", "X") else int(fields[18])


def _running(pid: int, start: int | None) -> bool:
    started = _process_start(pid)
    return started is not None and (start is None or started == start)


def _listening(number: int) -> bool:
    """A server listens on the socket file (maybe a new one on that number, or one of another PID
    namespace sharing /tmp)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        try:
            sock.connect(X11_SOCKET.format(number))
            return True
        except OSError:
            return False


def remove_stale_display_files(facts: Mapping[str, Any], wait_s: float = GONE_WAIT_S) -> bool:
    """Once an own Xvfb is gone, remove what it leaves when killed: its socket in /tmp/.X11-unix,
    which only a clean exit removes (with -displayfd Xvfb takes no /tmp/.X<n>-lock file), unless a
    server listens there again; and its private directory. `facts` is Display.facts() (or the record
    a worker left); waits up to `wait_s` for the Xvfb to die. Returns False, touching nothing, while
    it still runs; True otherwise."""
    pid, name = facts.get("xvfb_pid"), facts.get("display") or ""
    deadline = time.monotonic() + wait_s
    while pid and _running(pid, facts.get("xvfb_start")):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    if pid and name.startswith(":"):
        number = int(name[1:].split(".")[0])
        if not _listening(number):  # a new Xvfb binding this number now would replace the file anyway
            try:
                os.unlink(X11_SOCKET.format(number))
            except FileNotFoundError:
                pass
    directory = facts.get("display_dir")
    if directory and os.path.basename(directory).startswith(DIR_PREFIX):
        shutil.rmtree(directory, ignore_errors=True)
    return True


def sweep_stale_displays() -> list[str]:
    """Remove what own Xvfbs of dead workers of this PID namespace left behind (workers killed before
    they reported their facts, or together with their main process). Returns the directories swept."""
    swept = []
    for directory in Path(tempfile.gettempdir()).glob(f"{DIR_PREFIX}*"):
        match = _OWN_DIR.match(directory.name)
        if match is None or int(match.group(2)) != pid_namespace():
            continue
        try:
            record = json.loads((directory / "display.json").read_text())
        except (OSError, ValueError):
            record = {"display_dir": str(directory)}  # the worker died before its Xvfb had a number
        if _running(int(match.group(1)), record.get("owner_start")):
            continue
        if remove_stale_display_files({**record, "display_dir": str(directory)}, wait_s=0.0):
            swept.append(str(directory))
    return swept
