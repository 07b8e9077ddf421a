"""The worker process: owns one backend, runs commands from the main process, writes into shared memory.

Protocol (over a multiprocessing Pipe): the main process sends (command, seq, argument); the worker
answers (seq, status, data) exactly once per command. Actions, observations, rewards and flags travel
through the shared buffers, so replies are tiny on the fast path (data is None).
"""

from __future__ import annotations

import ctypes
import os
import signal
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Any

THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
START, RESET, STEP, CALL, CLOSE = "start", "reset", "step", "call", "close"
OK, FAILED = 0, 1
PR_SET_PDEATHSIG = 1


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


def die_with_parent(parent_pid: int) -> None:
    """Exit when the main process dies, even by SIGKILL: the kernel's parent-death signal, plus a
    watchdog thread in case the parent was already gone before the signal was armed."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="rlbench_vec-parent-watchdog", daemon=True).start()


class EpisodeRunner:
    """Runs reset/step/chunks on the backend, with gymnasium's next-step autoreset and truncation."""

    def __init__(self, backend, buffers, spec: WorkerSpec):
        i = spec.env_index
        self.backend = backend
        self.max_steps = spec.config.max_episode_steps
        self.obs = buffers.row("obs", i)
        self.chunk_obs = buffers.row("chunk_obs", i) if spec.chunk_obs == "all" else None
        self.actions = buffers.arrays["actions"][i]
        self.rewards = buffers.arrays["rewards"][i]
        self.terminated = buffers.arrays["terminated"][i]
        self.truncated = buffers.arrays["truncated"][i]
        self.executed = buffers.arrays["executed"][i]
        self.timing = buffers.arrays["timing"][i]  # exec_s, write_s of the last command
        self.episode_over = True
        self.elapsed = 0

    def _write(self, out) -> float:
        start = time.perf_counter()
        self.backend.write_observation(out)
        return time.perf_counter() - start

    def reset(self, seed: int | None, options: dict | None) -> dict:
        start = time.perf_counter()
        info = self.backend.reset(seed, options)
        self.timing[0] = time.perf_counter() - start
        self.timing[1] = self._write(self.obs)
        self.episode_over, self.elapsed = False, 0
        return info

    def step(self, k: int) -> dict | None:
        """Run up to k actions; stop at the episode's end. Next-step autoreset: a command that
        arrives after the episode ended resets instead and executes nothing."""
        self.rewards[:] = 0.0
        self.terminated[:] = False
        self.truncated[:] = False
        self.executed[:] = False
        if self.episode_over:
            info = self.reset(None, None)
            info["autoreset"] = True
            return info
        infos: dict[str, Any] = {}
        exec_s = write_s = 0.0
        for j in range(k):
            start = time.perf_counter()
            result = self.backend.step(self.actions[j])
            exec_s += time.perf_counter() - start
            self.elapsed += 1
            self.executed[j] = True
            self.rewards[j] = result.reward
            self.terminated[j] = bool(result.terminated)
            self.truncated[j] = self.elapsed >= self.max_steps and not result.terminated
            infos.update(result.info)
            self.episode_over = bool(self.terminated[j] or self.truncated[j])
            if self.chunk_obs is not None:
                write_s += self._write({key: view[j] for key, view in self.chunk_obs.items()})
            if self.episode_over:
                break
        if self.chunk_obs is None:
            write_s += self._write(self.obs)
        else:
            for key, view in self.obs.items():
                view[...] = self.chunk_obs[key][j]
        self.timing[0], self.timing[1] = exec_s, write_s
        return infos or None


def serve(conn, runner: EpisodeRunner) -> None:
    """Answer commands until CLOSE or until the main process hangs up."""
    while True:
        try:
            command, seq, argument = conn.recv()
        except (EOFError, OSError):
            return
        try:
            if command == STEP:
                data = runner.step(argument)
            elif command == RESET:
                data = runner.reset(*argument)
            elif command == CALL:
                name, args, kwargs, ends_episode = argument
                data = getattr(runner.backend, name)(*args, **kwargs)
                runner.episode_over = runner.episode_over or ends_episode
            elif command == CLOSE:
                conn.send((seq, OK, None))
                return
            else:
                raise ValueError(f"unknown command {command!r}")
            conn.send((seq, OK, data))
        except Exception as error:  # the main process decides what a backend error means
            runner.episode_over = True
            conn.send((seq, FAILED, (f"{type(error).__name__}: {error}", traceback.format_exc())))


def worker_main(spec: WorkerSpec, conn) -> None:
    """Entry point of a spawned worker process."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the main process's to handle
    die_with_parent(spec.parent_pid)
    for name in THREAD_VARS:
        os.environ.setdefault(name, "1")
    if spec.cpu_affinity:
        os.sched_setaffinity(0, spec.cpu_affinity)

    from .backends import backend_class
    from .shm import SharedBuffers

    display = backend = None
    try:
        backend_type = backend_class(spec.config.backend)
        if backend_type.needs_display(spec.config) or spec.display is not None:
            from .display import open_display

            display = open_display(spec.display, backend_type.needs_display(spec.config), spec.env_index)
            if display is not None:
                os.environ["DISPLAY"] = display.name
        buffers = SharedBuffers.attach(spec.shm_name, spec.fields)
        backend = backend_type(spec.config, spec.env_index)
        runner = EpisodeRunner(backend, buffers, spec)
    except Exception as error:
        conn.send((0, FAILED, (f"{type(error).__name__}: {error}", traceback.format_exc())))
        _shutdown(backend, display)
        return
    conn.send((0, OK, os.getpid()))
    try:
        serve(conn, runner)
    finally:
        _shutdown(backend, display)


def _shutdown(backend, display) -> None:
    for resource in (backend, display):
        if resource is not None:
            try:
                resource.close()
            except Exception:
                traceback.print_exc()
