"""Ctrl-C inside a vector env's call, raised only where it leaves nothing half done.

Python raises KeyboardInterrupt between any two bytecodes: between reading replies from a pipe and
taking them in, or between writing a worker's command and recording it, and then the engine waits for
a reply that was already read, or drops one it never expected. While a vector env exists, SIGINT goes
to `on_sigint` (in place of Python's default handler, only if that one is installed). Outside the
vector envs' calls it raises at once, as Python's own handler does. Inside a call made from the main
thread, it is held back until the call waits for workers (`wait`: nothing is half done there) or
returns, and raised then.
"""

from __future__ import annotations

import functools
import signal
import threading
from collections.abc import Callable
from typing import Any, TypeVar

MAIN_THREAD = threading.main_thread().ident
T = TypeVar("T")


class _State:
    __slots__ = ("users", "depth", "waiting", "held")

    def __init__(self) -> None:
        self.users = 0  # vector envs alive that installed on_sigint
        self.depth = 0  # calls in progress in the main thread
        self.waiting = False  # the main thread waits for workers: an interrupt loses nothing there
        self.held = False  # an interrupt arrived while a call was not waiting


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
    return True


def uninstall(counted: bool) -> None:
    """A vector env closed: the last one that counted as a user gives SIGINT back to Python."""
    if not counted or threading.get_ident() != MAIN_THREAD:
        return
    STATE.users -= 1
    if not STATE.users and signal.getsignal(signal.SIGINT) is on_sigint:
        signal.signal(signal.SIGINT, signal.default_int_handler)


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
