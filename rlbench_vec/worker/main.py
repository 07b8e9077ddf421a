"""The worker process: starts its display (if any) and its simulators, then answers the main
process's commands, one reply each, until told to close or orphaned.

Between commands it resets, one at a time, the instances whose episode ended (eager reset), as long
as no command waits. The commands themselves run in rlbench_vec.worker.runner.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import traceback
from multiprocessing.reduction import ForkingPickler
from typing import Any

import numpy as np

from ..backends import backend_class
from ..backends.base import EnvGroup, failure
from ..display import open_display
from ..spec import observation_spec
from ..wire.process import die_with_parent, release_boot_output
from ..wire.protocol import CALL, CLOSE, FAILED, OK, RESET, STEP, WorkerSpec, command_reader, send_plain, send_reply
from ..wire.shm import SharedBuffers
from .batched_runner import BatchedRunner
from .runner import Runner


class Replies:
    """Where a worker's replies go: its own reply pipe, or, for a plain reply to a step, the pipe that
    every worker of the pool shares (see protocol)."""

    def __init__(self, fd: int, plain_fd: int, spec: WorkerSpec):
        self.fd, self.plain_fd, self.worker, self.generation = fd, plain_fd, spec.worker_index, spec.generation

    def step(self, seq: int, status: int, records: np.ndarray, payload: Any, where: tuple) -> None:
        """A step's answer: plain (no records, nothing to report) on the shared pipe, else on its own."""
        at, first, exec_s, write_s = where
        if status == OK and not len(records) and payload is None:
            send_plain(self.plain_fd, self.worker, self.generation, seq, at, first, exec_s, write_s)
        else:
            send_reply(self.fd, seq, status, records, payload, page=at, first=first, exec_s=exec_s, write_s=write_s)

    def other(self, seq: int, records: np.ndarray, payload: Any, where: tuple) -> None:
        """The answer to a reset or a call: always on its own pipe."""
        at, first, exec_s, write_s = where
        send_reply(self.fd, seq, OK, records, payload, page=at, first=first, exec_s=exec_s, write_s=write_s)

    def steps(self, answers: list) -> None:
        for seq, status, records, payload, where in answers:
            self.step(seq, status, records, payload, where)


def serve(command_fd: int, replies: Replies, runner: Runner) -> None:
    """Answer commands until CLOSE or until the main process hangs up. Between commands, reset the
    instances whose episode ended (eager reset), one at a time, while no command waits. A batched
    group's partial steps (BatchedRunner) advance a control step at a time while no command waits."""
    fd = replies.fd
    reader = command_reader(command_fd)
    eager = runner.spec.eager_reset and runner.next_step
    batched = runner if isinstance(runner, BatchedRunner) else None
    waiting = lambda timeout_s: reader.pending() or bool(select.select([command_fd], [], [], timeout_s)[0])
    while True:
        if batched is not None and batched.flights and not waiting(batched.patience_s()):
            try:
                replies.steps(batched.advance())
            except Exception as error:  # the simulator's state is lost: the main process replaces this worker
                send_reply(fd, min(batched.flights), FAILED, payload=failure(error))
                return
            continue
        try:
            (command, page, k, seq), entries, payload = reader.read()
        except (EOFError, OSError):
            return
        if command == CLOSE:
            send_reply(fd, seq, OK)
            return
        try:
            if batched is not None and command == STEP and batched.takes_partial(k, entries):
                replies.steps(batched.start_step(seq, page, entries))
                continue
            while batched is not None and batched.flights:  # any other command comes after the steps in flight
                replies.steps(batched.advance())
            if command == STEP:
                replies.step(seq, OK, *runner.step(page, k, entries))
            elif command == RESET:
                replies.other(seq, *runner.reset(page, entries, payload))
            elif command == CALL:
                replies.other(seq, *runner.call(entries, payload))
            else:
                raise ValueError(f"unexpected command {command!r}")
        except Exception as error:  # a fault of the worker itself: the main process replaces it
            send_reply(fd, seq, FAILED, payload=failure(error))
        while eager and runner.ahead and not waiting(0):
            runner.reset_one_ahead()


def worker_main(spec: WorkerSpec, commands, replies, plain_conn) -> None:
    """Entry point of a spawned worker process. commands, replies: the read end of its commands' pipe
    and the write end of its replies'; plain_conn: the write end of the pool's pipe for plain replies."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the main process's to handle
    display = runner = device_pages = None
    group: EnvGroup | None = None
    fd = replies.fileno()
    die_with_parent(spec.parent_pid, spec.parent_is_main_thread, lambda: display is None or display.alive())
    try:
        if spec.batch_scheduling and hasattr(os, "SCHED_BATCH"):
            os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
        if spec.cpu_affinity:
            os.sched_setaffinity(0, spec.cpu_affinity)
        backend_type = backend_class(spec.config.backend)
        if backend_type.needs_display(spec.config) or spec.display is not None:
            # exports DISPLAY, XAUTHORITY and the GLX vendor library for the simulator about to load
            display = open_display(spec.display, backend_type.needs_display(spec.config), spec.worker_index)
        buffers = SharedBuffers.attach(spec.shm_name, spec.fields)
        group = backend_type.make_group(spec.config, spec.instances)
        device_pages = group.device_pages(observation_spec(spec.config), spec.rows, spec.max_chunk,
                                          spec.chunk_obs == "all")
        runner = (BatchedRunner if group.partial_steps else Runner)(group, buffers, spec, device_pages)
    except Exception as error:
        send_reply(fd, 0, FAILED, payload=failure(error))
        _shutdown(group, display)
        return
    facts = _facts(display)
    if device_pages is not None:  # shared once with the main process (CUDA IPC for torch tensors)
        facts["pages"] = [{part: dict(views) for part, views in page.items()} for page in device_pages]
        facts["pages_written"] = group.pages_written()
    pickled = bytes(ForkingPickler.dumps(facts)) if device_pages is not None else None
    send_reply(fd, 0, OK, payload=facts, pickled=pickled)
    release_boot_output()
    try:
        serve(commands.fileno(), Replies(fd, plain_conn.fileno(), spec), runner)
    finally:
        _shutdown(runner, display)
    _exit_at_once()


def _facts(display) -> dict[str, Any]:
    facts: dict[str, Any] = {"pid": os.getpid()}
    if display is not None:
        facts.update(display.facts())
    return facts


def _exit_at_once() -> None:
    """Everything is closed: exit without Python's teardown, which frees the simulators' objects one by one
    (an mjwarp worker spent 10 s garbage-collecting warp's arrays and kernels, then was killed at close's
    deadline)."""
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()
    os._exit(0)


def _shutdown(*resources) -> None:
    """Close in order: the runner (recorders flush their files, then the simulators), then the display."""
    for resource in resources:
        if resource is not None:
            try:
                resource.close()
            except Exception:
                traceback.print_exc()
