"""The worker process: owns one backend, runs commands from the main process, writes into shared memory.

Protocol (over a socket pair): the main process sends a command frame (command, k, seq, payload);
the worker answers a reply frame (seq, status, payload) exactly once per command. Actions,
observations, rewards and flags travel through the shared buffers, so on the fast path a frame is a
12-byte header with no payload: one write and one read system call each way, no pickling.
"""

from __future__ import annotations

import ctypes
import os
import pickle
import signal
import struct
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Sequence

THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
START, RESET, STEP, CALL, CLOSE = "start", "reset", "step", "call", "close"
COMMANDS = (START, RESET, STEP, CALL, CLOSE)  # a command's wire code is its index
COMMAND_CODES = {command: code for code, command in enumerate(COMMANDS)}
OK, FAILED = 0, 1
PR_SET_PDEATHSIG = 1
COMMAND_HEADER = struct.Struct("<BxHIQ")  # command code, k (actions in a step), seq, payload size
REPLY_HEADER = struct.Struct("<IBxxxdddQ")  # seq, status, exec_s, write_s, reset_s, payload size
READ_SIZE = 1 << 16


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _write_frame(fd: int, header: struct.Struct, *fields: float, body: bytes = b"") -> None:
    """Header and body are written separately: a large body (demos) is never copied to join them."""
    if not body:  # the fast path: a header of a few bytes, which a socket takes whole
        os.write(fd, header.pack(*fields, 0))
        return
    _write_all(fd, header.pack(*fields, len(body)))
    _write_all(fd, body)


def _read_frame(fd: int, header: struct.Struct) -> tuple[tuple, Any]:
    """One frame: fixed header then an optional pickled payload. EOFError when the peer is gone."""
    data = os.read(fd, READ_SIZE)
    while len(data) < header.size:
        more = os.read(fd, READ_SIZE)
        if not more:
            raise EOFError("peer closed the connection")
        data += more
    *fields, size = header.unpack_from(data)
    if not size:
        return tuple(fields), None
    body = bytearray(size)  # filled in place: appending to bytes would copy it on every read
    got = len(data) - header.size
    body[:got] = data[header.size:]
    view = memoryview(body)
    while got < size:
        count = os.readv(fd, [view[got:]])
        if not count:
            raise EOFError("peer closed the connection")
        got += count
    return tuple(fields), pickle.loads(body)


def dumps(payload: Any) -> bytes:
    return b"" if payload is None else pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)


def send_command(fd: int, command: str, seq: int, k: int = 0, body: bytes = b"") -> None:
    """body: the pickled argument (`dumps`), made by the caller before it commits to sending."""
    _write_frame(fd, COMMAND_HEADER, COMMAND_CODES[command], k, seq, body=body)


def read_command(fd: int) -> tuple[str, int, int, Any]:
    (code, k, seq), payload = _read_frame(fd, COMMAND_HEADER)
    return COMMANDS[code], k, seq, payload


def send_reply(fd: int, seq: int, status: int, payload: Any = None, times: Sequence[float] = (0.0, 0.0, 0.0)) -> None:
    """times: the worker's seconds in this command: backend steps, observation writes, resets."""
    _write_frame(fd, REPLY_HEADER, seq, status, *times, body=dumps(payload))


def read_reply(fd: int) -> tuple[int, int, tuple[float, float, float], Any]:
    (seq, status, *times), payload = _read_frame(fd, REPLY_HEADER)
    return seq, status, tuple(times), payload


@dataclass(frozen=True)
class WorkerSpec:
    """Everything a worker needs, pickled once at spawn."""

    env_index: int
    config: Any  # EnvConfig
    shm_name: str
    fields: list
    display: Any
    max_chunk: int
    chunk_obs: str
    parent_pid: int
    cpu_affinity: tuple[int, ...] | None = None
    parent_is_main_thread: bool = True
    video: Any = None  # VideoConfig when this env records


def parent_death_signal() -> Callable[[], int]:
    """A call that makes the kernel SIGKILL the calling process when its parent thread exits. The
    libc lookup happens here, so the call itself is safe in a preexec_fn after fork."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    return lambda: prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def die_with_parent(parent_pid: int, parent_is_main_thread: bool) -> None:
    """Exit when the main process dies, even by SIGKILL: a watchdog thread that sees the worker
    re-parented, plus the kernel's parent-death signal, which also ends a worker stuck in C code.
    That signal fires when the spawning *thread* exits, so it is armed only for a main thread."""
    if parent_is_main_thread:
        try:
            parent_death_signal()()
        except (OSError, AttributeError):
            pass

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="rlbench_vec-parent-watchdog", daemon=True).start()


REWARD, TERMINATED, TRUNCATED, EXECUTED = range(4)  # rows of an env's `outcome` block (4, max_chunk)


class EpisodeRunner:
    """Runs reset/step/chunks on the backend, with gymnasium's next-step autoreset and truncation.

    Per env, shared memory holds `outcome` (4, max_chunk): reward, terminated, truncated, executed
    for the first k columns, k being the last command's action count (later columns are stale).
    `times` collects the seconds of the current command (backend steps, observation writes,
    resets); they travel in the reply's header.
    """

    def __init__(self, backend, buffers, spec: WorkerSpec, recorder=None):
        i = spec.env_index
        self.backend = backend
        self.recorder = recorder
        self.max_steps = spec.config.max_episode_steps
        self.obs = buffers.row("obs", i)
        chunk_obs = buffers.row("chunk_obs", i) if spec.chunk_obs == "all" else None
        # one output dict per sub-step, built once: backends may cache per output dict
        self.chunk_slots = None if chunk_obs is None else [
            {key: view[j, ...] for key, view in chunk_obs.items()} for j in range(spec.max_chunk)
        ]
        self.actions = buffers.arrays["actions"][i]
        self.outcome = buffers.arrays["outcome"][i]
        self.times = [0.0, 0.0, 0.0]
        self.episode_over = True
        self.elapsed = 0

    def take_times(self) -> list[float]:
        """This command's times, for its reply; the runner starts a new list for the next one."""
        times, self.times = self.times, [0.0, 0.0, 0.0]
        return times

    def _write(self, out) -> None:
        start = time.perf_counter()
        self.backend.write_observation(out)
        self.times[1] += time.perf_counter() - start

    def reset(self, seed: int | None, options: dict | None) -> dict:
        start = time.perf_counter()
        info = self.backend.reset(seed, options)
        self.times[2] += time.perf_counter() - start
        self._write(self.obs)
        self.episode_over, self.elapsed = False, 0
        if self.recorder is not None:
            self.recorder.start_episode()
            self.recorder.capture(self.backend)
        return info

    def step(self, k: int) -> dict | None:
        """Run up to k actions; stop at the episode's end. Next-step autoreset: a command that
        arrives after the episode ended resets instead and executes nothing."""
        outcome = self.outcome
        if self.episode_over:
            outcome[:, :k] = 0.0
            info = self.reset(None, None)
            info["autoreset"] = True
            return info
        infos: dict[str, Any] = {}
        start = time.perf_counter()
        for j in range(k):
            result = self.backend.step(self.actions[j])
            self.elapsed += 1
            truncated = self.elapsed >= self.max_steps and not result.terminated
            outcome[:, j] = (result.reward, result.terminated, truncated, True)
            if result.info:
                infos.update(result.info)
            self.episode_over = bool(result.terminated) or truncated
            if self.recorder is not None:
                self.recorder.capture(self.backend)
            if self.chunk_slots is not None:
                self.times[0] += time.perf_counter() - start
                self._write(self.chunk_slots[j])
                start = time.perf_counter()
            if self.episode_over:
                break
        self.times[0] += time.perf_counter() - start
        if j + 1 < k:
            outcome[:, j + 1:k] = 0.0  # actions after the episode's end did not run
        if self.chunk_slots is None:
            self._write(self.obs)
        else:
            for key, view in self.obs.items():
                view[...] = self.chunk_slots[j][key]
        return infos or None


def serve(fd: int, runner: EpisodeRunner) -> None:
    """Answer commands until CLOSE or until the main process hangs up."""
    while True:
        try:
            command, k, seq, payload = read_command(fd)
        except (EOFError, OSError):
            return
        try:
            if command == STEP:
                data = runner.step(k)
            elif command == RESET:
                data = runner.reset(*payload)
            elif command == CALL:
                name, args, kwargs, ends_episode = payload
                target = getattr(runner.backend, name)
                data = target(*args, **kwargs) if callable(target) else target
                runner.episode_over = runner.episode_over or ends_episode
            elif command == CLOSE:
                send_reply(fd, seq, OK)
                return
            else:
                raise ValueError(f"unexpected command {command!r}")
            send_reply(fd, seq, OK, data, runner.take_times())
        except Exception as error:  # the main process decides what a backend error means
            if command != CALL:  # a failed step or reset leaves the episode in an unknown state
                runner.episode_over = True
            send_reply(fd, seq, FAILED, failure(error), runner.take_times())


def failure(error: BaseException) -> tuple[str, str]:
    return f"{type(error).__name__}: {error}", traceback.format_exc()


def worker_main(spec: WorkerSpec, conn) -> None:
    """Entry point of a spawned worker process."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the main process's to handle
    die_with_parent(spec.parent_pid, spec.parent_is_main_thread)

    from .backends import backend_class
    from .shm import SharedBuffers

    display = backend = recorder = None
    try:
        # Simulators are throughput work: SCHED_BATCH stops a worker woken by a command from
        # preempting the main process while it is still sending the rest of the batch.
        if hasattr(os, "SCHED_BATCH"):
            os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
        if spec.cpu_affinity:
            os.sched_setaffinity(0, spec.cpu_affinity)
        backend_type = backend_class(spec.config.backend)
        if backend_type.needs_display(spec.config) or spec.display is not None:
            from .display import open_display

            display = open_display(spec.display, backend_type.needs_display(spec.config), spec.env_index)
            if display is not None:
                os.environ["DISPLAY"] = display.name
        buffers = SharedBuffers.attach(spec.shm_name, spec.fields)
        backend = backend_type(spec.config, spec.env_index)
        if spec.video is not None:
            from .video import VideoRecorder

            recorder = VideoRecorder(spec.video, spec.env_index)
        runner = EpisodeRunner(backend, buffers, spec, recorder)
    except Exception as error:
        send_reply(conn.fileno(), 0, FAILED, failure(error))
        _shutdown(recorder, backend, display)
        return
    send_reply(conn.fileno(), 0, OK, os.getpid())
    try:
        serve(conn.fileno(), runner)
    finally:
        _shutdown(recorder, backend, display)


def _shutdown(*resources) -> None:
    """Close in order: the recorder flushes its last file, then the simulator, then its display."""
    for resource in resources:
        if resource is not None:
            try:
                resource.close()
            except Exception:
                traceback.print_exc()
