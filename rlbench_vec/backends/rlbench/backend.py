"""RLBench (CoppeliaSim 4.1 through PyRep) in a worker process: the Backend (its options: this
package's docstring).

The main process calls only the classmethods: they locate the rlbench package on disk without
importing it (importing rlbench or pyrep loads libcoppeliaSim). The worker imports both in
`__init__`, after DISPLAY is set, and calls every simulator method from its main thread, the thread
that launched CoppeliaSim (PyRep's rule).
"""

from __future__ import annotations

import logging
import random
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ...config import DEFAULT_LOW_DIM, EnvConfig
from ...errors import ConfigError
from ...spec import observation_spec
from ..base import Backend, Demo, StepResult, write_padded
from .demos import demo_actions
from .options import DEFAULT_RESET_ATTEMPTS, TASK_STATE_SIZES, check_options, task_file, task_names, tasks_dir
from .oracle import waypoint_actions
from .settings import CollisionFlag, action_mode, environment_options, observation_config

log = logging.getLogger("rlbench_vec")

# Observation.misc keys of a camera's calibration are "{camera}_camera_{extrinsics,intrinsics,near,far}";
# no Observation attribute has this infix.
MISC_INFIX = "_camera_"


class RLBenchBackend(Backend):
    name = "rlbench"

    @classmethod
    def validate(cls, config: EnvConfig) -> None:
        path = task_file(config.one_task)
        check_options(config)
        if config.backend_options.get("shaped_rewards") and "def reward(" not in path.read_text():
            raise ConfigError(
                f"shaped_rewards=True, but task {config.task!r} defines no reward() (RLBench would raise at the "
                "first step). Tasks with one: " + ", ".join(
                    p.stem for p in sorted(tasks_dir().glob("*.py")) if "def reward(" in p.read_text()) + "."
            )

    @classmethod
    def task_names(cls) -> list[str]:
        return task_names()

    @classmethod
    def task_variation_count(cls, config: EnvConfig) -> None:
        """None: a task's variation count is its Python method, which only a loaded RLBench can run."""
        return None

    @classmethod
    def envs_per_worker(cls, config: EnvConfig, num_envs: int, requested: int | None) -> int:
        """One env per worker, however many cores: PyRep runs one CoppeliaSim per process."""
        if requested not in (None, 1):
            raise ConfigError(f"the rlbench backend runs one CoppeliaSim per worker process (PyRep's rule); "
                              f"envs_per_worker={requested} would launch {requested} in one. Leave envs_per_worker "
                              "unset.")
        return 1

    @classmethod
    def task_state_size(cls, config: EnvConfig) -> int:
        """backend_options["task_state_size"], else the upstream length for the few tasks that define
        it in code (TASK_STATE_SIZES); for the others it depends on the task's scene file."""
        if "task_state_size" in config.backend_options:
            return int(config.backend_options["task_state_size"])
        if config.task in TASK_STATE_SIZES:
            return TASK_STATE_SIZES[config.task]
        raise ConfigError(
            f"the length of task_low_dim_state for task {config.task!r} depends on its scene and is known only once "
            "CoppeliaSim has loaded it. Pass backend_options={'task_state_size': N}: a wrong N makes the first "
            "reset fail with a message giving the right one. Or leave 'task_low_dim_state' out of low_dim."
        )

    @classmethod
    def default_low_dim(cls, config: EnvConfig) -> tuple[str, ...]:
        """The usual fields, with task_low_dim_state only where its length is known up front."""
        try:
            for task in config.tasks:
                cls.task_state_size(config.for_task(task))
        except ConfigError:
            return tuple(name for name in DEFAULT_LOW_DIM if name != "task_low_dim_state")
        return DEFAULT_LOW_DIM

    @classmethod
    def needs_display(cls, config: EnvConfig) -> bool:
        return True  # CoppeliaSim 4.1 needs an X display with GLX even when headless

    def __init__(self, config: EnvConfig, env_index: int):
        from pyrep.errors import ConfigurationPathError, IKError
        from rlbench.backend.exceptions import InvalidActionError, TaskEnvironmentError
        from rlbench.environment import Environment
        from rlbench.utils import name_to_task_class

        self.env = None
        self.config = config
        self.task = config.task_of(env_index)
        self.task_class_of = name_to_task_class
        self.options = config.backend_options
        self.layout = observation_spec(config)
        self.misc_keys = {key for key in self.layout if MISC_INFIX in key}
        self.live_demos = bool(self.options.get("live_demos", not self.options.get("dataset_root")))
        self.action_errors = (InvalidActionError, IKError, ConfigurationPathError)
        self.reset_error = TaskEnvironmentError
        self.error_count = 0
        self.obs: Any = None
        self.oracle: Iterator[np.ndarray] | None = None  # backend_options["oracle"]: the episode's oracle
        self.variation = 0
        self.descriptions: dict[int, list[str]] = {}  # per variation, from the resets seen so far

        mode = action_mode(config)
        self.collision_flag = CollisionFlag(config, mode)
        self.env = Environment(
            action_mode=mode, obs_config=observation_config(config), headless=True,
            **environment_options(self.options),
        )
        self.env.launch()
        self._load_task(self.task)

    def _load_task(self, task: str) -> None:
        """Make `task` this env's task: RLBench's Environment.get_task loads it into the running scene."""
        assert self.env is not None, "launched"
        self.task_env = self.env.get_task(self.task_class_of(task))
        self.task = task
        self.variation_count = int(self.task_env.variation_count())
        self.descriptions = {}
        if self.options.get("variation") is not None:
            self._check_variation(self.options["variation"])

    # ------------------------------------------------------------------ episodes
    def _check_variation(self, variation: Any) -> int:
        count = self.variation_count
        if isinstance(variation, bool) or not isinstance(variation, (int, np.integer)) or not 0 <= variation < count:
            raise ConfigError(f"variation {variation!r} does not exist: task {self.task!r} has {count} "
                              f"(0..{count - 1}).")
        return int(variation)

    def _choose_variation(self, variation: int | None) -> None:
        if variation is None:
            self.variation = int(self.task_env.sample_variation())
        else:
            self.variation = self._check_variation(variation)
            self.task_env.set_variation(self.variation)

    def _reset_task(self) -> None:
        """RLBench's reset, retried when it cannot place the task (TaskEnvironmentError)."""
        attempts = int(self.options.get("reset_attempts", DEFAULT_RESET_ATTEMPTS))
        for attempt in range(1, attempts + 1):
            try:
                descriptions, self.obs = self.task_env.reset()
                break
            except self.reset_error as error:
                if attempt == attempts:
                    error.add_note(f"rlbench_vec: reset of {self.task!r} failed {attempts} times in a row "
                                   "(backend_options['reset_attempts']).")
                    raise
                log.warning("reset of %r failed (%s); retrying (%d/%d)", self.task, error, attempt, attempts)
        self.descriptions[self.variation] = list(descriptions)

    def _reset_to_stored_demo(self, episode: Any, variation: int | None, all_variations: bool) -> None:
        """RLBench's reset_to_demo with stored episode `episode` (its place in the natural order of the
        variation's episodes folder, or with all_variations of the task's all_variations folder, as
        from_episode_number; YARR asks so with set_variation(-1)): numpy's generator restored to the state the
        demo started from, so the scene is placed exactly as it was."""
        if not self.options.get("dataset_root"):
            raise ConfigError("reset option 'demo' resets to a stored demo: pass backend_options['dataset_root'].")
        if isinstance(episode, bool) or not isinstance(episode, (int, np.integer)) or episode < 0:
            raise ConfigError(f"reset option 'demo' must be an episode index >= 0, got {episode!r}.")
        if variation is None:
            raise ConfigError("reset option 'demo' needs the stored episode's variation: pass "
                              "{'demo': i, 'variation': v}, or backend_options['variation'].")
        variation = self._check_variation(variation)
        self.task_env.set_variation(-1 if all_variations else variation)
        demos = self.task_env.get_demos(1, live_demos=False, image_paths=True, random_selection=False,
                                        from_episode_number=int(episode))
        if not demos:
            raise ConfigError(f"dataset_root {self.options['dataset_root']!r} holds no episode {episode} of "
                              f"{'all_variations' if all_variations else f'variation {variation}'} of {self.task!r}.")
        self.task_env.set_variation(variation)  # YARR's set_variation(demo.variation_number)
        descriptions, self.obs = self.task_env.reset_to_demo(demos[0])
        self.variation = variation
        self.descriptions[self.variation] = list(descriptions)

    def reset(self, seed: int | None, options: Mapping[str, Any] | None) -> dict[str, Any]:
        options = options or {}
        if options.get("task", self.task) != self.task:
            self._load_task(options["task"])
        if seed is not None:
            _seed_globals(seed)
        variation = options.get("variation", self.options.get("variation"))
        if options.get("demo") is not None:
            self._reset_to_stored_demo(options["demo"], variation, bool(options.get("all_variations", False)))
        else:
            self._choose_variation(variation)
            self._reset_task()
        if self.options.get("oracle"):
            self.oracle = waypoint_actions(self.task_env._task, self.config, lambda: self.obs.gripper_pose,
                                           self._gripper_action())
        state = getattr(self.obs, "task_low_dim_state", None)
        return {"variation_index": self.variation, "descriptions": self.descriptions[self.variation],
                "task": self.task, "task_low_dim_size": 0 if state is None else len(state)}

    def _gripper_action(self) -> float:
        """The gripper action that keeps the gripper as it is now."""
        if self.config.gripper_mode == "discrete":
            return float(self.obs.gripper_open)
        return float(np.mean(self.obs.gripper_joint_positions))

    def step(self, action: np.ndarray) -> StepResult:
        if self.oracle is not None:
            planned = next(self.oracle, None)
            if planned is None:
                return StepResult(0.0, True, {"oracle_exhausted": True})
            action = planned
        try:
            # a float64 copy, so RLBench never holds a view of the shared action buffer
            obs, reward, terminate = self.task_env.step(self.collision_flag(np.array(action, dtype=np.float64)))
        except self.action_errors as error:
            self.error_count += 1  # the episode ends; self.obs stays the last valid observation
            return StepResult(0.0, True, {"error": f"{type(error).__name__}: {error}", "invalid_action": True,
                                          "error_count": self.error_count})
        self.obs = obs
        return StepResult(float(reward), bool(terminate))

    def _checked(self, key: str, obs: Any, shape: tuple[int, ...]) -> np.ndarray:
        """obs's value for layout key `key` (an attribute, or for calibration an entry of misc) as an
        array of `shape`, or an error saying what to change."""
        value = obs.misc.get(key) if key in self.misc_keys else getattr(obs, key)
        if value is None:
            raise RuntimeError(f"RLBench returned no {key!r}, though the observation config asked for it.")
        array = np.asarray(value)
        if array.shape == shape:
            return array
        shared = self.task != self.config.task or self.config.task_low_dim_size  # a layout for several tasks
        if key == "task_low_dim_state" and array.size < shape[0] and shared:
            padded = np.zeros(shape)
            write_padded(padded, array)
            return padded
        if key == "task_low_dim_state":
            raise ConfigError(
                f"task {self.task!r} has a task_low_dim_state of length {array.size}, but the observation "
                f"layout has {shape[0]}: pass backend_options={{'task_state_size': {array.size}}}."
            )
        raise RuntimeError(f"RLBench returned {key!r} with shape {array.shape}; the layout expects {shape}.")

    def write_observation(self, out: Mapping[str, np.ndarray]) -> None:
        for key, slot in out.items():
            slot[...] = self._checked(key, self.obs, slot.shape)

    def render_rgb(self, camera: str) -> np.ndarray:
        frame = None if self.obs is None else getattr(self.obs, f"{camera}_rgb", None)
        if frame is None:
            raise ValueError(
                f"camera {camera!r} has no rgb image: RLBench removes every camera that is off at launch. "
                f"Record it with record=VideoConfig(cameras=(..., {camera!r})), or observe its rgb."
            )
        return frame

    # ------------------------------------------------------------------ demos
    def get_demos(self, amount: int, seed: int | None = None, variation: int | None = None) -> list[Demo]:
        """`amount` demos of `variation` (None: the fixed one, else each its own): planned live by RLBench's
        motion planner, or read from dataset_root (live_demos). The env's episode is over afterwards: reset
        before stepping."""
        variation = variation if variation is not None else self.options.get("variation")
        if seed is not None:
            _seed_globals(seed)
        if not self.live_demos:
            return self._stored_demos(amount, variation)
        demos: list[Demo] = []
        for _ in range(amount):
            self._choose_variation(variation)
            self._learn_descriptions()
            [demo] = self.task_env.get_demos(1, live_demos=True)
            demos.append(self._convert_demo(demo))
        return demos

    def _learn_descriptions(self) -> None:
        """RLBench's demos carry no descriptions: a reset of a variation not seen yet tells them. The global
        generators are put back after it, so a demo does not depend on which variations its worker saw."""
        if self.variation not in self.descriptions:
            states = np.random.get_state(), random.getstate()
            self._reset_task()
            np.random.set_state(states[0])
            random.setstate(states[1])

    def _stored_variations(self) -> list[int]:
        from rlbench.backend.const import EPISODES_FOLDER, VARIATIONS_FOLDER

        task_root = Path(self.options["dataset_root"]) / self.task
        found = [v for v in range(self.variation_count)
                 if (task_root / (VARIATIONS_FOLDER % v) / EPISODES_FOLDER).is_dir()]
        if not found:
            raise ConfigError(
                f"dataset_root holds no demos of task {self.task!r}: RLBench reads them from "
                f"{task_root}/{VARIATIONS_FOLDER % 0}/{EPISODES_FOLDER}/... (its dataset generator's layout).")
        return found

    def _stored_demos(self, amount: int, fixed: int | None) -> list[Demo]:
        """Stored demos of variation `fixed`, or of variations drawn among those the dataset holds; RLBench
        picks the episodes of each variation at random without repeats (random_selection)."""
        drawn = [fixed] * amount if fixed is not None else np.random.choice(self._stored_variations(), amount).tolist()
        demos: list[Demo] = []
        for variation, count in sorted(Counter(drawn).items()):
            self._choose_variation(variation)
            self._learn_descriptions()
            try:
                stored = self.task_env.get_demos(count, live_demos=False)
            except OverflowError as error:
                raise RuntimeError(
                    "RLBench's stored-demo reader decodes masks with uint8 arithmetic that NumPy >= 2 rejects "
                    "(rgb_handles_to_mask): leave 'mask' out of modalities for stored demos, or use numpy<2."
                ) from error
            demos.extend(self._convert_demo(demo) for demo in stored)
        return demos

    def _convert_demo(self, demo: Any) -> Demo:
        steps = [demo[t] for t in range(len(demo))]
        observations = {}
        for key, spec in self.layout.items():
            values = [self._checked(key, obs, spec.shape) for obs in steps]
            observations[key] = np.stack(values).astype(spec.dtype, copy=False)
        return Demo(
            observations=observations, actions=demo_actions(steps, self.config), success=True,
            variation_index=self.variation, descriptions=self.descriptions[self.variation],
        )

    def close(self) -> None:
        env, self.env = self.env, None
        if env is not None:
            env.shutdown()


def _seed_globals(seed: int) -> None:
    """RLBench draws variations, object placements and stored-demo picks from numpy's global generator
    (one task also from `random`)."""
    np.random.seed(seed)
    random.seed(seed)


BACKEND = RLBenchBackend
