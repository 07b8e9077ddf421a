"""Ctrl-C inside a vector env's call, raised only where it leaves nothing half done.

Python raises KeyboardInterrupt between any two bytecodes: between reading replies from a pipe and
taking them in, or between writing a worker's command and recording it, and then the engine waits for
a reply that was already read, or drops one it never expected. While a vector env exists, SIGINT goes
to `on_sigint` (in place of Python's default handler, only if that one is installed). Outside the
vector envs' calls it raises at once, as Python's own handler does. Inside a call made from the main
thread, it is held back until the call waits for workers (`wait`: nothing is half done there) or
returns, and raised then.

CPython swallows an exception raised inside a finalizer (a `__del__` such as a pipe Connection's as a worker
starts, a weakref callback such as importlib's after each import, a generator the collector closes): it prints
"Exception ignored in ..." and goes on. A Ctrl-C whose handler runs there would be lost, and the program would
run on. While a vector env (or a command, through cli.run_main) holds SIGINT, `keep_swallowed_interrupts` puts a
hook in front of sys.unraisablehook that sends SIGINT again instead: its handler runs once the finalizer is
over, raising or holding the Ctrl-C back as it would have.
"""

from __future__ import annotations

import _thread
import functools
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

MAIN_THREAD = threading.main_thread().ident
T = TypeVar("T")


class _State:
    __slots__ = ("users", "depth", "waiting", "held", "keepers", "next_hook")

    def __init__(self) -> None:
        self.users = 0  # vector envs alive that installed on_sigint
        self.depth = 0  # calls in progress in the main thread
        self.waiting = False  # the main thread waits for workers: an interrupt loses nothing there
        self.held = False  # an interrupt arrived while a call was not waiting
        self.keepers = 0  # vector envs and commands that keep a swallowed interrupt
        self.next_hook: Callable[[Any], object] = sys.unraisablehook  # the hook that keep_swallowed_interrupts wraps


STATE = _State()  # an instance, not class attributes: writing those invalidates caches


def on_sigint(signum: int, frame: Any) -> None:
    if STATE.depth and not STATE.waiting:
        STATE.held = True
        return
    raise KeyboardInterrupt


def install() -> bool:
    """A vector env starts: take over SIGINT from Python's default handler (never from another one).
    Returns whether this env counts as a user of on_sigint (pass it to `uninstall`)."""
    if threading.get_ident() != MAIN_THREAD:
        return False
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, on_sigint)
    if signal.getsignal(signal.SIGINT) is not on_sigint:
        return False
    STATE.users += 1
    keep_swallowed_interrupts()
    return True


def uninstall(counted: bool) -> None:
    """A vector env closed: the last one that counted as a user gives SIGINT back to Python."""
    if not counted or threading.get_ident() != MAIN_THREAD:
        return
    STATE.users -= 1
    if not STATE.users and signal.getsignal(signal.SIGINT) is on_sigint:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    STATE.keepers -= 1
    if not STATE.keepers and sys.unraisablehook is _rearm_swallowed:
        sys.unraisablehook = STATE.next_hook


def keep_swallowed_interrupts() -> None:
    """From now on (until as many `uninstall`s), a Ctrl-C that CPython swallows inside a finalizer is raised again."""
    STATE.keepers += 1
    if sys.unraisablehook is not _rearm_swallowed:
        STATE.next_hook, sys.unraisablehook = sys.unraisablehook, _rearm_swallowed


def _rearm_swallowed(unraisable: Any) -> None:
    """sys.unraisablehook: a KeyboardInterrupt that the main thread raised inside a finalizer is sent again as
    SIGINT, by a new thread (a signal tripped from here would run its handler inside this hook, swallowed too);
    anything else goes to the hook before."""
    if not (issubclass(unraisable.exc_type, KeyboardInterrupt) and threading.get_ident() == MAIN_THREAD):
        STATE.next_hook(unraisable)
        return
    try:
        _thread.start_new_thread(signal.pthread_kill, (MAIN_THREAD, signal.SIGINT))
    except RuntimeError:  # no new thread while the interpreter shuts down: it is ending anyway
        pass


def held(method: Callable[..., T]) -> Callable[..., T]:
    """A vector env's call, with a Ctrl-C during it raised where it leaves nothing half done."""

    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> T:
        if threading.get_ident() != MAIN_THREAD:
            return method(*args, **kwargs)
        STATE.depth += 1
        try:
            return method(*args, **kwargs)
        finally:
            STATE.depth -= 1
            if not STATE.depth and STATE.held:
                STATE.held = False
                raise KeyboardInterrupt  # held back during the call, raised now that the call is whole

    return call


def hold_in_public_methods(cls: type[T]) -> type[T]:
    """`held` around every public method of a class."""
    for name, value in list(vars(cls).items()):
        if not name.startswith("_") and callable(value) and not isinstance(value, (classmethod, staticmethod)):
            setattr(cls, name, held(value))
    return cls


def wait(poll: Callable[[int], T], timeout_ms: int) -> T:
    """poll(timeout_ms), where a Ctrl-C held back or arriving meanwhile is raised."""
    if threading.get_ident() != MAIN_THREAD:
        return poll(timeout_ms)
    STATE.waiting = True
    try:
        if STATE.held:
            STATE.held = False
            raise KeyboardInterrupt
        return poll(timeout_ms)
    finally:
        STATE.waiting = False
