"""X displays for simulators that need one (CoppeliaSim needs GLX even when headless).

The worker calls `open_display` before it builds its backend and `Display.close` after closing it;
the main process calls `check_display` first, so that a missing Xvfb or $DISPLAY fails before any
worker starts. This module imports no renderer.

Settings (VectorConfig.display):
  None        own Xvfb per worker when the backend needs a display (RLBENCH_PER_PROCESS_XVFB=0: the
              existing $DISPLAY instead)
  "shared"    the existing $DISPLAY, for every worker
  ":0.1"      that display, for every worker (e.g. an X server on a GPU)
  [..]        one setting per worker, element env_index (e.g. one screen per GPU: ":0.0", ":0.1")
"""

from __future__ import annotations

import os
import re
import select
import shutil
import socket
import struct
import subprocess
import tempfile
import time
from typing import BinaryIO

from .errors import BackendUnavailableError, ConfigError
from .process import parent_death_signal

PER_PROCESS_ENV = "RLBENCH_PER_PROCESS_XVFB"
XVFB_ARGS = ("-nolisten", "tcp", "-screen", "0", "1280x1024x24", "+extension", "GLX", "+render", "-noreset")
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 5.0
LOG_LIMIT = 4000  # bytes of Xvfb's output (its end) quoted in an error
OWN_XVFB = "<own Xvfb>"  # a setting that means: start one for this worker (never a display name)
_DISPLAY_NAME = re.compile(r"^[\w.-]*:\d+(\.\d+)?$")  # [host]:display[.screen]


class Display:
    """An X display a worker renders on. Owns its Xvfb process when it started one."""

    def __init__(self, name: str, process: subprocess.Popen | None = None, log: BinaryIO | None = None):
        self.name = name
        self.process = process
        self._log = log

    def alive(self) -> bool:
        """False once the Xvfb this display started has exited."""
        return self.process is None or self.process.poll() is None

    def facts(self) -> dict:
        return {"display": self.name, "xvfb_pid": None if self.process is None else self.process.pid}

    def close(self) -> None:
        """Stop the Xvfb this display started, if any. Safe to call more than once."""
        process, self.process = self.process, None
        if process is not None:
            _stop(process)
        if self._log is not None:
            self._log.close()
            self._log = None


def remove_stale_display_files(facts: dict) -> None:
    """Remove the socket and lock file of an Xvfb that was killed (it cannot clean up itself)."""
    pid, name = facts.get("xvfb_pid"), facts.get("display", "")
    if not pid or not name.startswith(":"):
        return
    try:
        os.kill(pid, 0)
        return  # still running: its files are its own
    except ProcessLookupError:
        pass
    except PermissionError:
        return
    number = name[1:].split(".")[0]
    for path in (f"/tmp/.X11-unix/X{number}", f"/tmp/.X{number}-lock"):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


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
            f"display {name!r} is not an X display name; use None, 'shared', a name like ':0' or ':0.1', "
            "or a list with one of these per env."
        )
    return name


def _setting_for(setting: str | list | tuple | None, env_index: int) -> str | None:
    if isinstance(setting, (list, tuple)):
        if not 0 <= env_index < len(setting):
            raise ConfigError(f"display lists {len(setting)} displays, none for env {env_index}.")
        return setting[env_index]
    return setting


def _xvfb_path() -> str:
    path = shutil.which("Xvfb")
    if path is None:
        raise BackendUnavailableError(
            "this backend renders through X, and each worker starts its own Xvfb, but Xvfb is not installed "
            "(or not on PATH). Install it with `apt-get install xvfb`, or pass display='shared' / a display "
            "name to use an X server you run yourself."
        )
    return path


def _resolve(item: str | None, needs_display: bool) -> str | None:
    """What one setting means here: an existing display's name, OWN_XVFB, or None (no display)."""
    if item is None:
        if not needs_display:
            return None
        return OWN_XVFB if _per_process_xvfb() else _existing_display(f"{PER_PROCESS_ENV}=0")
    if item == "shared":
        return _existing_display("display='shared'")
    return _check_name(item)


def check_display(setting: str | list | tuple | None, needs_display: bool) -> None:
    """Main-process check: raise BackendUnavailableError/ConfigError now rather than in every worker."""
    for item in setting if isinstance(setting, (list, tuple)) else [setting]:
        if _resolve(item, needs_display) == OWN_XVFB:
            _xvfb_path()


def open_display(setting: str | list | tuple | None, needs_display: bool, env_index: int) -> Display | None:
    """The display worker `env_index` should use (None: it needs none). Starts an Xvfb if so configured."""
    name = _resolve(_setting_for(setting, env_index), needs_display)
    if name is None:
        return None
    return start_xvfb() if name == OWN_XVFB else Display(name)


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


def start_xvfb(timeout_s: float = START_TIMEOUT_S) -> Display:
    """Start an Xvfb on a free display number and wait until it accepts connections.

    `-displayfd` lets Xvfb pick the number itself: it takes the first free one under its own lock
    files and reports it only once it listens, so vector envs or torchrun ranks starting together on
    one host never race for a number. Needs Xvfb >= 1.13 (2012). Its output goes to a file (a pipe
    nobody reads could fill up and block it during a long run) and is quoted on failure.
    """
    xvfb = _xvfb_path()
    deadline = time.monotonic() + timeout_s
    # Xvfb's output: an unlinked file, gone with the last descriptor even if the worker is SIGKILLed
    log = tempfile.TemporaryFile(prefix="rlbench_vec-xvfb-")
    read_fd, write_fd = os.pipe()
    try:
        process = subprocess.Popen(
            [xvfb, "-displayfd", str(write_fd), *XVFB_ARGS],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, pass_fds=(write_fd,),
            preexec_fn=_start_in_own_group_dying_with(os.getpid()),
        )
    except BaseException:
        os.close(read_fd)
        log.close()
        raise
    finally:
        os.close(write_fd)  # Xvfb holds the only write end: EOF here means it exited
    display = Display("", process, log)
    try:
        number = _read_display_number(read_fd, process, deadline)
        _wait_until_accepting(number, process, deadline)
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
    display.name = f":{number}"
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


def _wait_until_accepting(number: int, process: subprocess.Popen, deadline: float) -> None:
    """Xvfb reports its number once it listens; make sure an X client really gets in."""
    while not _accepts_connections(number):
        if process.poll() is not None:
            raise BackendUnavailableError(f"Xvfb :{number} exited with code {process.returncode}.")
        if time.monotonic() > deadline:
            raise BackendUnavailableError(f"Xvfb :{number} did not accept connections in time.")
        time.sleep(0.05)


def _accepts_connections(number: int) -> bool:
    """Open an X11 connection over the local socket (no auth: Xvfb runs without -auth) and read
    the server's answer: 1 means the setup succeeded. Same test as xdpyinfo, without needing it."""
    path = f"/tmp/.X11-unix/X{number}"
    for address in (path, "\0" + path):  # filesystem socket, else Linux's abstract one
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(2.0)
                sock.connect(address)
                # byte order 'l', protocol 11.0, empty auth name and data
                sock.sendall(struct.pack("<cxHHHHxx", b"l", 11, 0, 0, 0))
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
