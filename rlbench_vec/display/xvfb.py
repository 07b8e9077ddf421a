"""Own Xvfb servers: start one on a free display number, accepting only clients with its cookie,
stop it, and remove what a killed one leaves behind (its socket, its private directory), also for
workers that died with their main process.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import select
import shutil
import socket
import struct
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO

from ..errors import BackendUnavailableError
from ..wire.process import parent_death_signal
from ..wire.shm import pid_namespace
from .glcheck import GLInfo

XVFB_ARGS = ("-nolisten", "tcp", "-screen", "0", "1280x1024x24", "+extension", "GLX", "+render", "-noreset")
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 5.0
GONE_WAIT_S = 2.0  # a SIGKILLed worker's Xvfb gets its parent-death SIGKILL a moment later
LOG_LIMIT = 4000  # bytes of Xvfb's output (its end) quoted in an error
X11_SOCKET = "/tmp/.X11-unix/X{}"
DIR_PREFIX = "rlbench_vec-x11-"  # + owner pid + pid namespace: a display's Xauthority and record
COOKIE_NAME = b"MIT-MAGIC-COOKIE-1"
FAMILY_WILD = 0xFFFF  # an Xauthority entry for any host and (empty number) any display
_OWN_DIR = re.compile(rf"^{DIR_PREFIX}(\d+)-(\d+)-")


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


def xvfb_path() -> str:
    path = shutil.which("Xvfb")
    if path is None:
        raise BackendUnavailableError(
            "this backend renders through X, and each worker starts its own Xvfb, but Xvfb is not installed "
            "(or not on PATH). Install it with `apt-get install xvfb`, or pass display='shared' / a display "
            "name to use an X server you run yourself."
        )
    return path


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
    xvfb = xvfb_path()
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
