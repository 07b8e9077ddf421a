import os
import resource
import socket
import threading

from double_log import record
from pyrep.errors import PyRepError

# What Qt 5 writes before it aborts when its xcb platform plugin cannot reach the display
# (RLBench #139, #287; PyRep #258).
QT_NO_DISPLAY = (
    'qt.qpa.xcb: could not connect to display {display}\n'
    'qt.qpa.plugin: Could not load the Qt platform plugin "xcb" in "{plugin_path}" even though it was found.\n'
    'This application failed to start because no Qt platform plugin could be initialized. '
    'Reinstalling the application may fix this problem.\n\n'
    'Available platform plugins are: eglfs, linuxfb, minimal, minimalegl, offscreen, vnc, webgl, xcb.\n\n'
)


def _x_server_reachable(display: str) -> bool:
    """What CoppeliaSim's Qt needs first: a local X server socket for DISPLAY (':N' or ':N.S')."""
    host, _, number = display.partition(":")
    if host:
        return True  # a remote display: not checked by the double
    path = f"/tmp/.X11-unix/X{number.split('.')[0]}"
    for address in (path, "\0" + path):
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.connect(address)
                return True
        except OSError:
            continue
    return False


def _abort_like_qt(display: str) -> None:
    """Qt's message on fd 2, then SIGABRT: the process dies, no Python exception is raised."""
    message = QT_NO_DISPLAY.format(display=display, plugin_path=os.environ.get("QT_QPA_PLATFORM_PLUGIN_PATH", ""))
    os.write(2, message.encode())
    resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))  # no core file
    os.abort()


_running = []  # the instances launched in this process and not shut down


class PyRep(object):
    """Checks the rules the real one enforces by crashing: an X display, one sim thread, and one
    CoppeliaSim running per process (PyRep #11, #64: a second one in the process does not start)."""

    def __init__(self):
        self._sim_thread = None

    def launch(self, scene_file: str = "", headless: bool = False, responsive_ui: bool = False,
               blocking: bool = False, verbosity=None) -> None:
        display = os.environ.get("DISPLAY", "")
        if not display or not _x_server_reachable(display):
            _abort_like_qt(display)
        if _running:
            raise PyRepError("a CoppeliaSim instance already runs in this process: each PyRep needs its own process")
        _running.append(self)
        self._sim_thread = threading.get_ident()
        record("launch", display=display, headless=headless,
               main_thread=threading.current_thread() is threading.main_thread())

    def check_thread(self) -> None:
        if threading.get_ident() != self._sim_thread:
            raise PyRepError("PyRep called from a thread other than the one that launched it")

    def step(self) -> None:
        self.check_thread()

    def shutdown(self) -> None:
        self.check_thread()
        if self in _running:
            _running.remove(self)
        record("shutdown")
