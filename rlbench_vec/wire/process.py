"""Process plumbing shared by the main process and the workers: spawning, dying with the parent,
and catching what a worker says before it can talk over its pipes.

Start-up output: a worker can fail before it reaches our code (the spawn bootstrap re-imports the
user's main module) or die in C code (Qt aborts without a display). Each worker therefore writes its
stderr into a log file while it starts, forwarded live to the real stderr by a thread, and the main
process quotes the file's end when the worker dies before it is ready. Once ready, the worker's
stderr goes back to the terminal.
"""

from __future__ import annotations

import ctypes
import importlib
import multiprocessing as mp
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

SPAWN = mp.get_context("spawn")
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
BOOT_LOG_VAR = "RLBENCH_VEC_BOOT_LOG"
PR_SET_PDEATHSIG = 1
DISPLAY_DIED_EXIT = 75  # a worker exits with this code when its X display died under it
LOG_TAIL_BYTES = 4000


@contextmanager
def child_environment(boot_log: str, backend_environ: Mapping[str, str]) -> Iterator[None]:
    """os.environ for a child spawned now: single-threaded BLAS/OpenMP unless the user chose a
    value (set before it imports numpy), the backend's variables (set before the spawn bootstrap
    re-imports the user's main module, which may import the simulator), and the path of its
    start-up log. The parent's own values come back afterwards."""
    wanted = {name: "1" for name in THREAD_VARS if name not in os.environ}
    wanted.update(backend_environ)
    wanted[BOOT_LOG_VAR] = boot_log
    saved = {name: os.environ.get(name) for name in wanted}
    os.environ.update(wanted)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def bootstrapping() -> bool:
    """True while a spawned child is still importing the parent's main module."""
    return bool(getattr(mp.current_process(), "_inheriting", False))


class BootLog:
    """Redirects this process's stderr (fd 2) into the start-up log, forwarding it to the real
    stderr from a thread, until `release()`."""

    def __init__(self, path: str):
        self._saved = os.dup(2)
        log = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(log, 2)
        os.close(log)
        self._reader = os.open(path, os.O_RDONLY)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._forward, name="rlbench_vec-boot-log", daemon=True)
        self._thread.start()

    def _forward(self) -> None:
        while True:
            stopping = self._stop.is_set()
            data = os.read(self._reader, 1 << 16)
            if data:
                os.write(self._saved, data)
            elif stopping:
                return
            else:
                self._stop.wait(0.05)

    def release(self) -> None:
        os.dup2(self._saved, 2)
        self._stop.set()
        self._thread.join(timeout=2.0)
        os.close(self._reader)
        os.close(self._saved)


_boot_log: BootLog | None = None


def capture_boot_output() -> None:
    """Called when rlbench_vec is imported: in one of our spawned workers (the variable is set),
    send start-up stderr to the log the main process reads if the worker dies starting."""
    global _boot_log
    path = os.environ.pop(BOOT_LOG_VAR, None)  # popped: the worker's own children must not inherit it
    if path and _boot_log is None:
        _boot_log = BootLog(path)


def release_boot_output() -> None:
    global _boot_log
    if _boot_log is not None:
        _boot_log.release()
        _boot_log = None


def log_tail(path: str) -> str:
    try:
        with open(path, "rb") as file:
            file.seek(0, os.SEEK_END)
            file.seek(max(0, file.tell() - LOG_TAIL_BYTES))
            return file.read().decode(errors="replace").strip()
    except OSError:
        return ""


def parent_death_signal() -> Callable[[], int]:
    """A call that makes the kernel SIGKILL the calling process when its parent thread exits. The
    libc lookup happens here, so the call itself is safe in a preexec_fn after fork."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    return lambda: prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def die_with_parent(parent_pid: int, parent_is_main_thread: bool, still_ok: Callable[[], bool] = lambda: True) -> None:
    """Exit when the main process dies, even by SIGKILL: a watchdog thread that sees the worker
    re-parented, plus the kernel's parent-death signal, which also ends a worker stuck in C code.
    That signal fires when the spawning *thread* exits, so it is armed only for a main thread.
    The watchdog also exits with DISPLAY_DIED_EXIT once `still_ok()` turns False (its X display
    died): the main process sees a dead worker and replaces it."""
    if parent_is_main_thread:
        try:
            parent_death_signal()()
        except (OSError, AttributeError):
            pass

    def watch() -> None:
        while os.getppid() == parent_pid:
            if not still_ok():
                os.write(2, b"rlbench_vec worker: its X display died\n")
                os._exit(DISPLAY_DIED_EXIT)
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="rlbench_vec-parent-watchdog", daemon=True).start()


def death_reason(exitcode: int | None) -> str:
    if exitcode is None:
        return "the worker closed its pipe"
    if exitcode < 0:
        return f"the worker was killed by {signal.Signals(-exitcode).name}"
    if exitcode == DISPLAY_DIED_EXIT:
        return "the worker's X display (Xvfb) died"
    return f"the worker exited with code {exitcode}"


def run_entry(entry: str, *args: Any) -> None:
    """A spawned child's target named "package.module:function": the side that spawns the child need not
    import the code that runs in it (the engine starts workers without importing rlbench_vec.worker.main)."""
    module, function = entry.split(":")
    getattr(importlib.import_module(module), function)(*args)
