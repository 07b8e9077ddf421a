"""RLBenchVectorEnv: the public front. Validates what the user passes, keeps gymnasium's vector
contract, and hands the work to the worker pool (rlbench_vec.pool) and the batch assembly
(rlbench_vec.results).

Contract (gymnasium's vector API):
- Observations of reset/step/step_chunk/recv are views into shared memory unless copy_obs=True.
  They stay valid until your next reset/step/step_chunk/recv call returns: workers write each new
  batch into the other of two pages.
- Autoreset (autoreset_mode): "next_step" (default): after an episode ends, that env's next step
  resets it instead (action ignored, reward 0, info["autoreset"]); "same_step": the step that ends
  an episode returns the new episode's first observation, the final one in info["final_obs"] with
  info["final_info"]; "disabled": reset(options={"reset_mask": mask}) resets chosen envs.
- A worker that dies or misses its deadline is replaced; each of its envs' next result comes with
  truncated=True and info["restarted"] naming why. Other workers' envs are untouched.
"""

from __future__ import annotations

import math
import os
import resource
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from . import shm
from .backends import backend_class
from .backends.base import Demo
from .config import EnvConfig, VectorConfig, integer, split_options
from .display import check_display, sweep_stale_displays
from .distributed import rank_seed
from .envtable import IDLE
from .errors import ActionError, ClosedError, ConfigError, ResetNeeded, WorkerError
from .pool import Pool
from .process import bootstrapping
from .protocol import OBSERVE, RESULT, dumps
from .results import Batch, assemble
from .spec import ArraySpec, action_bounds, action_size, observation_spec

DEMO_SEED_STRIDE = 100_003  # a worker's demo seeds: base + stride * (call * num_envs + env)
FDS_PER_WORKER = 3  # socket, process sentinel, and one while it is spawned
FDS_SPARE = 64
AUTORESET = {"next_step": AutoresetMode.NEXT_STEP, "same_step": AutoresetMode.SAME_STEP,
             "disabled": AutoresetMode.DISABLED}


def _space(spec: ArraySpec) -> gym.spaces.Box:
    if spec.dtype == np.uint8:
        return gym.spaces.Box(0, 255, spec.shape, np.uint8)
    return gym.spaces.Box(-np.inf, np.inf, spec.shape, spec.dtype)


def _pickled(payload: Any, what: str) -> bytes:
    """The payload as it travels to a worker; a clear error before anything is sent if it cannot."""
    try:
        return dumps(payload)
    except Exception as error:
        raise ConfigError(f"{what} must be picklable to reach the workers: {type(error).__name__}: {error}") from None


def buffer_plan(layout: dict[str, ArraySpec], n: int, max_chunk: int, every_obs: bool,
                action_dim: int) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """The shared block: two pages of result slots (one per env each), the actions, the claim counters.
    An empty layout leaves the observations out (a backend that keeps them on its device)."""
    plan: dict[str, tuple[tuple[int, ...], np.dtype]] = {}
    for page in (0, 1):
        plan.update({f"page{page}/obs/{key}": ((n, *s.shape), s.dtype) for key, s in layout.items()})
        if every_obs:
            plan.update({f"page{page}/chunk/{key}": ((n, max_chunk, *s.shape), s.dtype) for key, s in layout.items()})
        plan[f"page{page}/outcome"] = ((n, 4, max_chunk), np.dtype(np.float64))
        plan[f"page{page}/env"] = ((n,), np.dtype(np.int32))
    plan["actions"] = ((n, max_chunk, action_dim), np.dtype(np.float32))
    plan["control"] = ((3,), np.dtype(np.int64))
    return plan


def check_resources(plan: dict[str, tuple[tuple[int, ...], np.dtype]], workers: int) -> None:
    """Refuse, before anything starts, a request this machine cannot hold: file descriptors for the
    workers, and /dev/shm for the shared block (running out of it later kills workers with SIGBUS)."""
    needed = FDS_PER_WORKER * workers + FDS_SPARE
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if needed > soft:
        if hard == resource.RLIM_INFINITY or needed <= hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
        else:
            raise ConfigError(f"{workers} worker processes need about {needed} file descriptors, and this process may "
                              f"open {hard} (ulimit -n). Raise the limit (ulimit -n {needed}) or run more envs per "
                              "worker (envs_per_worker=...).")
    _, size = shm.plan_fields(plan)
    stat = os.statvfs(shm.SHM_DIR)
    free = stat.f_bavail * stat.f_frsize
    if size > free:
        raise ConfigError(f"the shared-memory block needs {size / 2**30:.2f} GiB and {shm.SHM_DIR} has "
                          f"{free / 2**30:.2f} GiB free. Use fewer envs, fewer cameras or smaller images, or give "
                          f"{shm.SHM_DIR} more room (Docker: --shm-size={math.ceil(size * 1.2 / 2**30)}g).")


class _Resources:
    """What must be released even if the env object is never closed (finalizer target)."""

    def __init__(self) -> None:
        self.pool: Pool | None = None
        self.buffers: shm.SharedBuffers | None = None

    def release(self) -> None:
        if self.pool is not None:
            self.pool.close()
        if self.buffers is not None:
            self.buffers.unlink()
            self.buffers = None


class RLBenchVectorEnv(VectorEnv):
    """num_envs RLBench-style environments in worker processes, observations in shared memory.

    Options (keyword): every field of EnvConfig (task, backend, cameras, image_size, modalities,
    low_dim, misc, depth_in_meters, arm_mode, absolute_mode, gripper_mode, max_episode_steps,
    renderer, backend_options) and of VectorConfig (envs_per_worker, seed, copy_obs, max_chunk,
    chunk_obs, autoreset_mode, eager_reset, spare_envs, step_timeout_s, reset_timeout_s,
    start_timeout_s, max_restarts_per_env, max_restarts_total, recycle_after_episodes,
    max_worker_rss_mb, display, cpu_affinity, record, as_torch, device); see their docstrings.
    on_worker_ready(ready, total) is called as workers come up (start-up can take minutes).
    """

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": ["rgb_array"]}
    render_mode = "rgb_array"

    def __init__(self, num_envs: int = 1, task: str = "reach_target", *,
                 on_worker_ready: Callable[[int, int], None] | None = None, **options: Any):
        env_options, vector_options = split_options(options)
        self._setup(EnvConfig(task=task, **env_options), VectorConfig(num_envs=num_envs, **vector_options),
                    on_worker_ready)

    @classmethod
    def from_config(cls, env_config: EnvConfig, vector_config: VectorConfig,
                    on_worker_ready: Callable[[int, int], None] | None = None) -> RLBenchVectorEnv:
        env = cls.__new__(cls)
        env._setup(env_config, vector_config, on_worker_ready)
        return env

    # ------------------------------------------------------------------ setup
    def _setup(self, env_config: EnvConfig, vector_config: VectorConfig, on_worker_ready) -> None:
        self.closed = True  # until every worker is up
        if bootstrapping():
            raise RuntimeError("RLBenchVectorEnv was created while a worker process was importing your main script. "
                               "Put the code that creates it under `if __name__ == \"__main__\":`.")
        config = env_config.validated()
        backend_type = backend_class(config.backend)
        backend_type.validate(config)
        vc = vector_config.validated()
        if vc.video is not None and not backend_type.renders_video(config):
            raise ConfigError(f"the {config.backend} backend renders no video frames: record with another backend.")
        self.env_config, self.vector_config = config, vc
        self.autoreset_mode = AUTORESET[vc.autoreset_mode]  # read by wrappers such as TorchRL's GymWrapper
        self.metadata = {**type(self).metadata, "autoreset_mode": self.autoreset_mode}
        n = self.num_envs = vc.num_envs
        layout = observation_spec(config)
        self._action_size = action_size(config)
        self._action_low, self._action_high = action_bounds(config)
        self.single_observation_space = gym.spaces.Dict({k: _space(s) for k, s in layout.items()})
        self.observation_space = batch_space(self.single_observation_space, n)
        self.single_action_space = gym.spaces.Box(self._action_low, self._action_high, dtype=np.float32)
        self.action_space = batch_space(self.single_action_space, n)

        per_worker = backend_type.envs_per_worker(config, n, vc.envs_per_worker)
        workers = math.ceil((n + vc.spare_envs) / per_worker)
        if isinstance(vc.display, (list, tuple)) and len(vc.display) != workers:
            raise ConfigError(f"display lists {len(vc.display)} displays for {workers} workers ({per_worker} envs "
                              "each); give one per worker or a single string for all.")
        check_display(vc.display, backend_type.needs_display(config))
        on_device = backend_type.observations_on_device(config)
        plan = buffer_plan({} if on_device else layout, n, vc.max_chunk, vc.chunk_obs == "all", self._action_size)
        check_resources(plan, workers)
        shm.sweep_stale_segments()
        sweep_stale_displays()

        self._resources = _Resources()
        self._finalizer = weakref.finalize(self, self._resources.release)
        self._to_tensors: Any = None
        try:
            buffers = self._resources.buffers = shm.SharedBuffers.create(plan)
            self._pages: list[dict[str, Any]] = [
                {"obs": buffers.group(f"page{p}/obs"), "chunk": buffers.group(f"page{p}/chunk"),
                 "outcome": buffers.arrays[f"page{p}/outcome"]} for p in (0, 1)]
            self._actions = buffers.arrays["actions"]
            if vc.as_torch:  # inside the try: no torch or no GPU must not leak the block
                from .tensors import TensorConverter

                self._to_tensors = TensorConverter([page["obs"] for page in self._pages], vc.device)
            self._pool = self._resources.pool = Pool(config, vc, buffers, per_worker, self._wait_copies,
                                                     self._use_device_pages if on_device else None)
            started = time.monotonic()
            self._pool.start(on_worker_ready)
            self.start_time_s = time.monotonic() - started
        except BaseException:
            self._finalizer()
            raise
        self._chunked = np.zeros(n, bool)
        self._sync: bool | None = None  # the mode of what is in flight: full batch (True) or partial
        self._interrupted = False
        self._first_reset = True
        self._demo_calls = 0
        self._seed = rank_seed(vc.seed, n)
        self._stats_baseline = self._stats_now()
        self._last_stats: dict[str, np.ndarray] | None = None
        self.closed = False

    def _use_device_pages(self, pages: list[dict[str, dict[str, Any]]]) -> None:
        """A worker that keeps observations on its device shared its two pages (again after a restart)."""
        for ours, theirs in zip(self._pages, pages):
            ours["obs"], ours["chunk"] = theirs["obs"], theirs.get("chunk", {})

    def _wait_copies(self, page: int) -> None:
        """With device="cuda", copies out of a page may still run: workers must not write it yet."""
        if self._to_tensors is not None:
            self._to_tensors.wait_copies(page)

    # ------------------------------------------------------------------ checks
    def _check_open(self) -> None:
        if self.closed or self._pool.closed:
            self.closed = True
            raise ClosedError("this RLBenchVectorEnv is closed; create a new one.")
        if self._interrupted:  # a call was interrupted (Ctrl-C): settle what it left in flight
            self._pool.drain()
            self._interrupted, self._sync = False, None

    def _check_actions(self, actions: Any, count: int, chunked: bool) -> np.ndarray:
        """(count, A) or (count, K, A) floats -> float32 (count, K, A); gripper clipped to its bounds."""
        array = np.asarray(actions)
        if array.dtype.kind not in "fiu":
            raise ActionError(f"actions must be a real-valued array, got dtype {array.dtype}.")
        a, max_chunk = self._action_size, self.vector_config.max_chunk
        expected = f"({count}, K, {a}) with 1 <= K <= max_chunk={max_chunk}" if chunked else f"({count}, {a})"
        if array.ndim != (3 if chunked else 2) or array.shape[0] != count or array.shape[-1] != a or (
            chunked and not 1 <= array.shape[1] <= max_chunk
        ):
            raise ActionError(f"actions have shape {array.shape}; expected {expected} for arm_mode="
                              f"{self.env_config.arm_mode!r} + gripper_mode={self.env_config.gripper_mode!r}.")
        array = array.astype(np.float32, copy=False).reshape(count, -1, a)
        if not np.isfinite(array.sum()) and not np.isfinite(array).all():  # a sum is cheaper; it overflows rarely
            rows = sorted({int(r) for r in np.argwhere(~np.isfinite(array))[:, 0]})
            raise ActionError(f"actions contain NaN or inf (rows {rows}); send finite values.")
        gripper = array[..., -1]
        low, high = self._action_low[-1], self._action_high[-1]
        if gripper.min() < low or gripper.max() > high:
            array = array.copy()
            np.clip(array[..., -1], low, high, out=array[..., -1])
        return array

    def _env_ids(self, env_ids: Any) -> np.ndarray:
        if env_ids is None:
            return np.arange(self.num_envs)
        ids = np.asarray(env_ids).reshape(-1)
        if ids.dtype.kind not in "iu":
            if ids.dtype.kind == "f" and ids.size and np.array_equal(ids, np.round(ids)):
                ids = ids.astype(np.int64)
            elif ids.size:
                raise ConfigError(f"env_ids must be integers, got {env_ids!r}.")
        ids = ids.astype(np.int64)
        if ids.size == 0 or ids.min() < 0 or ids.max() >= self.num_envs or len(np.unique(ids)) != ids.size:
            raise ConfigError(f"env_ids must be distinct integers in [0, {self.num_envs}), got {env_ids!r}.")
        return ids

    def _check_idle(self, ids: np.ndarray, what: str) -> None:
        busy = ids[self._pool.table.phase[ids] != IDLE]
        if busy.size:
            raise ConfigError(f"envs {busy.tolist()} have a command in flight or a result not yet returned: "
                              f"recv() them before {what}.")

    def _check_episodes(self, ids: np.ndarray) -> None:
        if self.vector_config.autoreset_mode == "disabled" and self._pool.table.over[ids].any():
            over = ids[self._pool.table.over[ids]].tolist()
            raise ResetNeeded(f"the episodes of envs {over} are over and autoreset_mode='disabled': reset them first "
                              "with reset(options={'reset_mask': mask}).")

    # ------------------------------------------------------------------ results
    def _result(self, batch: Batch, chunked: bool):
        page = self._pages[batch.page]
        on_device = self._to_tensors is None and not isinstance(next(iter(page["obs"].values()), None), np.ndarray)
        copy = self.vector_config.copy_obs and not on_device  # leaving the device copies already
        result = assemble(batch, page["obs"], page["outcome"], page["chunk"], chunked, copy)
        if on_device and page["obs"]:  # numpy asked for: copy the observations to the host
            result = ({key: value.cpu().numpy() for key, value in result[0].items()}, *result[1:])
            chunk = result[4].get("chunk_observations")
            if chunk is not None:
                result[4]["chunk_observations"] = {key: value.cpu().numpy() for key, value in chunk.items()}
        if self._to_tensors is not None:
            whole = batch.rows == self.num_envs and not self.vector_config.copy_obs
            result = self._to_tensors(result, batch.page, whole)
        return result

    def _collect(self, ordered: bool, count: int, timeout: float | None) -> Batch:
        try:
            batch = self._pool.collect(ordered, count, timeout)
        except BaseException as error:
            if not isinstance(error, WorkerError):
                self._interrupted = ordered  # a full batch left half collected is settled next call
            raise
        if batch is None:
            raise TimeoutError(f"fewer than {count} envs finished within {timeout} s; the others are still running: "
                               "call again to collect them.")
        if not self._pool.table.busy:
            self._sync = None
        return batch

    # ------------------------------------------------------------------ gymnasium API
    def _reset_seeds(self, seed: int | Sequence[int | None] | None) -> list[int | None]:
        if seed is None and self._first_reset:
            seed = self.vector_config.seed
        if seed is None or not isinstance(seed, (list, tuple, np.ndarray)):
            base = rank_seed(None if seed is None else integer("seed", seed, 0), self.num_envs)
            return [None if base is None else base + i for i in range(self.num_envs)]
        if len(seed) != self.num_envs:
            raise ConfigError(f"reset got {len(seed)} seeds for {self.num_envs} envs; give one per env.")
        return [None if s is None else integer("seed", s, 0) for s in seed]

    def _reset_options(self, options: dict[str, Any] | None) -> tuple[list[dict | None], np.ndarray]:
        """Per env: the shared options merged with its entry of options["env_options"]; and the reset mask."""
        shared = dict(options or {})
        mask = np.ones(self.num_envs, bool)
        if "reset_mask" in shared:
            if self.vector_config.autoreset_mode != "disabled":
                raise ConfigError("reset(options={'reset_mask': ...}) resets chosen envs with "
                                  "autoreset_mode='disabled' (gymnasium's rule); this env uses autoreset_mode="
                                  f"{self.vector_config.autoreset_mode!r}.")
            mask = np.asarray(shared.pop("reset_mask"))
            if mask.dtype != bool or mask.shape != (self.num_envs,) or not mask.any():
                raise ConfigError(f"reset_mask must be a bool array of shape ({self.num_envs},) with at least one "
                                  "True.")
        own = shared.pop("env_options", None)
        if own is not None and (not isinstance(own, (list, tuple)) or len(own) != self.num_envs
                                or not all(o is None or isinstance(o, dict) for o in own)):
            raise ConfigError(f"options['env_options'] must be a list of {self.num_envs} dicts (or None), one per env.")
        merged = [({**shared, **(own[i] or {})} if own is not None else shared) or None for i in range(self.num_envs)]
        _pickled(merged, "reset options")
        return merged, mask

    def reset(self, *, seed: int | Sequence[int | None] | None = None, options: dict[str, Any] | None = None):
        """Reset every env (or, with autoreset_mode="disabled", those in options["reset_mask"]).
        seed: an int gives env i seed + i (+ RANK * num_envs under torchrun, so ranks never share
        seeds); a list gives one seed per env; None uses the constructor's seed on the first reset and
        continues each env's random stream afterwards. options["env_options"]: one dict per env,
        merged over the other options for that env. Commands still in flight are finished and their
        results discarded."""
        self._check_open()
        seeds = self._reset_seeds(seed)
        options_per_env, mask = self._reset_options(options)
        if self._pool.table.busy:
            self._pool.drain()
        self._first_reset = False
        kinds = np.where(mask, RESULT, OBSERVE).tolist()
        self._pool.reset(np.arange(self.num_envs), seeds, options_per_env, kinds)
        self._sync = True
        obs, _, _, _, info = self._result(self._collect(True, self.num_envs, None), chunked=False)
        return obs, info

    def step(self, actions: Any):
        """One action per env: actions (num_envs, A). Returns (obs, reward, terminated, truncated, info)."""
        if np.ndim(actions) != 2:
            raise ActionError(f"step() takes actions of shape ({self.num_envs}, {self._action_size}); "
                              f"got {np.shape(actions)}. Use step_chunk() for (num_envs, K, A).")
        self.step_async(actions)
        return self.step_wait()

    def step_chunk(self, actions: Any):
        """K actions per env in one round trip: actions (num_envs, K, A). A worker stops early at the
        episode's end. reward/terminated/truncated are (num_envs, K); info["executed"] (num_envs, K)
        marks the actions that ran; obs is the observation after each env's last executed action."""
        if np.ndim(actions) != 3:
            raise ActionError(f"step_chunk() takes actions of shape ({self.num_envs}, K, {self._action_size}); "
                              f"got {np.shape(actions)}.")
        self.step_async(actions)
        return self.step_wait()

    def step_async(self, actions: Any) -> None:
        self._check_open()
        everyone = np.arange(self.num_envs)
        self._check_idle(everyone, "step()")
        chunked = np.ndim(actions) == 3
        batch = self._check_actions(actions, self.num_envs, chunked)
        self._check_episodes(everyone)
        self._actions[:, :batch.shape[1]] = batch
        self._pool.step(everyone, batch.shape[1], ordered=True)
        self._chunked[:], self._sync = chunked, True

    def step_wait(self, timeout: float | None = None):
        self._check_open()
        if self._sync is not True:
            raise ConfigError("step_wait() collects the full batch that step_async() sent; use recv() for envs sent "
                              "to with send().")
        return self._result(self._collect(True, self.num_envs, timeout), bool(self._chunked[0]))

    def send(self, actions: Any, env_ids: Any = None) -> None:
        """Start a step for env_ids (all by default): actions (M, A) for one step, (M, K, A) for a chunk.
        Results come back with recv(), in the order the envs finish."""
        self._check_open()
        ids = self._env_ids(env_ids)
        if self._sync:
            raise ConfigError("a full batch from step_async() is in flight: step_wait() it before send().")
        self._check_idle(ids, "send()")
        chunked = np.ndim(actions) == 3
        batch = self._check_actions(actions, len(ids), chunked)
        self._check_episodes(ids)
        k = batch.shape[1]
        if env_ids is None:
            self._actions[:, :k] = batch
        else:
            self._actions[ids, :k] = batch
        self._pool.step(ids, k, ordered=False)
        self._chunked[ids], self._sync = chunked, False

    def recv(self, min_envs: int | None = None, timeout: float | None = None):
        """The results of at least min_envs (default: all) of the envs sent to, in the order they
        finished: (obs, reward, terminated, truncated, info) for those envs only; info["env_id"] says
        which env each row is. Observations are views of one contiguous block of shared memory
        (copies with copy_obs=True), valid until your next reset/step/recv call returns."""
        self._check_open()
        waiting = self._pool.table.busy
        if not waiting or self._sync:
            raise ConfigError("recv() has nothing to wait for: send() actions first"
                              + (" (step_async() is collected by step_wait())." if self._sync else "."))
        count = waiting if min_envs is None else min_envs
        if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or not 1 <= count <= waiting:
            raise ConfigError(f"min_envs must be an integer in [1, {waiting}] (envs in flight), got {min_envs!r}.")
        batch = self._collect(False, int(count), timeout)
        result = self._result(batch, bool(self._chunked[batch.envs].any()))
        result[4]["env_id"] = batch.envs.copy()
        return result

    # ------------------------------------------------------------------ calls, demos
    def call_async(self, name: str, *args: Any, env_ids: Any = None, ends_episode: bool = False,
                   timeout: float | None = None, **kwargs: Any) -> None:
        """Start backend method `name` in each env of env_ids (all by default); collect with call_wait().
        ends_episode=True makes those envs reset at their next step. timeout (seconds, per env) kills
        and restarts a worker that takes longer; None: no deadline (collecting demos can take hours)."""
        if not isinstance(name, str) or name.startswith("_"):
            raise ConfigError(f"call() reaches public backend attributes only, not {name!r}.")
        self._start_calls(name, args, kwargs, env_ids, ends_episode, timeout)

    def _start_calls(self, name: str, args: tuple, kwargs: dict, env_ids: Any, ends_episode: bool,
                     timeout: float | None) -> None:
        self._check_open()
        ids = self._env_ids(env_ids)
        if self._sync is not None:
            raise ConfigError("steps are in flight: collect them with step_wait(), or recv() them before call(), "
                              "get_attr(), set_attr(), render() or get_demos().")
        self._check_idle(ids, "call()")
        payload = _pickled((name, args, kwargs, bool(ends_episode)), f"the arguments of {name}()")
        self._pool.call(ids, payload, math.inf if timeout is None else float(timeout))
        if ends_episode:
            self._pool.table.over[ids] = True

    def call_wait(self, min_envs: int | None = None, timeout: float | None = None) -> list[tuple[int, Any]]:
        """Finished calls of call_async(), at least min_envs (default: all): (env, result) pairs, the
        result a WorkerError if the call raised or its worker died."""
        self._check_open()
        pending = np.flatnonzero(self._pool.table.phase != IDLE)
        count = len(pending) if min_envs is None else min_envs
        if not len(pending) or not 1 <= count <= len(pending):
            raise ConfigError(f"call_wait() needs 1 <= min_envs <= {len(pending)} calls in flight, got {min_envs!r}.")
        try:
            finished = self._pool.wait_until(lambda: self._pool.table.done().size >= count, timeout)
        except BaseException as error:
            if not isinstance(error, WorkerError):
                self._interrupted = True
            raise
        if not finished:
            raise TimeoutError(f"fewer than {count} calls finished within {timeout} s: call again to collect them.")
        return list(self._pool.take_calls(self._pool.table.done()).items())

    def call(self, name: str, *args: Any, env_ids: Any = None, ends_episode: bool = False, **kwargs: Any) -> tuple:
        """Call backend method `name` in each env (or env_ids), or read the attribute when it is not
        callable (gymnasium's semantics); results in env order. ends_episode=True makes those envs
        reset on their next step (e.g. after collecting demos). No deadline: a method may run long."""
        if not isinstance(name, str) or name.startswith("_"):
            raise ConfigError(f"call() reaches public backend attributes only, not {name!r}.")
        return self._call_each(name, args, kwargs, env_ids, ends_episode, None)

    def _call_each(self, name: str, args: tuple, kwargs: dict, env_ids: Any, ends_episode: bool,
                   timeout: float | None) -> tuple:
        self._start_calls(name, args, kwargs, env_ids, ends_episode, timeout)
        results = self._raise_first(dict(self.call_wait()))
        return tuple(results[env] for env in sorted(results))

    @staticmethod
    def _raise_first(results: dict[int, Any]) -> dict[int, Any]:
        """Every call has finished: raise the first that failed (lowest env), if any."""
        for env in sorted(results):
            if isinstance(results[env], WorkerError):
                raise results[env]
        return results

    def get_attr(self, name: str) -> tuple:
        if not isinstance(name, str) or name.startswith("_"):
            raise ConfigError(f"get_attr() reaches public backend attributes only, not {name!r}.")
        return self._call_each(name, (), {}, None, False, self.vector_config.step_timeout_s)

    def set_attr(self, name: str, values: Any) -> None:
        """Set backend attribute `name` in every env: one value for all, or a list with one per env."""
        if not isinstance(name, str) or name.startswith("_"):
            raise ConfigError(f"set_attr() reaches public backend attributes only, not {name!r}.")
        if not isinstance(values, (list, tuple)):
            values = [values] * self.num_envs
        if len(values) != self.num_envs:
            raise ConfigError(f"set_attr got {len(values)} values for {self.num_envs} envs; give one or one per env.")
        for env, value in enumerate(values):
            self._start_calls("__setattr__", (name, value), {}, [env], False, self.vector_config.step_timeout_s)
        self._raise_first(dict(self.call_wait()))

    def render(self, camera: str = "front") -> np.ndarray:  # type: ignore[override]  # a camera to choose
        """An rgb frame of `camera` from every env, stacked: (num_envs, H, W, 3) uint8."""
        return np.stack(self._call_each("render_rgb", (camera,), {}, None, False, self.vector_config.step_timeout_s))

    def get_demos(self, amount: int, seed: int | None = None, variation: int | None = None) -> list[Demo]:
        """Collect `amount` demonstrations spread over all envs at once (env i collects its share
        with its own seed), all of task variation `variation` (None: the backend's fixed one, else each
        drawn). Envs reset on their next step."""
        amount = integer("amount", amount, 1)
        base = self._seed if seed is None else rank_seed(integer("seed", seed, 0), self.num_envs)
        shares = [amount // self.num_envs + (i < amount % self.num_envs) for i in range(self.num_envs)]
        first = self._demo_calls * self.num_envs  # every call draws new demos, not the last call's again
        self._demo_calls += 1
        for i, share in enumerate(shares):
            if share:
                seed_i = None if base is None else base + DEMO_SEED_STRIDE * (first + i)
                self.call_async("get_demos", share, seed_i, variation=variation, env_ids=[i], ends_episode=True)
        results = self._raise_first(dict(self.call_wait()))
        return [demo for env in sorted(results) for demo in results[env]]

    # ------------------------------------------------------------------ stats, info
    def _stats_now(self) -> dict[str, np.ndarray]:
        return self._pool.totals()

    def stats(self) -> dict[str, np.ndarray]:
        """Per-env totals since start or reset_stats(): exec_s (backend steps), write_s (observation
        writes), reset_s, ipc_s (round trips minus the worker's time in them: pipe, scheduling and
        main-process overhead, shared among a command's envs), steps (executed actions), resets,
        restarts, recycles, errors. After close() it returns the last figures."""
        now = self._last_stats if self.closed and self._last_stats is not None else self._stats_now()
        return {key: value - self._stats_baseline[key] for key, value in now.items()}

    def reset_stats(self) -> None:
        self._stats_baseline = self._stats_now()

    @property
    def worker_pids(self) -> list[int]:
        """The pids of the worker processes (each serves envs_per_worker envs)."""
        return self._pool.worker_pids

    def worker_pid(self, env: int) -> int | None:
        """The pid of the worker process serving env."""
        return self._pool.worker_of(env).pid

    @property
    def worker_facts(self) -> list[dict[str, Any]]:
        """What each worker reported at start: pid, and its display, Xvfb and GL renderer if it has one."""
        return [dict(h.facts) for h in self._pool.serving]

    @property
    def shm_name(self) -> str | None:
        buffers = self._resources.buffers
        return None if buffers is None else buffers.name

    def close(self, **kwargs: Any) -> None:
        """Stop every worker (and its Xvfb) and unlink the shared memory. Idempotent, bounded in time."""
        if getattr(self, "_pool", None) is not None and self._last_stats is None:
            self._last_stats = self._stats_now()
        if getattr(self, "_to_tensors", None) is not None:
            self._to_tensors.close()  # unpin the block before it is unlinked
        # A device backend's pages are CUDA IPC mappings of its worker's memory: let them go before the worker
        # exits (else the env, kept alive by its pool's callback until a garbage collection, holds them on).
        self._pages = []
        if getattr(self, "_finalizer", None) is not None:
            self._finalizer()
        self.closed = True

    def __enter__(self) -> RLBenchVectorEnv:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        c = self.env_config
        return f"RLBenchVectorEnv(num_envs={self.num_envs}, task={c.task!r}, backend={c.backend!r})"
