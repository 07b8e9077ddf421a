"""RLBenchVectorEnv: the public front. Validates what the user passes, keeps gymnasium's vector
contract, and hands the work to the worker pool (rlbench_vec.engine.pool) and the batch assembly
(rlbench_vec.engine.results).

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

import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv

from .backends.base import Demo
from .config import EnvConfig, VectorConfig, split_options
from .display.xvfb import sweep_stale_displays
from .engine import checks, interrupts
from .engine.calls import Calls, in_env_order, public, raise_first
from .engine.envtable import IDLE
from .engine.output import Output
from .engine.plan import make_plan
from .engine.pool import Pool, Resources
from .engine.results import Batch
from .errors import ActionError, ClosedError, ConfigError, ResetNeeded, WorkerError
from .spec import action_size, action_space, batched_observations, observation_space
from .wire import shm
from .wire.process import bootstrapping
from .wire.protocol import OBSERVE, RESULT

AUTORESET = {"next_step": AutoresetMode.NEXT_STEP, "same_step": AutoresetMode.SAME_STEP,
             "disabled": AutoresetMode.DISABLED}


@interrupts.hold_in_public_methods
class RLBenchVectorEnv(VectorEnv):
    """num_envs RLBench-style environments in worker processes, observations in shared memory.

    Options (keyword): every field of EnvConfig (task, backend, cameras, arm_mode, ...) and of VectorConfig
    (envs_per_worker, seed, copy_obs, clip_actions, ...), each explained in its class's docstring.
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
        plan = make_plan(env_config, vector_config)
        config, vc, layout = plan.config, plan.vc, plan.layout
        self.env_config, self.vector_config = config, vc
        self.autoreset_mode = AUTORESET[vc.autoreset_mode]  # read by wrappers such as TorchRL's GymWrapper
        self.metadata = {**type(self).metadata, "autoreset_mode": self.autoreset_mode}
        n = self.num_envs = vc.num_envs
        self._action_size = action_size(config)
        self.single_observation_space = observation_space(config, layout)
        self.observation_space = batched_observations(self.single_observation_space, n)
        self.single_action_space = action_space(config)  # its samples are valid actions
        self.action_space = self.single_action_space.batched(n)
        self._action_low, self._action_high = self.single_action_space.low, self.single_action_space.high
        shm.sweep_stale_segments()
        sweep_stale_displays()

        self._resources = Resources()
        self._finalizer = weakref.finalize(self, self._resources.release)
        try:
            buffers = self._resources.buffers = shm.SharedBuffers.create(plan.block)
            self._actions = buffers.arrays["actions"]
            # inside the try: no torch or no GPU must not leak the block
            output = self._output = Output(buffers, n, vc.copy_obs, vc.as_torch, vc.device)
            self._pool = self._resources.pool = Pool(config, vc, buffers, plan.envs_per_worker, output.wait_copies,
                                                     output.use_device_pages if plan.on_device else None)
            started = time.monotonic()
            self._pool.start(on_worker_ready)
            self.start_time_s = time.monotonic() - started
        except BaseException:
            self._finalizer()
            raise
        self._tasks = [config.task_of(env) for env in range(n)]  # each env's task now
        self._state_size = layout["task_low_dim_state"].shape[0] if "task_low_dim_state" in layout else 0
        self._chunked = np.zeros(n, bool)
        self._sync: bool | None = None  # the mode of what is in flight: full batch (True) or partial
        self._interrupted = False
        self._first_reset = True
        self._calls = Calls(self._pool, n, vc.seed)
        self._stats_baseline = self._pool.totals()
        self._last_stats: dict[str, np.ndarray] | None = None
        self.closed = False

    # ------------------------------------------------------------------ checks
    def _check_open(self) -> None:
        if self.closed or self._pool.closed:
            self.closed = True
            raise ClosedError("this RLBenchVectorEnv is closed; create a new one.")
        if self._interrupted:  # a call was interrupted (Ctrl-C): settle what it left in flight
            self._pool.drain()
            self._interrupted, self._sync = False, None

    def _check_actions(self, values: Any, ids: Any, chunked: bool) -> np.ndarray:
        batch, self._output.clipped[ids] = checks.actions(values, len(ids), chunked, self.vector_config.max_chunk,
                                                          self.env_config, self._action_low, self._action_high,
                                                          self.vector_config.clip_actions)
        return batch

    def _check_idle(self, ids: np.ndarray, what: str) -> None:
        if not self._pool.table.busy:
            return
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
    def _collect(self, ordered: bool, count: int, timeout: float | None) -> Batch:
        try:
            batch = self._pool.collect(ordered, count, timeout)
        except BaseException as error:
            if not isinstance(error, WorkerError):  # a batch left half collected is settled next call
                self._interrupted = ordered or not self._pool.settled
            raise
        if batch is None:
            raise TimeoutError(f"fewer than {count} envs finished within {timeout} s; the others are still running: "
                               "call again to collect them.")
        if not self._pool.table.busy:
            self._sync = None
        return batch

    # ------------------------------------------------------------------ gymnasium API
    def reset(self, *, seed: int | Sequence[int | None] | None = None, options: dict[str, Any] | None = None):
        """Reset every env (or, with autoreset_mode="disabled", those in options["reset_mask"]).
        seed: an int gives env i seed + i (+ RANK * num_envs under torchrun, so ranks never share
        seeds); a list gives one seed per env; None uses the constructor's seed on the first reset and
        continues each env's random stream afterwards. options["env_options"]: one dict per env,
        merged over the other options for that env. options["task"] (or an env's own) changes the env's task
        where the backend can (not mjwarp): a task of the backend whose task_low_dim_state fits this vector
        env's. Commands still in flight are finished and their results discarded."""
        self._check_open()
        seeds = checks.reset_seeds(self.vector_config.seed if seed is None and self._first_reset else seed,
                                   self.num_envs)
        options_per_env, mask = checks.reset_options(options, self.num_envs, self.vector_config.autoreset_mode)
        options_per_env, self._tasks = checks.reset_tasks(options_per_env, mask, self._tasks, self.env_config,
                                                          self.vector_config, self._state_size)
        if self._pool.table.busy:
            self._pool.drain()
            self._output.clipped[:] = False  # the flags of the steps drained
        self._first_reset = False
        kinds = np.where(mask, RESULT, OBSERVE).tolist()
        self._pool.reset(np.arange(self.num_envs), seeds, options_per_env, kinds)
        self._sync = True
        obs, _, _, _, info = self._output.result(self._collect(True, self.num_envs, None), chunked=False)
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
        everyone = self._pool.everyone
        self._check_idle(everyone, "step()")
        chunked = np.ndim(actions) == 3
        batch = self._check_actions(actions, everyone, chunked)
        self._check_episodes(everyone)
        self._actions[:, :batch.shape[1]] = batch
        self._pool.step(everyone, batch.shape[1], ordered=True)
        self._chunked[:], self._sync = chunked, True

    def step_wait(self, timeout: float | None = None):
        self._check_open()
        if self._sync is not True:
            raise ConfigError("step_wait() collects the full batch that step_async() sent; use recv() for envs sent "
                              "to with send().")
        return self._output.result(self._collect(True, self.num_envs, timeout), bool(self._chunked[0]))

    def send(self, actions: Any, env_ids: Any = None) -> None:
        """Start a step for env_ids (all by default): actions (M, A) for one step, (M, K, A) for a chunk.
        Results come back with recv(), in the order the envs finish."""
        self._check_open()
        ids = checks.env_ids(env_ids, self.num_envs)
        if self._sync:
            raise ConfigError("a full batch from step_async() is in flight: step_wait() it before send().")
        self._check_idle(ids, "send()")
        chunked = np.ndim(actions) == 3
        batch = self._check_actions(actions, ids, chunked)
        self._check_episodes(ids)
        k = batch.shape[1]
        if env_ids is None:
            self._actions[:, :k] = batch
        else:
            self._actions[ids, :k] = batch
        self._pool.step(ids, k, ordered=False)
        self._chunked[ids], self._sync = chunked, False

    def send_reset(self, env_ids: Any = None, seeds: Sequence[int | None] | None = None,
                   options: dict[str, Any] | None = None) -> None:
        """Start new episodes for env_ids (all by default) while other envs may still be stepping (send/recv):
        their first observations come back with recv(), in the order they finish, like steps' (reward 0, not
        terminated, info with the reset's). seeds: one per env of env_ids (None: each env goes on with its
        random stream); options as reset()'s, options["env_options"] one dict per env of env_ids. With
        autoreset_mode="disabled", how an evaluation starts an env's next episode without waiting for others."""
        self._check_open()
        ids = checks.env_ids(env_ids, self.num_envs)
        if self._sync:
            raise ConfigError("a full batch from step_async() is in flight: step_wait() it before send_reset().")
        self._check_idle(ids, "send_reset()")
        mode = self.vector_config.autoreset_mode
        every_seed, options_of, mask = checks.partial_reset(ids, seeds, options, self.num_envs, mode)
        options_of, tasks = checks.reset_tasks(options_of, mask, self._tasks, self.env_config, self.vector_config,
                                               self._state_size)
        self._pool.reset(ids, every_seed, options_of, [RESULT] * self.num_envs, ordered=False)
        self._tasks = tasks
        self._chunked[ids], self._sync = False, False

    def recv(self, min_envs: int | None = None, timeout: float | None = None):
        """The results of at least min_envs (default: all) of the envs sent to, in the order they
        finished: (obs, reward, terminated, truncated, info) for those envs only; info["env_id"] says
        which env each row is. Observations are views of one contiguous block of shared memory
        (copies with copy_obs=True), valid until your next reset/step/recv call returns. Envs that
        finish after min_envs others took their rows come back with the next recv. timeout
        (seconds): raise TimeoutError if fewer than min_envs have finished by then (results already
        being written are waited for)."""
        self._check_open()
        waiting = self._pool.table.busy
        if not waiting or self._sync:
            raise ConfigError("recv() has nothing to wait for: send() actions first"
                              + (" (step_async() is collected by step_wait())." if self._sync else "."))
        count = waiting if min_envs is None else min_envs
        if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or not 1 <= count <= waiting:
            raise ConfigError(f"min_envs must be an integer in [1, {waiting}] (envs in flight), got {min_envs!r}.")
        batch = self._collect(False, int(count), timeout)
        return self._output.result(batch, bool(self._chunked[batch.envs].any()), env_ids=batch.envs)

    # ------------------------------------------------------------------ calls, demos
    def _call_ids(self, env_ids: Any, what: str) -> np.ndarray:
        self._check_open()
        ids = checks.env_ids(env_ids, self.num_envs)
        if self._sync is not None:
            raise ConfigError("steps are in flight: collect them with step_wait(), or recv() them before call(), "
                              "get_attr(), set_attr(), render() or get_demos().")
        self._check_idle(ids, what)
        return ids

    def call_async(self, name: str, *args: Any, env_ids: Any = None, ends_episode: bool = False,
                   timeout: float | None = None, **kwargs: Any) -> None:
        """Start backend method `name` in each env of env_ids (all by default); collect with call_wait().
        ends_episode=True makes those envs reset at their next step. timeout (seconds, per env) kills
        and restarts a worker that takes longer; None: no deadline (collecting demos can take hours)."""
        self._calls.start(self._call_ids(env_ids, "call()"), public(name, "call()"), args, kwargs, ends_episode,
                          timeout)

    def call_wait(self, min_envs: int | None = None, timeout: float | None = None) -> list[tuple[int, Any]]:
        """Finished calls of call_async(), at least min_envs (default: all): (env, result) pairs, the
        result a WorkerError if the call raised or its worker died."""
        self._check_open()
        try:
            return self._calls.wait(min_envs, timeout)
        except BaseException as error:
            if not isinstance(error, (WorkerError, ConfigError, TimeoutError)):
                self._interrupted = True
            raise

    def call(self, name: str, *args: Any, env_ids: Any = None, ends_episode: bool = False, **kwargs: Any) -> tuple:
        """Call backend method `name` in each env (or env_ids), or read the attribute when it is not
        callable (gymnasium's semantics); results in env order. ends_episode=True makes those envs
        reset on their next step (e.g. after collecting demos). No deadline: a method may run long."""
        self._calls.start(self._call_ids(env_ids, "call()"), public(name, "call()"), args, kwargs, ends_episode, None)
        return in_env_order(self.call_wait())

    def _call_all(self, name: str, args: tuple, what: str) -> tuple:
        self._calls.start(self._call_ids(None, what), name, args, {}, False, self.vector_config.step_timeout_s)
        return in_env_order(self.call_wait())

    def get_attr(self, name: str) -> tuple:
        return self._call_all(public(name, "get_attr()"), (), "call()")

    def set_attr(self, name: str, values: Any) -> None:
        """Set backend attribute `name` in every env: one value for all, or a list with one per env."""
        public(name, "set_attr()")
        for env, value in enumerate(self._calls.per_env(values)):
            self._calls.start(self._call_ids([env], "call()"), "__setattr__", (name, value), {}, False,
                              self.vector_config.step_timeout_s)
        raise_first(dict(self.call_wait()))

    def render(self, camera: str = "front") -> np.ndarray:  # type: ignore[override]  # a camera to choose
        """An rgb frame of `camera` from every env, stacked: (num_envs, H, W, 3) uint8."""
        return np.stack(self._call_all("render_rgb", (camera,), "call()"))

    def get_demos(self, amount: int, seed: int | None = None, variation: int | None = None) -> list[Demo]:
        """Collect `amount` demonstrations spread over all envs at once (env i collects its share
        with its own seed), all of task variation `variation` (None: the backend's fixed one, else each
        drawn). Envs reset on their next step."""
        for env, share, env_seed in self._calls.demo_shares(amount, seed):
            self.call_async("get_demos", share, env_seed, variation=variation, env_ids=[env], ends_episode=True)
        results = raise_first(dict(self.call_wait()))
        return [demo for env in sorted(results) for demo in results[env]]

    # ------------------------------------------------------------------ stats, info
    def stats(self) -> dict[str, np.ndarray]:
        """Per-env totals since start or reset_stats(): exec_s (backend steps), write_s (observation
        writes), reset_s, ipc_s (round trips minus the worker's time in them: pipe, scheduling and
        main-process overhead, shared among a command's envs), steps (executed actions), resets,
        restarts, recycles, errors. After close() it returns the last figures."""
        now = self._last_stats if self.closed and self._last_stats is not None else self._pool.totals()
        return {key: value - self._stats_baseline[key] for key, value in now.items()}

    def reset_stats(self) -> None:
        self._stats_baseline = self._pool.totals()

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
            self._last_stats = self._pool.totals()
        if getattr(self, "_output", None) is not None:
            self._output.close()
        if getattr(self, "_finalizer", None) is not None:
            self._finalizer()
        self.closed = True

    def __enter__(self) -> RLBenchVectorEnv:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        c = self.env_config
        task = c.task if isinstance(c.task, str) else f"{len(c.tasks)} tasks"
        return f"RLBenchVectorEnv(num_envs={self.num_envs}, task={task!r}, backend={c.backend!r})"
