"""Typed errors of rlbench_vec. Every message says what was wrong and how to fix it."""

from __future__ import annotations

from typing import Any


class RLBenchVecError(Exception):
    """Base class of every error this package raises on purpose."""


class ConfigError(RLBenchVecError, ValueError):
    """A constructor argument or option is invalid; raised before any worker starts."""


class ActionError(RLBenchVecError, ValueError):
    """Actions passed to step/step_chunk/send have the wrong shape, dtype or values."""


class ClosedError(RLBenchVecError, RuntimeError):
    """The vector env was used after close()."""


class BackendUnavailableError(RLBenchVecError, RuntimeError):
    """A backend's simulator (or Xvfb) is not installed or cannot start here."""


class WorkerError(RLBenchVecError, RuntimeError):
    """The backend raised inside a worker. Carries the env index, the message and the worker's traceback. Raised
    by a step, step_wait or recv whose batch held it (the first such env's), it also carries that call's whole
    result in `result` (every row; the failed envs' episodes are over, their outcomes zero) and every failed
    env's error in `errors`, so a caller can go on with the others."""

    def __init__(self, env_index: int, message: str, worker_traceback: str = ""):
        self.env_index = env_index
        self.message = message
        self.worker_traceback = worker_traceback
        self.result: Any = None
        self.errors: list[WorkerError] = [self]
        text = f"env {env_index}: {message}"
        if worker_traceback:
            text += f"\n--- worker traceback ---\n{worker_traceback.rstrip()}"
        super().__init__(text)


class PolicyError(RLBenchVecError, RuntimeError):
    """The policy an evaluation scores raised (its factory, act or act.reset): the run stops, what finished is kept."""


class PolicyOutputError(ConfigError):
    """The policy an evaluation scores returned something that is no batch of actions of the env's shape: a
    programming error, not an outcome to score."""


class WorkerStartError(WorkerError):
    """A worker could not start at all (import error, no display, simulator launch failure, a script
    without `if __name__ == "__main__":`...); carries the worker's own message."""


class ResetNeeded(RLBenchVecError, RuntimeError):
    """With autoreset_mode="disabled", an env whose episode ended was stepped before it was reset."""


class RestartBudgetExceeded(RLBenchVecError, RuntimeError):
    """Workers kept crashing or hanging beyond max_restarts_per_env / max_restarts_total."""


class DatasetError(RLBenchVecError, ValueError):
    """A demo cannot be written in the asked format, or a dataset on disk is incomplete or malformed."""
