"""X displays for simulators that render through GLX (CoppeliaSim 4.1 has no EGL), with a start-up
self-test of the OpenGL renderer a GLX client really gets on them (`glcheck`), on own Xvfb servers
(`xvfb`). This module chooses and opens a worker's display; it may import errors, distributed, `wire` and its own
modules, never the engine, the worker side, a backend or a renderer.

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
With several GPUs, worker i renders on GPU i mod their count (under torchrun, of its local rank's share of them).

Each own Xvfb accepts only clients holding its MIT cookie (-auth, a private Xauthority file exported
to its worker as XAUTHORITY). Use from the engine:
  main process  check_display(setting, needs_display) before any worker starts; xvfb.sweep_stale_displays()
                at start; xvfb.remove_stale_display_files(facts) after a worker died or closed
  worker        open_display(setting, needs_display, worker_index) before importing the simulator (it
                exports DISPLAY, XAUTHORITY and the GLX vendor); report Display.facts(); poll
                Display.alive(); Display.close() after the simulator
This module chooses the renderer; rlbench_vec.display.xvfb runs the Xvfbs and rlbench_vec.display.glcheck the
self-test (a child process: no GL library is loaded here).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

from ..distributed import share_of_rank
from ..errors import BackendUnavailableError, ConfigError
from .glcheck import NVIDIA_GLX, GLInfo, NvidiaGpu, nvidia_glx_library, nvidia_gpus, probe_gl
from .xvfb import Display, start_xvfb, xvfb_path

PER_PROCESS_ENV = "RLBENCH_PER_PROCESS_XVFB"
AUTO, GPU, CPU = XVFB_MODES = ("xvfb", "xvfb-gpu", "xvfb-cpu")
DETAIL_LIMIT = 600  # characters of a self-test failure kept in facts()
VENDOR_ENV = "__GLX_VENDOR_LIBRARY_NAME"
_DISPLAY_NAME = re.compile(r"^[\w.-]*:\d+(\.\d+)?$")  # [host]:display[.screen]


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


def check_display(setting: str | list | tuple | None, needs_display: bool) -> None:
    """Main-process check: raise BackendUnavailableError/ConfigError now rather than in every worker."""
    for item in setting if isinstance(setting, (list, tuple)) else [setting]:
        mode = _resolve(item, needs_display)
        if mode in XVFB_MODES:
            xvfb_path()
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
            mine = share_of_rank(len(gpus))  # under torchrun, this local rank's GPUs
            _use_gpu(display, gpus, gpus[mine[worker_index % len(mine)]])
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
