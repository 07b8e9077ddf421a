"""The contract between a worker and the simulators it owns.

A worker serves a group of instances through an `EnvGroup`. The default group holds one `Backend`
(one simulator instance) per env; a batched simulator (many worlds in one) implements `EnvGroup`
itself. A backend class is imported in the main process only for its classmethods (validation,
layout), so a backend module must not import its simulator at module level: do it in `__init__`.
"""

from __future__ import annotations

import math
import os
import time
import traceback
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ..config import DEFAULT_LOW_DIM, EnvConfig

IK_SEGMENT = 0.03  # metres: an oracle's straight moves in ik mode come in pieces this long (IK solves short moves)


@dataclass
class StepResult:
    """What one backend step returns. `info` stays empty on the fast path (it is pickled when not)."""

    reward: float
    terminated: bool
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class Demo:
    """One demonstration: per-step observations stacked on a leading time axis, and the actions between them.

    observations[key] has shape (T, ...) with the keys of the env's observation layout;
    actions has shape (T - 1, action_size) in the env's action mode. reset_seed: the seed whose reset(seed,
    {"variation": variation_index}) starts the demo's scene again, where the backend knows one (the embedded
    ones); RLBench's datasets keep it as the demo's random_seed. ignore_collisions: (T,) float, RLBench's
    Observation.ignore_collisions of each frame (the mark of the waypoint the arm is moving to; 0 at the start),
    where the backend knows it.
    """

    observations: dict[str, np.ndarray]
    actions: np.ndarray
    success: bool
    variation_index: int
    descriptions: list[str]
    reset_seed: int | None = None
    ignore_collisions: np.ndarray | None = None



@dataclass(frozen=True)
class WrittenDemo:
    """What Backend.write_demo reports instead of the demo: whether it succeeded (and so was written), its
    observation steps, and the wall and CPU seconds writing took."""

    success: bool
    steps: int
    write_s: float = 0.0
    write_cpu_s: float = 0.0

class Backend(ABC):
    """One simulator instance in one worker process."""

    name: ClassVar[str]
    # how many variations the task has (get_attr("variation_count")); backends with variations set their own
    variation_count: int = 1

    @classmethod  # noqa: B027 - a hook: most backends check something
    def validate(cls, config: EnvConfig) -> None:
        """Raise ConfigError for options this backend cannot serve (unknown task, unsupported mode)."""

    # None: the envs of one vector env may run different tasks, and a reset may change an env's task
    # (reset(options={"task": name})); else why every env runs the one task it was made with
    one_task_reason: ClassVar[str | None] = None
    # None: a reset may change an env's task; else why not (its envs may run different tasks, each fixed at
    # the start): the engine refuses reset(options={"task": other}) with it
    task_change_reason: ClassVar[str | None] = None

    @classmethod
    @abstractmethod
    def task_state_size(cls, config: EnvConfig) -> int:
        """Length of task_low_dim_state for config.task, known without starting the simulator."""

    @classmethod
    def task_names(cls) -> list[str]:
        """The tasks this backend runs, by RLBench name."""
        return []

    @classmethod
    def task_variation_count(cls, config: EnvConfig) -> int | None:
        """How many variations config.one_task has, known without starting the simulator; None where only a
        started env can tell (get_attr("variation_count")). The default: the class's variation_count."""
        return cls.variation_count

    @classmethod
    def default_low_dim(cls, config: EnvConfig) -> tuple[str, ...]:
        """The low-dim fields observed when the user names none."""
        return DEFAULT_LOW_DIM

    @classmethod
    def needs_display(cls, config: EnvConfig) -> bool:
        """True when the simulator needs an X display (the worker then gets its own Xvfb by default)."""
        return False

    @classmethod
    def spawn_environ(cls, config: EnvConfig) -> dict[str, str]:
        """Environment variables a worker needs from its first instruction: the spawn bootstrap
        re-imports the user's main module, which may import the simulator (torchrl.envs imports
        MuJoCo) before the worker's own code runs."""
        return {}

    @classmethod
    def envs_per_worker(cls, config: EnvConfig, num_envs: int, requested: int | None) -> int:
        """How many instances one worker runs: the user's choice, else num_envs spread over the cores."""
        return requested or -(-num_envs // max(1, len(os.sched_getaffinity(0))))

    @classmethod
    def renders_video(cls, config: EnvConfig) -> bool:
        """Whether its envs serve render_rgb frames for video (record=...)."""
        return cls.render_rgb is not Backend.render_rgb

    # its group steps all its instances at once (one batched simulator per task), so a step's deadline
    # grows with the number of tasks, not of envs, in a command
    steps_in_parallel: ClassVar[bool] = False

    @classmethod
    def observations_on_device(cls, config: EnvConfig) -> bool:
        """True when its group keeps the observation pages on a device (EnvGroup.device_pages), so the
        shared block holds none."""
        return False

    @classmethod
    def make_group(cls, config: EnvConfig, instances: Sequence[int]) -> EnvGroup:
        """The worker's simulators for these instance numbers (called in the worker)."""
        return BackendGroup(lambda index: cls(config, index), instances)

    @abstractmethod
    def __init__(self, config: EnvConfig, env_index: int):
        """Start the simulator. Called in the worker after DISPLAY is set."""

    @abstractmethod
    def reset(self, seed: int | None, options: Mapping[str, Any] | None) -> dict[str, Any]:
        """Start an episode; return its info (e.g. descriptions, variation_index)."""

    @abstractmethod
    def step(self, action: np.ndarray) -> StepResult:
        """Apply one action (float32, shape (action_size,)). An invalid action ends the episode with
        reward 0, info["invalid_action"] True and info["error"] naming it; it must not raise."""

    @abstractmethod
    def write_observation(self, out: Mapping[str, np.ndarray]) -> None:
        """Write the current observation into `out` (shared-memory views, one per layout key), in place."""

    def render_rgb(self, camera: str) -> np.ndarray:
        """An rgb frame of `camera` for video, whether or not the camera is in the observation."""
        raise NotImplementedError(f"{type(self).__name__} cannot render {camera!r} for video")

    def get_demos(self, amount: int, seed: int | None = None, variation: int | None = None) -> list[Demo]:
        """`amount` demos from `seed`, all of `variation` (None: the fixed one of backend_options, else each
        drawn); a variation out of 0..variation_count-1 is a ConfigError. The env needs a reset afterwards."""
        raise NotImplementedError(f"{type(self).__name__} cannot collect demos")

    def write_demo(self, write: Callable[[Demo], Any], seed: int | None = None,
                   variation: int | None = None) -> WrittenDemo:
        """One demo as get_demos(1, seed, variation) makes it, passed to `write` here in the worker when it
        succeeded, instead of sent back: a demo's images are megabytes that would otherwise cross two more
        processes (the collector writes in place when no core is left for writer processes)."""
        demo = self.get_demos(1, seed, variation)[0]
        if not demo.success:
            return WrittenDemo(False, len(demo.actions) + 1)
        start, cpu = time.perf_counter(), time.process_time()
        write(demo)
        return WrittenDemo(True, len(demo.actions) + 1, time.perf_counter() - start, time.process_time() - cpu)

    def close(self) -> None:  # noqa: B027 - a hook: a backend with nothing to stop keeps it
        """Stop the simulator. Must be safe to call once after a failed __init__ step."""


def write_padded(out: np.ndarray, state: np.ndarray) -> None:
    """A task's task_low_dim_state into the layout's, sized for the longest task of the vector env: zeros
    after the task's own values (their count: info["task_low_dim_size"])."""
    count = len(state)
    out[:count] = state
    out[count:] = 0.0


def straight_pieces(start: np.ndarray, end: np.ndarray, length: float = IK_SEGMENT) -> list[np.ndarray]:
    """Points on the segment from `start` to `end`, evenly spaced at most `length` apart, `end` last (`start` left
    out): the targets an oracle gives one after another to move in a straight line."""
    count = max(1, math.ceil(float(np.linalg.norm(end - start)) / length))
    return [start + (i / count) * (end - start) for i in range(1, count + 1)]


def failure(error: BaseException) -> tuple[str, str]:
    """An exception as it travels to the main process: (one-line message, traceback)."""
    return f"{type(error).__name__}: {error}", "".join(traceback.format_exception(error))


@dataclass
class GroupStep:
    """One action for each of m instances: rewards and terminations (m,), and the infos and errors of
    those that have any, keyed by position in the call. An instance whose step raised has an error
    and counts as terminated with reward 0. truncated (m,): episodes the simulator cut short (e.g. a
    per-world fault), reported as truncated like a time limit."""

    reward: np.ndarray
    terminated: np.ndarray
    infos: dict[int, dict[str, Any]]
    errors: dict[int, tuple[str, str]]
    seconds: float = 0.0  # time spent in the simulator(s)
    truncated: np.ndarray | None = None


class EnvGroup(ABC):
    """The simulator instances one worker serves, indexed 0..size-1 (local). Every method takes the
    local indices it applies to; all are called on the worker's main thread."""

    size: int

    @abstractmethod
    def reset(self, local: np.ndarray, seeds: Sequence[int | None],
              options: Sequence[Mapping[str, Any] | None]) -> list[dict[str, Any] | tuple[str, str]]:
        """Start new episodes; per instance its info, or the failure (message, traceback) if it raised."""

    @abstractmethod
    def step(self, local: np.ndarray, actions: np.ndarray, observed: bool = True) -> GroupStep:
        """Apply one action (row of `actions`, float32) to each instance. observed: the instances'
        observations are read next (False: an inner sub-step of a chunk), a hint a batched group may
        use to render while the worker takes in the results."""

    @abstractmethod
    def observe(self, local: np.ndarray, views: Mapping[str, np.ndarray],
                slots: np.ndarray) -> dict[int, tuple[str, str]]:
        """Write instance local[j]'s observation into views[key][slots[j]] for every key, in place.
        Returns the failures, keyed by position j."""

    @abstractmethod
    def write_one(self, local: int, out: Mapping[str, np.ndarray]) -> None:
        """Write one instance's observation into `out` (arrays of the layout's per-env shapes)."""

    @abstractmethod
    def call(self, local: int, name: str, args: tuple, kwargs: dict[str, Any]) -> Any:
        """Call a public method of the instance's backend, or read the attribute if it is not callable."""

    def render_rgb(self, local: int, camera: str) -> np.ndarray:
        return self.call(local, "render_rgb", (camera,), {})

    # Partial completion (a batched simulator whose worlds finish their actions at different times):
    # start() gives instances their actions, advance() runs until enough of those in flight are done
    # and returns them, leaving the others in their action; instances returned may be started again
    # while the others still run, and join them at the next advance(). step() is start + advance(None).
    partial_steps: ClassVar[bool] = False

    def start(self, local: np.ndarray, actions: np.ndarray) -> None:
        """Give these instances (none of them in an action) their actions; they run from the next advance()."""
        raise NotImplementedError(f"{type(self).__name__} steps its instances in one call (partial_steps=False)")

    def advance(self, min_done: int | None, control_steps: int | None = None) -> tuple[np.ndarray, GroupStep]:
        """Run the instances in an action until at least `min_done` of them are done (None: all), or for
        at most `control_steps` control steps; returns the local indices of those done (ascending, each
        reported once, maybe none) and their results, in that order."""
        raise NotImplementedError(f"{type(self).__name__} steps its instances in one call (partial_steps=False)")

    def pages_written(self) -> bytes | None:
        """With device pages: the handle of an interprocess CUDA event that observe() records after the writes
        it queued, so its reply need not wait for them (the main process's stream waits for the event).
        None (the default): observe() returns once the writes are done."""
        return None

    def device_pages(self, layout: Mapping[str, Any], rows: int, max_chunk: int,
                     every_step: bool) -> list[dict[str, dict[str, Any]]] | None:
        """For a group whose observations stay on its device: two pages, each {"obs": {key: array of
        (rows, *shape)}} (and "chunk": (rows, max_chunk, *shape) when every_step), that observe()
        writes into and the main process reads (CUDA tensors are shared once through CUDA IPC).
        None (the default): the pages of the shared-memory block."""
        return None

    @abstractmethod
    def close(self) -> None:
        """Stop every simulator; safe after a failed start."""


class BackendGroup(EnvGroup):
    """One Backend per instance, stepped in turn. make(instance number) builds one."""

    def __init__(self, make: Callable[[int], Backend], instances: Sequence[int]):
        self.backends: list[Any] = []
        self.size = len(instances)
        self._rows: dict[tuple[int, int], dict[str, np.ndarray]] = {}
        try:
            for index in instances:
                self.backends.append(make(index))
        except BaseException:
            self.close()
            raise

    def reset(self, local, seeds, options):
        infos: list[dict[str, Any] | tuple[str, str]] = []
        for i, seed, opts in zip(local.tolist(), seeds, options):
            try:
                infos.append(self.backends[i].reset(seed, opts))
            except Exception as error:
                infos.append(failure(error))
        return infos

    def step(self, local, actions, observed=True):
        m = len(local)
        result = GroupStep(np.zeros(m), np.zeros(m, bool), {}, {})
        start = time.perf_counter()
        for j, i in enumerate(local.tolist()):
            try:
                step = self.backends[i].step(actions[j])
            except Exception as error:
                result.errors[j] = failure(error)
                result.terminated[j] = True
                continue
            result.reward[j], result.terminated[j] = step.reward, step.terminated
            if step.info:
                result.infos[j] = step.info
        result.seconds = time.perf_counter() - start
        return result

    def row(self, views: Mapping[str, np.ndarray], slot: int) -> dict[str, np.ndarray]:
        """Views of one slot, made once per (page, slot): backends may cache per output dict."""
        key = (id(views), slot)
        row = self._rows.get(key)
        if row is None:
            row = self._rows[key] = {name: array[slot, ...] for name, array in views.items()}
        return row

    def observe(self, local, views, slots):
        errors = {}
        for j, (i, slot) in enumerate(zip(local.tolist(), slots.tolist())):
            try:
                self.backends[i].write_observation(self.row(views, slot))
            except Exception as error:
                errors[j] = failure(error)
        return errors

    def write_one(self, local, out):
        self.backends[local].write_observation(out)

    def call(self, local, name, args, kwargs):
        target = getattr(self.backends[local], name)
        return target(*args, **kwargs) if callable(target) else target

    def close(self) -> None:
        for backend in self.backends:
            try:
                backend.close()
            except Exception:
                traceback.print_exc()
        self.backends = []
