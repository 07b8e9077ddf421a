"""RLBenchVectorEnv: the main-process side. Owns the shared buffers and the worker handles.

Contract (gymnasium vector API, next-step autoreset):
- `reset` / `step` / `step_chunk` return observations as zero-copy views into shared memory when
  copy_obs=False. A view's row for env i is overwritten by the next command that env runs (the next
  step, step_chunk, reset or recv result of that env); pass copy_obs=True or copy what you keep.
- After an episode ends (terminated or truncated), that env's next step resets it instead: its action
  is ignored, the reset observation comes back with reward 0, terminated and truncated False and
  info["autoreset"] True. The final observation is the one returned with the terminal step.
- A worker that dies or misses its deadline is replaced; its env's step returns the new episode's
  first observation with truncated True and info["restarted"] naming why. Other envs are untouched.
"""

from __future__ import annotations

import logging
import time
import weakref
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from . import shm
from .backends import backend_class
from .backends.base import Backend, Demo
from .config import CAMERAS, EnvConfig, VectorConfig, VideoConfig
from .display import check_display
from .distributed import rank_seed, worker_cpus
from .errors import ActionError, ClosedError, ConfigError, RestartBudgetExceeded, WorkerError
from .spec import ArraySpec, action_bounds, action_size, observation_spec
from .supervisor import Failure, Poller, Reply, WorkerHandle
from .worker import CALL, CLOSE, EXECUTED, RESET, REWARD, START, STEP, TERMINATED, TRUNCATED, WorkerSpec, dumps

log = logging.getLogger("rlbench_vec")
CLOSE_TIMEOUT_S = 10.0
# per-env accounting columns, summed from replies (Python floats: no numpy on the per-reply path)
ACCOUNTS = ("round_trip_s", "exec_s", "write_s", "reset_s", "resets", "errors")
DEMO_SEED_STRIDE = 100_003  # a worker's demo seeds: base + stride * (call * num_envs + env)


@dataclass(slots=True)
class Outcome:
    """A finished command of one env, kept until it is handed to the user."""

    info: dict[str, Any] | None = None
    error: WorkerError | None = None
    restarted: str | None = None
    data: Any = None


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


def _merge_infos(infos: Sequence[dict[str, Any] | None]) -> dict[str, Any]:
    """Per-env info dicts -> gymnasium's vector form: info[key] array plus info['_key'] mask."""
    merged: dict[str, Any] = {}
    n = len(infos)
    for row, info in enumerate(infos):
        for key, value in (info or {}).items():
            if key not in merged:
                kind = type(value)
                dtype = kind if kind in (bool, int, float) else object
                merged[key] = np.zeros(n, dtype=dtype) if dtype is not object else np.full(n, None, object)
                merged["_" + key] = np.zeros(n, dtype=bool)
            merged[key][row] = value
            merged["_" + key][row] = True
    return merged


class _Resources:
    """What must be released even if the env object is never closed (finalizer target)."""

    def __init__(self) -> None:
        self.handles: list[WorkerHandle] = []
        self.buffers: shm.SharedBuffers | None = None

    def release(self) -> None:
        for handle in self.handles:
            if handle.pending is not None:
                handle.kill()  # its result would be discarded; do not wait for a slow step to finish
            elif handle.process is not None and handle.process.is_alive():
                handle.send(CLOSE, CLOSE_TIMEOUT_S)
        deadline = time.monotonic() + CLOSE_TIMEOUT_S
        for handle in self.handles:
            handle.stop(max(0.0, deadline - time.monotonic()))
        self.handles = []
        if self.buffers is not None:
            self.buffers.unlink()
            self.buffers = None


class RLBenchVectorEnv(VectorEnv):
    """N RLBench-style environments in N worker processes, observations in shared memory.

    Environment (EnvConfig, the same in every worker): task (RLBench name, snake_case or CamelCase),
    backend ("auto", "rlbench", "mujoco", "synthetic"), cameras, image_size (width, height),
    modalities (rgb, depth, mask, point_cloud), low_dim (None: the backend's default),
    arm_mode ("ik", "planning", "joint_velocity", "joint_position"), absolute_mode, gripper_mode
    ("discrete", "joint_position"), max_episode_steps, depth_in_meters, renderer, backend_options.
    Engine (VectorConfig): num_envs, seed, copy_obs, max_chunk, chunk_obs ("last" or "all"),
    step_timeout_s (per action), reset_timeout_s, start_timeout_s, max_restarts_per_env,
    max_restarts_total, display, cpu_affinity, record (True or a VideoConfig), as_torch, device.
    on_worker_ready(ready, total) is called as workers come up (start-up can take minutes).
    """

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": ["rgb_array"]}
    render_mode = "rgb_array"

    def __init__(
        self,
        num_envs: int = 1,
        task: str = "reach_target",
        backend: str = "auto",
        cameras: Sequence[str] = CAMERAS,
        image_size: tuple[int, int] = (128, 128),
        modalities: Sequence[str] = ("rgb", "depth", "mask"),
        low_dim: Sequence[str] | None = None,
        arm_mode: str = "ik",
        absolute_mode: bool = True,
        gripper_mode: str = "discrete",
        max_episode_steps: int = 200,
        depth_in_meters: bool = False,
        renderer: str | None = None,
        backend_options: dict[str, Any] | None = None,
        copy_obs: bool = False,
        seed: int | None = 0,
        max_chunk: int = 16,
        chunk_obs: str = "last",
        step_timeout_s: float = 60.0,
        reset_timeout_s: float = 300.0,
        start_timeout_s: float = 300.0,
        max_restarts_per_env: int = 5,
        max_restarts_total: int = 50,
        display: str | list[str] | None = None,
        cpu_affinity: bool = False,
        record: bool | VideoConfig = False,
        as_torch: bool = False,
        device: str | None = None,
        on_worker_ready: Callable[[int, int], None] | None = None,
    ):
        env_config = EnvConfig(
            task=task, backend=backend, cameras=tuple(cameras), image_size=tuple(image_size),
            modalities=tuple(modalities), low_dim=None if low_dim is None else tuple(low_dim), arm_mode=arm_mode,
            absolute_mode=absolute_mode, gripper_mode=gripper_mode, max_episode_steps=max_episode_steps,
            depth_in_meters=depth_in_meters, renderer=renderer, backend_options=backend_options or {},
        )
        vector_config = VectorConfig(
            num_envs=num_envs, seed=seed, copy_obs=copy_obs, max_chunk=max_chunk, chunk_obs=chunk_obs,
            step_timeout_s=step_timeout_s, reset_timeout_s=reset_timeout_s, start_timeout_s=start_timeout_s,
            max_restarts_per_env=max_restarts_per_env, max_restarts_total=max_restarts_total, display=display,
            cpu_affinity=cpu_affinity, video=VideoConfig() if record is True else (record or None),
            as_torch=as_torch, device=device,
        )
        self._setup(env_config, vector_config, on_worker_ready)

    @classmethod
    def from_config(
        cls, env_config: EnvConfig, vector_config: VectorConfig,
        on_worker_ready: Callable[[int, int], None] | None = None,
    ) -> "RLBenchVectorEnv":
        env = cls.__new__(cls)
        env._setup(env_config, vector_config, on_worker_ready)
        return env

    # ------------------------------------------------------------------ setup
    def _setup(self, env_config: EnvConfig, vector_config: VectorConfig, on_worker_ready) -> None:
        self.closed = True  # until every worker is up
        config = env_config.validated()
        backend_type = backend_class(config.backend)
        backend_type.validate(config)
        if vector_config.video is not None and backend_type.render_rgb is Backend.render_rgb:
            raise ConfigError(f"the {config.backend} backend renders no video frames: record with another backend.")
        self.env_config = config
        self.vector_config = vector_config.validated()
        n = self.num_envs = self.vector_config.num_envs
        self._obs_spec = observation_spec(config)
        self._action_size = action_size(config)
        self._action_low, self._action_high = action_bounds(config)

        self.single_observation_space = gym.spaces.Dict({k: _space(s) for k, s in self._obs_spec.items()})
        self.observation_space = batch_space(self.single_observation_space, n)
        self.single_action_space = gym.spaces.Box(self._action_low, self._action_high, dtype=np.float32)
        self.action_space = batch_space(self.single_action_space, n)

        check_display(self.vector_config.display, backend_type.needs_display(config))
        shm.sweep_stale_segments()
        self._resources = _Resources()
        self._poller = Poller()
        self._finalizer = weakref.finalize(self, self._resources.release)
        self._resources.buffers = shm.SharedBuffers.create(self._buffer_plan())
        arrays = self._resources.buffers.arrays
        self._obs = self._resources.buffers.group("obs")
        self._chunk_obs = self._resources.buffers.group("chunk_obs")
        self._actions, self._outcome = arrays["actions"], arrays["outcome"]

        self._needs_reset = np.ones(n, dtype=bool)
        self._restart_noop = np.zeros(n, dtype=bool)
        self._awaiting: dict[int, tuple[str, int, bool]] = {}  # env -> (command, k, chunked)
        self._done: dict[int, Outcome] = {}
        self._restart_reason: dict[int, str] = {}
        self._restarts_total = 0
        self._first_reset = True
        self._demo_calls = 0
        self._reset_options: dict[str, Any] | None = None
        self._seed = rank_seed(self.vector_config.seed, n)
        self._to_tensors = None
        self._accounts = [[0.0] * len(ACCOUNTS) for _ in range(n)]
        self._steps = np.zeros(n)  # executed actions
        self.start_time_s = 0.0
        try:
            if self.vector_config.as_torch:  # inside the try: no torch or no GPU must not leak the block
                from .tensors import TensorConverter

                self._to_tensors = TensorConverter(self._obs, self.vector_config.device)
            self._start_workers(on_worker_ready)
        except BaseException:
            self._finalizer()
            raise
        self._stats_baseline = self._stats_now()
        self.closed = False

    def _buffer_plan(self) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        n, k = self.num_envs, self.vector_config.max_chunk
        plan = {f"obs/{key}": ((n, *s.shape), s.dtype) for key, s in self._obs_spec.items()}
        if self.vector_config.chunk_obs == "all":
            plan.update({f"chunk_obs/{key}": ((n, k, *s.shape), s.dtype) for key, s in self._obs_spec.items()})
        plan.update({
            "actions": ((n, k, self._action_size), np.dtype(np.float32)),
            "outcome": ((n, 4, k), np.dtype(np.float64)),
        })
        return plan

    def _start_workers(self, on_worker_ready) -> None:
        started = time.monotonic()
        vc = self.vector_config
        cpus = worker_cpus(self.num_envs) if vc.cpu_affinity else [None] * self.num_envs
        for i in range(self.num_envs):
            display = vc.display[i] if isinstance(vc.display, (list, tuple)) else vc.display
            records = vc.video is not None and (vc.video.env_ids is None or i in vc.video.env_ids)
            config = replace(self.env_config, video_cameras=vc.video.cameras) if records else self.env_config
            spec = WorkerSpec(
                env_index=i, config=config, shm_name=self._resources.buffers.name,
                fields=self._resources.buffers.fields, display=display, max_chunk=vc.max_chunk,
                chunk_obs=vc.chunk_obs, parent_pid=0, cpu_affinity=cpus[i], video=vc.video if records else None,
            )
            handle = WorkerHandle(spec, self._poller)
            self._resources.handles.append(handle)
            handle.start(vc.start_timeout_s)
        ready = 0
        while any(h.pending is not None for h in self._workers):
            for handle in self._pump(None):
                ready += 1
                if on_worker_ready is not None:
                    on_worker_ready(ready, self.num_envs)
        self.start_time_s = time.monotonic() - started

    @property
    def _workers(self) -> list[WorkerHandle]:
        return self._resources.handles

    # ------------------------------------------------------------------ worker events
    def _pump(self, timeout_s: float | None) -> list[WorkerHandle]:
        """Wait once for worker messages, handle them, enforce deadlines. Returns handles that
        became idle. A worker found dead while idle is restarted at once."""
        wait_s = max(0.0, self._poller.earliest_deadline - time.monotonic())
        if timeout_s is not None:
            wait_s = min(wait_s, timeout_s)
        idle = []
        for handle in self._poller.wait(wait_s):
            message = handle.receive()
            if message is not None and self._handle(handle, message):
                idle.append(handle)
        now = time.monotonic()
        if now > self._poller.earliest_deadline:
            for handle in self._workers:
                if handle.overdue(now):
                    pending = handle.pending
                    self._restart(handle, f"no reply to {pending.command} within {pending.deadline - pending.sent_at:.1f} s")
            self._poller.recompute_deadline(self._workers)
        return idle

    def _handle(self, handle: WorkerHandle, message: Reply | Failure) -> bool:
        i = handle.spec.env_index
        if isinstance(message, Failure):
            self._restart(handle, f"{message.reason} during {message.command}")
            return False
        restarting = i in self._restart_reason
        if message.command == START:
            if message.ok and restarting:
                body = dumps((self._restart_seed(i, handle.restarts), self._reset_options))
                handle.send(RESET, self.vector_config.reset_timeout_s, body=body)
                return False
            if not message.ok:
                error = WorkerError(i, f"worker failed to start: {message.data[0]}", message.data[1])
                if not restarting:
                    raise error
                self._restart(handle, error.args[0])
                return False
            return True
        if message.command != CALL:
            self._account(i, message)
        if restarting:
            if not message.ok:
                self._restart(handle, f"reset after restart failed: {message.data[0]}")
                return False
            reason = self._restart_reason.pop(i)
            command = self._awaiting.get(i, (None,))[0]
            outcome = Outcome(info=dict(message.data or {}), restarted=reason)
            if command == CALL:
                outcome.error = WorkerError(i, f"the worker was restarted during call(): {reason}")
            self._needs_reset[i] = False
            self._done[i] = outcome
            return True
        if not message.ok:
            self._needs_reset[i] |= message.command != CALL  # a failed call leaves the episode as it was
            self._accounts[i][ACCOUNTS.index("errors")] += 1
            self._done[i] = Outcome(error=WorkerError(i, message.data[0], message.data[1]))
            return True
        if message.command == CALL:
            self._done[i] = Outcome(data=message.data)
        else:
            self._done[i] = Outcome(info=message.data)
        return True

    def _restart_seed(self, i: int, restarts: int) -> int:
        entropy = [self._seed or 0, i, restarts]
        return int(np.random.SeedSequence(entropy).generate_state(1)[0])

    def _restart(self, handle: WorkerHandle, reason: str) -> None:
        i = handle.spec.env_index
        handle.kill()
        handle.restarts += 1
        self._restarts_total += 1
        vc = self.vector_config
        if handle.restarts > vc.max_restarts_per_env or self._restarts_total > vc.max_restarts_total:
            self.close()  # a half-dead env could only hang later calls
            raise RestartBudgetExceeded(
                f"env {i}: {reason}; restarts so far: {handle.restarts} for this env, {self._restarts_total} in "
                f"total (limits max_restarts_per_env={vc.max_restarts_per_env}, max_restarts_total="
                f"{vc.max_restarts_total}). The simulator keeps failing: check the worker's stderr above, "
                "or raise the limits. This vector env is closed."
            )
        log.warning("env %d: %s; restarting its worker (restart %d)", i, reason, handle.restarts)
        self._restart_reason[i] = self._restart_reason.get(i, reason)
        self._wait_for_gpu_copies()  # the new worker resets and writes its rows
        handle.start(vc.start_timeout_s)

    def _wait_for(self, env_ids: set[int], min_count: int, timeout: float | None) -> list[int]:
        """Block until at least min_count of env_ids have outcomes; return all that do."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            done = [i for i in env_ids if i in self._done]
            if len(done) >= min_count:
                return sorted(done)
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise TimeoutError(
                    f"{len(done)} of the {min_count} envs needed finished within {timeout} s; "
                    "the others are still running: call again to collect them."
                )
            self._pump(left)

    # ------------------------------------------------------------------ user commands
    def _check_open(self) -> None:
        if self.closed:
            raise ClosedError("this RLBenchVectorEnv is closed; create a new one.")

    def _check_actions(self, actions: Any, count: int, chunked: bool) -> np.ndarray:
        """(count, A) or (count, K, A) floats -> float32 (count, K, A); gripper clipped to its bounds."""
        array = np.asarray(actions)
        if array.dtype.kind not in "fiu":
            raise ActionError(f"actions must be a real-valued array, got dtype {array.dtype}.")
        a = self._action_size
        expected = f"({count}, K, {a}) with 1 <= K <= max_chunk={self.vector_config.max_chunk}" if chunked else f"({count}, {a})"
        ndim = 3 if chunked else 2
        if array.ndim != ndim or array.shape[0] != count or array.shape[-1] != a or (
            chunked and not 1 <= array.shape[1] <= self.vector_config.max_chunk
        ):
            raise ActionError(
                f"actions have shape {array.shape}; expected {expected} for arm_mode={self.env_config.arm_mode!r} "
                f"+ gripper_mode={self.env_config.gripper_mode!r}."
            )
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
        ids = np.asarray(env_ids, dtype=np.int64).reshape(-1)
        if ids.size == 0 or ids.min() < 0 or ids.max() >= self.num_envs or len(set(ids.tolist())) != ids.size:
            raise ConfigError(f"env_ids must be distinct integers in [0, {self.num_envs}), got {env_ids!r}.")
        return ids

    def _finish_restarts(self) -> None:
        while self._restart_reason:
            self._pump(None)

    def _reset_seeds(self, seed: int | Sequence[int] | None) -> list[int | None]:
        if seed is None and self._first_reset:
            seed = self.vector_config.seed
        if seed is None or isinstance(seed, (int, np.integer)):
            base = rank_seed(None if seed is None else int(seed), self.num_envs)
            seeds = [None if base is None else base + i for i in range(self.num_envs)]
        else:
            seeds = list(seed)
            if len(seeds) != self.num_envs:
                raise ConfigError(f"reset got {len(seeds)} seeds for {self.num_envs} envs; give one per env.")
        if not all(s is None or (isinstance(s, (int, np.integer)) and s >= 0) for s in seeds):
            raise ConfigError(f"seeds must be integers >= 0 (or None), got {seed!r}.")
        return [None if s is None else int(s) for s in seeds]

    def reset(self, *, seed: int | Sequence[int] | None = None, options: dict[str, Any] | None = None):
        """Reset every env. seed: int -> env i gets seed + i (+ RANK * num_envs under torchrun, so
        ranks never share seeds); a list gives one seed per env, verbatim; None uses the constructor's
        seed on the first reset and continues each env's random stream afterwards. Commands still in
        flight are finished and their results discarded."""
        self._check_open()
        bodies = [_pickled((s, options), "reset options") for s in self._reset_seeds(seed)]
        self._reset_options = options  # a restarted worker's new episode starts the same way
        self._wait_for(set(self._awaiting), len(self._awaiting), None)
        self._finish_restarts()
        self._done.clear()
        self._awaiting.clear()
        self._first_reset = False
        self._restart_noop[:] = False
        self._wait_for_gpu_copies()
        for i, handle in enumerate(self._workers):
            self._awaiting[i] = (RESET, 1, False)
            handle.send(RESET, self.vector_config.reset_timeout_s, body=bodies[i])
        ids = self._wait_for(set(range(self.num_envs)), self.num_envs, None)
        obs, _, _, _, info = self._collect(np.asarray(ids))
        return obs, info

    def send(self, actions: Any, env_ids: Any = None) -> None:
        """Start a step for env_ids (all by default): actions (M, A) for one step, (M, K, A) for a chunk."""
        self._check_open()
        ids = self._env_ids(env_ids)
        busy = [int(i) for i in ids if int(i) in self._awaiting]
        if busy:
            raise ConfigError(f"envs {busy} still have a step in flight; recv() their results first.")
        chunked = np.ndim(actions) == 3
        batch = self._check_actions(actions, len(ids), chunked)
        k = batch.shape[1]
        self._wait_for_gpu_copies()
        if env_ids is None:
            self._actions[:, :k] = batch
        else:
            self._actions[ids, :k] = batch
        command = (STEP, k, chunked)
        step_timeout, reset_timeout = self.vector_config.step_timeout_s * k, self.vector_config.reset_timeout_s
        for i, needs_reset, noop in zip(ids.tolist(), self._needs_reset[ids].tolist(), self._restart_noop[ids].tolist()):
            self._awaiting[i] = command
            if i in self._restart_reason or i in self._done:
                continue  # a restart is under way or done: its outcome answers this step
            if noop:
                # the restart already reset this env: this is its (free) next-step autoreset
                self._restart_noop[i] = False
                self._outcome[i] = 0.0
                self._done[i] = Outcome(info={"autoreset": True})
                continue
            self._workers[i].send(STEP, reset_timeout if needs_reset else step_timeout, k=k)

    def recv(self, min_envs: int | None = None, timeout: float | None = None):
        """Results of at least min_envs (default: all in flight) of the envs sent to, whichever finish
        first. Returns (obs, reward, terminated, truncated, info) for those envs only, in
        info["env_id"] order; arrays are gathered copies unless every env is returned."""
        self._check_open()
        waiting = set(self._awaiting)
        if not waiting:
            raise ConfigError("recv() has nothing to wait for: send() actions first.")
        count = len(waiting) if min_envs is None else min_envs
        if not 1 <= count <= len(waiting):
            raise ConfigError(f"min_envs must be in [1, {len(waiting)}] (envs in flight), got {min_envs}.")
        ids = np.asarray(self._wait_for(waiting, count, timeout))
        result = self._collect(ids)
        result[4]["env_id"] = ids
        return result

    def step_async(self, actions: Any) -> None:
        self.send(actions)

    def step_wait(self, timeout: float | None = None):
        self._check_open()
        if len(self._awaiting) != self.num_envs or any(c[0] != STEP for c in self._awaiting.values()):
            raise ConfigError("step_wait() collects the full batch that step_async() sent; use recv() for "
                              "envs sent to with send(env_ids=...).")
        self._wait_for(set(self._awaiting), len(self._awaiting), timeout)
        return self._collect(np.arange(self.num_envs))

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
            raise ActionError(f"step_chunk() takes actions of shape ({self.num_envs}, K, {self._action_size}); got {np.shape(actions)}.")
        self.step_async(actions)
        return self.step_wait()

    def _collect(self, ids: np.ndarray):
        """Hand the outcomes of `ids` to the user as a batch. A worker error is raised after every
        outcome was taken out and every flag updated, so no env is left half-served."""
        full = len(ids) == self.num_envs
        rows = slice(None) if full else ids
        id_list = ids.tolist()
        commands = [self._awaiting.pop(i) for i in id_list]
        outcomes = [self._done.pop(i) for i in id_list]
        errors = [o.error for o in outcomes if o.error is not None]
        k = max(c[1] for c in commands)
        block = self._outcome[rows, :, :k]
        if errors or any(c[0] != STEP or c[1] != k for c in commands):
            # a worker writes outcome columns only for the actions of a step it ran: mask the rest
            widths = [c[1] if c[0] == STEP and o.error is None else 0 for c, o in zip(commands, outcomes)]
            block = np.where(np.arange(k) < np.array(widths)[:, None, None], block, 0.0)
        reward = block[:, REWARD].copy()
        flags = block[:, TERMINATED:] > 0  # one comparison for all three flag rows
        terminated, truncated, executed = (flags[:, row - TERMINATED] for row in (TERMINATED, TRUNCATED, EXECUTED))
        infos = [o.info for o in outcomes]
        for row, outcome in enumerate(outcomes):
            if outcome.restarted is not None:
                infos[row] = {**(infos[row] or {}), "restarted": True, "restart_reason": outcome.restarted}
                if commands[row][0] == STEP:
                    reward[row], terminated[row], truncated[row], executed[row] = 0.0, False, False, False
                    truncated[row, 0] = True
                    self._restart_noop[ids[row]] = True
        ended = flags[:, : TRUNCATED - TERMINATED + 1].any(axis=(1, 2))
        if errors:
            ended |= np.array([o.error is not None and c[0] != CALL for c, o in zip(commands, outcomes)])
        self._needs_reset[rows] = ended
        self._steps[rows] += executed.sum(axis=1)
        if errors:
            raise errors[0]
        if not full:
            obs = {key: view[ids] for key, view in self._obs.items()}  # fancy indexing copies
        elif self.vector_config.copy_obs:
            obs = {key: view.copy() for key, view in self._obs.items()}
        else:
            obs = dict(self._obs)
        info = _merge_infos(infos) if any(infos) else {}
        if any(c[2] for c in commands):
            info["executed"] = executed
            if self._chunk_obs:
                copy = self.vector_config.copy_obs and full
                info["chunk_observations"] = {
                    key: view[rows, :k].copy() if copy else view[rows, :k] for key, view in self._chunk_obs.items()
                }
            result = (obs, reward, terminated, truncated, info)
        else:
            result = (obs, reward[:, 0], terminated[:, 0], truncated[:, 0], info)
        return result if self._to_tensors is None else self._to_tensors(result, full)

    # ------------------------------------------------------------------ calls, demos, stats
    def _call_each(self, calls: dict[int, tuple], timeout_s: float = float("inf")) -> list[Any]:
        """Run one backend call per env, all at once: calls[env] = (name, args, kwargs, ends_episode).
        A worker that misses timeout_s is restarted and the call raises; the default is no deadline
        (demo collection can take hours). A worker death ends a call either way."""
        self._check_open()
        if self._awaiting:
            raise ConfigError(f"envs {sorted(self._awaiting)} have steps in flight: recv() them before call(), "
                              "get_attr(), set_attr(), render() or get_demos().")
        bodies = {i: _pickled(payload, f"the arguments of {payload[0]}()") for i, payload in calls.items()}
        self._finish_restarts()
        # a finished restart's notice belongs to that env's next step: keep it out of the call's way
        held = {i: self._done.pop(i) for i in calls if i in self._done}
        for i, body in bodies.items():
            self._awaiting[i] = (CALL, 1, False)
            self._workers[i].send(CALL, timeout_s, body=body)
        self._wait_for(set(calls), len(calls), None)
        outcomes = []
        for i, (_, _, _, ends_episode) in calls.items():
            self._awaiting.pop(i)
            outcomes.append(self._done.pop(i))
            if ends_episode:  # the worker resets on the env's next step, which reports that instead
                self._needs_reset[i], self._restart_noop[i] = True, False
                held.pop(i, None)
        self._done.update(held)
        errors = [o.error for o in outcomes if o.error is not None]
        if errors:
            raise errors[0]
        return [o.data for o in outcomes]

    def call(self, name: str, *args: Any, env_ids: Any = None, ends_episode: bool = False, **kwargs: Any) -> tuple:
        """Call backend method `name` in each worker (or env_ids), or read the attribute when it is not
        callable (gymnasium's semantics); results in env order. ends_episode=True makes those envs
        reset on their next step (e.g. after collecting demos). No deadline: a method may run long.
        get_attr, set_attr and render, which are quick, get step_timeout_s."""
        if name.startswith("_"):
            raise ConfigError(f"call() reaches public backend attributes only, not {name!r}.")
        ids = self._env_ids(env_ids).tolist()
        return tuple(self._call_each({i: (name, args, kwargs, ends_episode) for i in ids}))

    def get_attr(self, name: str) -> tuple:
        if name.startswith("_"):
            raise ConfigError(f"get_attr() reaches public backend attributes only, not {name!r}.")
        calls = {i: (name, (), {}, False) for i in range(self.num_envs)}
        return tuple(self._call_each(calls, self.vector_config.step_timeout_s))

    def set_attr(self, name: str, values: Any) -> None:
        """Set backend attribute `name` in every worker: one value for all, or a list with one per env."""
        if name.startswith("_"):
            raise ConfigError(f"set_attr() reaches public backend attributes only, not {name!r}.")
        if not isinstance(values, (list, tuple)):
            values = [values] * self.num_envs
        if len(values) != self.num_envs:
            raise ConfigError(f"set_attr got {len(values)} values for {self.num_envs} envs; give one or one per env.")
        calls = {i: ("__setattr__", (name, value), {}, False) for i, value in enumerate(values)}
        self._call_each(calls, self.vector_config.step_timeout_s)

    def render(self, camera: str = "front") -> np.ndarray:
        """An rgb frame of `camera` from every env, stacked: (num_envs, H, W, 3) uint8."""
        calls = {i: ("render_rgb", (camera,), {}, False) for i in range(self.num_envs)}
        return np.stack(self._call_each(calls, self.vector_config.step_timeout_s))

    def get_demos(self, amount: int, seed: int | None = None) -> list[Demo]:
        """Collect `amount` demonstrations spread over all workers at once (env i collects its share
        with its own seed). Envs reset on their next step."""
        if not isinstance(amount, (int, np.integer)) or amount < 1:
            raise ConfigError(f"amount must be an integer >= 1, got {amount!r}.")
        base = self._seed if seed is None else rank_seed(seed, self.num_envs)
        shares = [amount // self.num_envs + (i < amount % self.num_envs) for i in range(self.num_envs)]
        first = self._demo_calls * self.num_envs  # every call draws new demos, not the last call's again
        self._demo_calls += 1
        calls = {
            i: ("get_demos", (share, None if base is None else base + DEMO_SEED_STRIDE * (first + i)), {}, True)
            for i, share in enumerate(shares) if share > 0
        }
        return [demo for demos in self._call_each(calls) for demo in demos]

    def _account(self, i: int, reply: Reply) -> None:
        exec_s, write_s, reset_s = reply.times
        account = self._accounts[i]
        account[0] += reply.round_trip_s
        account[1] += exec_s
        account[2] += write_s
        if reset_s:
            account[3] += reset_s
            account[4] += 1

    def _stats_now(self) -> dict[str, np.ndarray]:
        now = dict(zip(ACCOUNTS, np.array(self._accounts, dtype=float).T))
        now["steps"] = self._steps.copy()
        now["restarts"] = np.array([h.restarts for h in self._workers], dtype=float)
        return now

    def stats(self) -> dict[str, np.ndarray]:
        """Per-env totals since start or reset_stats(): exec_s (backend steps), write_s (observation
        writes), reset_s, ipc_s (round trips of step/reset commands minus the worker's time in them:
        pipe, scheduling and main-process overhead), steps (executed actions), resets, restarts, errors."""
        out = {key: value - self._stats_baseline[key] for key, value in self._stats_now().items()}
        round_trip = out.pop("round_trip_s")
        out["ipc_s"] = np.maximum(0.0, round_trip - out["exec_s"] - out["write_s"] - out["reset_s"])
        return out

    def reset_stats(self) -> None:
        self._stats_baseline = self._stats_now()

    @property
    def worker_pids(self) -> list[int]:
        return [h.process.pid for h in self._workers if h.process is not None]

    @property
    def shm_name(self) -> str | None:
        return None if self._resources.buffers is None else self._resources.buffers.name

    def _wait_for_gpu_copies(self) -> None:
        """With device="cuda", copies out of shared memory may still run: workers must not write yet."""
        if self._to_tensors is not None:
            self._to_tensors.wait_copies()

    def close(self, **kwargs: Any) -> None:
        """Stop every worker (and its Xvfb) and unlink the shared memory. Idempotent, bounded in time."""
        if getattr(self, "_to_tensors", None) is not None:
            self._to_tensors.close()  # unpin the block before it is unlinked
        if getattr(self, "_finalizer", None) is not None:
            self._finalizer()
        self.closed = True

    def __enter__(self) -> "RLBenchVectorEnv":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        c = self.env_config
        return f"RLBenchVectorEnv(num_envs={self.num_envs}, task={c.task!r}, backend={c.backend!r})"
