"""RLBench (CoppeliaSim 4.1 through PyRep) in a worker process.

The main process calls only the classmethods: they locate the rlbench package on disk without
importing it (importing rlbench or pyrep loads libcoppeliaSim). The worker imports both in
`__init__`, after DISPLAY is set, and calls every simulator method from its main thread, the thread
that launched CoppeliaSim (PyRep's rule).

backend_options, passed to rlbench.Environment as given (upstream defaults otherwise):
  robot_setup             "panda" (default) or "sawyer": the observation layout has 7 arm joints
  static_positions, frequency, attach_grasped_objects (also given to the gripper action mode),
  shaped_rewards (only for tasks whose file defines reward()), arm_max_velocity,
  arm_max_acceleration, dataset_root
  randomize_every         "episode" or "transition" (RandomizeEvery by name), with
  visual_randomization_config: a dict of keyword arguments for VisualRandomizationConfig
                          (image_directory=..., ...). RLBench has no dynamics randomization.
and this backend's own:
  variation               fixed variation index; default: sampled at every reset
  task_state_size         length of task_low_dim_state (see `task_state_size`)
  collision_checking      for arm_mode "ik" / "planning" (default False, as upstream)
  frame                   "world" (default) or "ee": RelativeFrame of ik / planning delta actions
  reset_attempts          resets tried when RLBench cannot place the task (default 3)
  live_demos              True: get_demos plans demos live (the default without dataset_root);
                          False: it reads them from dataset_root (the default with it)
reset(options=...) keys, per env through the engine's options["env_options"]:
  variation               this reset's variation
  demo                    reset to stored episode `demo` of that variation (or of the fixed one) in
                          dataset_root with RLBench's reset_to_demo: the episode's exact initial scene
"""

from __future__ import annotations

import difflib
import importlib.util
import logging
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..config import CAMERAS, DEFAULT_LOW_DIM, LOW_DIM_FIELDS, EnvConfig
from ..errors import BackendUnavailableError, ConfigError
from ..spec import low_dim_fields, observation_spec
from .base import Backend, Demo, StepResult

log = logging.getLogger("rlbench_vec")

ENVIRONMENT_OPTIONS = (
    "dataset_root", "static_positions", "robot_setup", "randomize_every", "frequency",
    "visual_randomization_config", "attach_grasped_objects", "shaped_rewards", "arm_max_velocity",
    "arm_max_acceleration",
)
OWN_OPTIONS = ("variation", "task_state_size", "collision_checking", "frame", "reset_attempts", "live_demos")
SEVEN_JOINT_ROBOTS = ("panda", "sawyer")  # rlbench.const.SUPPORTED_ROBOTS with 7 arm joints
# RandomizeEvery by name. Upstream's VARIATION and TRANSITION share one value, so they are one member,
# which re-textures every `frequency` simulation steps and never at a variation change.
RANDOMIZE_EVERY = ("episode", "transition")
TEXTURE_PATTERNS = ("*.jpg", "*.png")  # what VisualRandomizationConfig globs in image_directory
FRAMES = ("world", "ee")  # RelativeFrame by name
RENDER_MODES = {None: "OPENGL3", "opengl3": "OPENGL3", "opengl": "OPENGL"}  # pyrep.const.RenderMode names
DEFAULT_RESET_ATTEMPTS = 3
# task_low_dim_state lengths of the upstream tasks that define their own get_low_dim_state()
# (rlbench/tasks/*.py, RLBench 1.2.0). Every other task concatenates the poses of the objects in its
# scene file, so its length is known only once CoppeliaSim has loaded it.
TASK_STATE_SIZES = {"reach_target": 3, "pick_and_lift": 6, "slide_block_to_target": 6}
# Low-dim fields that demo actions are derived from: always recorded (a few joint reads, no rendering).
ARM_ACTION_SOURCE = {
    "ik": "gripper_pose", "planning": "gripper_pose",
    "joint_position": "joint_positions", "joint_velocity": "joint_velocities",
}
GRIPPER_ACTION_SOURCE = {"discrete": "gripper_open", "joint_position": "gripper_joint_positions"}
# Observation.misc keys of a camera's calibration are "{camera}_camera_{extrinsics,intrinsics,near,far}";
# no Observation attribute has this infix.
MISC_INFIX = "_camera_"


def tasks_dir() -> Path:
    """rlbench/tasks of the installed RLBench, found without importing rlbench."""
    spec = importlib.util.find_spec("rlbench")
    if spec is None or not spec.submodule_search_locations:
        raise BackendUnavailableError(
            "backend='rlbench' needs RLBench, PyRep and CoppeliaSim 4.1, and `rlbench` is not importable here. "
            "Install them with scripts/install_coppeliasim.sh or use the image in docker/ (see docs/rlbench.md), "
            "or choose backend='mujoco' or 'synthetic'."
        )
    return Path(next(iter(spec.submodule_search_locations))) / "tasks"


def task_names() -> list[str]:
    return sorted(p.stem for p in tasks_dir().glob("*.py") if p.stem != "__init__")


def _task_file(task: str) -> Path:
    path = tasks_dir() / f"{task}.py"
    if not path.is_file():
        names = task_names()
        close = difflib.get_close_matches(task, names, n=5, cutoff=0.5)
        hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
        raise ConfigError(
            f"unknown RLBench task {task!r}.{hint} Tasks are the file names in {tasks_dir()} "
            f"({len(names)} of them), in snake_case or CamelCase (e.g. 'open_drawer' or 'OpenDrawer')."
        )
    return path


def _check_randomization(options: Mapping[str, Any]) -> None:
    if "dynamics_randomization_config" in options:
        raise ConfigError(
            "dynamics_randomization_config cannot work: RLBench's DomainRandomizationScene raises NotImplementedError "
            "('Dynamics randomization coming soon!') whenever one is given, so every worker would die at launch. "
            "Only visual randomization exists upstream: use randomize_every with visual_randomization_config."
        )
    every = options.get("randomize_every")
    if every == "variation":
        raise ConfigError(
            "randomize_every='variation' is the same setting as 'transition' in RLBench (RandomizeEvery.VARIATION and "
            "TRANSITION share one value): textures change every `frequency` simulation steps, not when the variation "
            "changes. Pass 'transition' for that, or 'episode' to re-texture at resets."
        )
    if every is not None and every not in RANDOMIZE_EVERY:
        raise ConfigError(f"randomize_every must be one of {RANDOMIZE_EVERY}, got {every!r}.")
    visual = options.get("visual_randomization_config")
    if (every is None) != (visual is None):
        raise ConfigError("randomize_every and visual_randomization_config go together: RLBench randomizes only with "
                          "both (without randomize_every it ignores the config).")
    if visual is None:
        return
    if not isinstance(visual, Mapping) or "image_directory" not in visual:
        raise ConfigError("visual_randomization_config must be a dict of keyword arguments for RLBench's "
                          f"VisualRandomizationConfig, image_directory included, got {visual!r}.")
    directory = Path(str(visual["image_directory"]))
    if not any(next(directory.glob(pattern), None) for pattern in TEXTURE_PATTERNS):
        raise ConfigError(f"visual_randomization_config image_directory {str(directory)!r} holds no *.jpg or *.png "
                          "texture (RLBench refuses it).")


def _check_options(config: EnvConfig) -> None:
    """Raise ConfigError for backend_options that cannot work (the checks that need no simulator)."""
    options = config.backend_options
    _check_randomization(options)
    unknown = sorted(set(options) - set(ENVIRONMENT_OPTIONS) - set(OWN_OPTIONS))
    if unknown:
        raise ConfigError(
            f"unknown rlbench backend_options {unknown}; allowed: {sorted(ENVIRONMENT_OPTIONS + OWN_OPTIONS)}.")
    if options.get("robot_setup", "panda") not in SEVEN_JOINT_ROBOTS:
        raise ConfigError(f"robot_setup {options['robot_setup']!r} is not supported: the observation layout has 7 arm "
                          f"joints; choose one of {SEVEN_JOINT_ROBOTS}.")
    variation = options.get("variation")
    if variation is not None and not (isinstance(variation, int) and variation >= 0):
        raise ConfigError(f"variation must be None (sampled at every reset) or an index >= 0, got {variation!r}.")
    for name in ("task_state_size", "reset_attempts"):
        value = options.get(name, 1)
        if not (isinstance(value, int) and value >= 1):
            raise ConfigError(f"{name} must be an integer >= 1, got {value!r}.")
    if options.get("collision_checking") and config.arm_mode not in ("ik", "planning"):
        raise ConfigError(f"collision_checking applies to arm_mode 'ik' or 'planning', not {config.arm_mode!r}.")
    frame = options.get("frame", "world")
    if frame not in FRAMES:
        raise ConfigError(f"frame must be one of {FRAMES}, got {frame!r}.")
    if frame == "ee" and (config.arm_mode not in ("ik", "planning") or config.absolute_mode):
        raise ConfigError("frame='ee' makes each action a pose relative to the current end effector (RLBench's "
                          "RelativeFrame.EE): a delta action of arm_mode 'ik' or 'planning'. Use it with those and "
                          "absolute_mode=False.")
    if options.get("dataset_root") and not Path(options["dataset_root"]).exists():
        raise ConfigError(f"dataset_root {options['dataset_root']!r} does not exist.")
    if not isinstance(options.get("live_demos", True), bool):
        raise ConfigError(f"live_demos must be True or False, got {options['live_demos']!r}.")
    if options.get("live_demos") is False and not options.get("dataset_root"):
        raise ConfigError("live_demos=False reads stored demos from dataset_root: pass backend_options['dataset_root'] "
                          "(a folder written by RLBench's dataset generator).")
    if config.renderer not in RENDER_MODES:
        raise ConfigError(f"renderer for rlbench must be one of {list(RENDER_MODES)}, got {config.renderer!r}.")


class RLBenchBackend(Backend):
    name = "rlbench"

    @classmethod
    def validate(cls, config: EnvConfig) -> None:
        task_file = _task_file(config.task)
        _check_options(config)
        if config.backend_options.get("shaped_rewards") and "def reward(" not in task_file.read_text():
            raise ConfigError(
                f"shaped_rewards=True, but task {config.task!r} defines no reward() (RLBench would raise at the "
                "first step). Tasks with one: " + ", ".join(
                    p.stem for p in sorted(tasks_dir().glob("*.py")) if "def reward(" in p.read_text()) + "."
            )

    @classmethod
    def task_names(cls) -> list[str]:
        return task_names()

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
            cls.task_state_size(config)
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
        self.options = config.backend_options
        self.layout = observation_spec(config)
        self.misc_keys = {key for key in self.layout if MISC_INFIX in key}
        self.live_demos = bool(self.options.get("live_demos", not self.options.get("dataset_root")))
        self.action_errors = (InvalidActionError, IKError, ConfigurationPathError)
        self.reset_error = TaskEnvironmentError
        self.error_count = 0
        self.obs: Any = None
        self.variation = 0
        self.descriptions: dict[int, list[str]] = {}  # per variation, from the resets seen so far

        self.env = Environment(
            action_mode=self._action_mode(), obs_config=self._observation_config(), headless=True,
            **self._environment_options(),
        )
        self.env.launch()
        self.task_env = self.env.get_task(name_to_task_class(config.task))
        self.variation_count = int(self.task_env.variation_count())
        if self.options.get("variation") is not None:
            self._check_variation(self.options["variation"])

    # ------------------------------------------------------------------ construction
    def _observation_config(self):
        from pyrep.const import RenderMode
        from rlbench.observation_config import CameraConfig, ObservationConfig

        c = self.config
        modalities = set(c.modalities)
        render_mode = RenderMode[RENDER_MODES[c.renderer]]

        def camera(name: str) -> CameraConfig:
            on = name in c.cameras
            rgb = (on and "rgb" in modalities) or name in c.video_cameras
            depth = on and bool(modalities & {"depth", "point_cloud"})  # RLBench computes point clouds from depth
            # RLBench keeps a camera's sensor, and its calibration in misc, only while rgb, depth or point_cloud
            # is on; point_cloud alone keeps it without rendering anything
            point_cloud = on and ("point_cloud" in modalities or (c.misc and not (rgb or depth)))
            return CameraConfig(
                rgb=rgb, depth=depth, point_cloud=point_cloud, mask=on and "mask" in modalities,
                image_size=c.image_size, render_mode=render_mode, masks_as_one_channel=True,
                depth_in_meters=c.depth_in_meters,
            )

        low_dim = set(low_dim_fields(c)) | {ARM_ACTION_SOURCE[c.arm_mode], GRIPPER_ACTION_SOURCE[c.gripper_mode]}
        return ObservationConfig(
            **{f"{name}_camera": camera(name) for name in CAMERAS},
            **{name: name in low_dim for name in LOW_DIM_FIELDS},
            gripper_touch_forces=False, wrist_camera_matrix=False, record_gripper_closing=False,
        )

    def _action_mode(self):
        from rlbench.action_modes import arm_action_modes as arm
        from rlbench.action_modes import gripper_action_modes as gripper
        from rlbench.action_modes.action_mode import MoveArmThenGripper

        c = self.config
        checking = bool(self.options.get("collision_checking", False))
        frame = arm.RelativeFrame[self.options.get("frame", "world").upper()]
        if c.arm_mode == "ik":
            arm_mode = arm.EndEffectorPoseViaIK(absolute_mode=c.absolute_mode, frame=frame, collision_checking=checking)
        elif c.arm_mode == "planning":
            arm_mode = arm.EndEffectorPoseViaPlanning(
                absolute_mode=c.absolute_mode, frame=frame, collision_checking=checking)
        elif c.arm_mode == "joint_velocity":
            arm_mode = arm.JointVelocity()
        else:
            arm_mode = arm.JointPosition(absolute_mode=c.absolute_mode)
        attach = bool(self.options.get("attach_grasped_objects", True))
        if c.gripper_mode == "discrete":
            gripper_mode = gripper.Discrete(attach_grasped_objects=attach)
        else:
            # always absolute: the action bounds are [0, 0.04] m, and upstream's delta mode ignores the action
            gripper_mode = gripper.GripperJointPosition(attach_grasped_objects=attach, absolute_mode=True)
        return MoveArmThenGripper(arm_mode, gripper_mode)

    def _environment_options(self) -> dict[str, Any]:
        options = {k: v for k, v in self.options.items() if k in ENVIRONMENT_OPTIONS}
        if "randomize_every" in options:
            from rlbench.sim2real import domain_randomization as dr

            options["randomize_every"] = dr.RandomizeEvery[options["randomize_every"].upper()]
            visual = options["visual_randomization_config"]
            options["visual_randomization_config"] = dr.VisualRandomizationConfig(**visual)
        return options

    # ------------------------------------------------------------------ episodes
    def _check_variation(self, variation: Any) -> int:
        count = self.variation_count
        if isinstance(variation, bool) or not isinstance(variation, (int, np.integer)) or not 0 <= variation < count:
            raise ConfigError(f"variation {variation!r} does not exist: task {self.config.task!r} has {count} "
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
                    error.add_note(f"rlbench_vec: reset of {self.config.task!r} failed {attempts} times in a row "
                                   "(backend_options['reset_attempts']).")
                    raise
                log.warning("reset of %r failed (%s); retrying (%d/%d)", self.config.task, error, attempt, attempts)
        self.descriptions[self.variation] = list(descriptions)

    def _reset_to_stored_demo(self, episode: Any, variation: int | None) -> None:
        """RLBench's reset_to_demo with stored episode `episode` (its place in the natural order of the
        variation's episodes folder, as from_episode_number): numpy's generator restored to the state the
        demo started from, so the scene is placed exactly as it was."""
        if not self.options.get("dataset_root"):
            raise ConfigError("reset option 'demo' resets to a stored demo: pass backend_options['dataset_root'].")
        if isinstance(episode, bool) or not isinstance(episode, (int, np.integer)) or episode < 0:
            raise ConfigError(f"reset option 'demo' must be an episode index >= 0, got {episode!r}.")
        if variation is None:
            raise ConfigError("reset option 'demo' needs the stored episode's variation: pass "
                              "{'demo': i, 'variation': v}, or backend_options['variation'].")
        self.task_env.set_variation(self._check_variation(variation))
        demos = self.task_env.get_demos(1, live_demos=False, image_paths=True, random_selection=False,
                                        from_episode_number=int(episode))
        if not demos:
            raise ConfigError(f"dataset_root {self.options['dataset_root']!r} holds no episode {episode} of variation "
                              f"{variation} of task {self.config.task!r}.")
        descriptions, self.obs = self.task_env.reset_to_demo(demos[0])
        self.variation = int(demos[0][0].misc["variation_index"])
        self.descriptions[self.variation] = list(descriptions)

    def reset(self, seed: int | None, options: Mapping[str, Any] | None) -> dict[str, Any]:
        options = options or {}
        if seed is not None:
            _seed_globals(seed)
        variation = options.get("variation", self.options.get("variation"))
        if options.get("demo") is not None:
            self._reset_to_stored_demo(options["demo"], variation)
        else:
            self._choose_variation(variation)
            self._reset_task()
        return {"variation_index": self.variation, "descriptions": self.descriptions[self.variation]}

    def step(self, action: np.ndarray) -> StepResult:
        try:
            # a float64 copy, so RLBench never holds a view of the shared action buffer
            obs, reward, terminate = self.task_env.step(np.array(action, dtype=np.float64))
        except self.action_errors as error:
            self.error_count += 1  # the episode ends; self.obs stays the last valid observation
            return StepResult(0.0, True, {"error": f"{type(error).__name__}: {error}", "error_count": self.error_count})
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
        if key == "task_low_dim_state":
            raise ConfigError(
                f"task {self.config.task!r} has a task_low_dim_state of length {array.size}, but the observation "
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

        task_root = Path(self.options["dataset_root"]) / self.config.task
        found = [v for v in range(self.variation_count)
                 if (task_root / (VARIATIONS_FOLDER % v) / EPISODES_FOLDER).is_dir()]
        if not found:
            raise ConfigError(
                f"dataset_root holds no demos of task {self.config.task!r}: RLBench reads them from "
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


def recorded_commands(steps: Sequence[Any]) -> np.ndarray | None:
    """(T-1, joints + 1): misc["joint_position_action"] of steps 1.., what RLBench's planner commanded
    while the demo played (joint targets, then the gripper's open amount); None where the demo lacks it
    (recorded before RLBench had it)."""
    commands = [obs.misc.get("joint_position_action") for obs in steps[1:]]
    if not commands or any(command is None for command in commands):
        return None
    return np.array(commands, dtype=np.float64)


def demo_actions(steps: Sequence[Any], config: EnvConfig) -> np.ndarray:
    """float32 (T-1, action_size): the action in config's action mode that takes each recorded step to the
    next. Joint-position arm actions and discrete gripper actions are the commands RLBench recorded
    (`recorded_commands`, as robobase and RLBench's own tests replay them); the rest, and demos without
    recorded commands, are derived from the next recorded state."""
    def field(name: str) -> np.ndarray:
        return np.array([getattr(obs, name) for obs in steps], dtype=np.float64)

    commands = recorded_commands(steps)
    if config.arm_mode == "joint_position" and commands is not None:
        arm = commands[:, :-1]
        if not config.absolute_mode:
            arm = arm - field("joint_positions")[:-1]
    else:
        arm = field(ARM_ACTION_SOURCE[config.arm_mode])
        if config.absolute_mode or config.arm_mode == "joint_velocity":
            arm = arm[1:]  # the next state is the target (a velocity action lasts one 0.05 s sim step)
        elif config.arm_mode == "joint_position":
            arm = np.diff(arm, axis=0)
        elif config.backend_options.get("frame", "world") == "ee":
            arm = pose_in_frame(arm[:-1], arm[1:])
        else:
            arm = pose_delta(arm[:-1], arm[1:])
    if config.gripper_mode == "discrete" and commands is not None:
        gripper = commands[:, -1]
    else:
        gripper = field(GRIPPER_ACTION_SOURCE[config.gripper_mode])[1:]
        if gripper.ndim == 2:
            gripper = gripper.mean(axis=1)  # finger joint positions: one target drives both fingers
    return np.concatenate([arm, gripper[:, None]], axis=1).astype(np.float32)


def quaternion_multiply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product a * b of quaternions stored x, y, z, w (RLBench's order)."""
    ax, ay, az, aw = np.moveaxis(a, -1, 0)
    bx, by, bz, bw = np.moveaxis(b, -1, 0)
    return np.stack([
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
        aw * bw - ax * bx - ay * by - az * bz,
    ], axis=-1)


def conjugate(q: np.ndarray) -> np.ndarray:
    """The inverse of a unit quaternion (x, y, z, w)."""
    return q * np.array([-1.0, -1.0, -1.0, 1.0])


def pose_delta(current: np.ndarray, target: np.ndarray) -> np.ndarray:
    """The delta pose action that RLBench's calculate_delta_pose turns `current` into `target` with:
    position target - current, rotation q with q * current = target."""
    rotation = quaternion_multiply(target[..., 3:], conjugate(current[..., 3:]))
    return np.concatenate([target[..., :3] - current[..., :3], rotation], axis=-1)


def pose_in_frame(current: np.ndarray, target: np.ndarray) -> np.ndarray:
    """`target` as a pose in the frame of `current` (RLBench's RelativeFrame.EE, which solves IK relative
    to the tip): position R(q)^T (target - current), rotation q^-1 * target."""
    inverse = conjugate(current[..., 3:])
    offset = np.concatenate([target[..., :3] - current[..., :3], np.zeros_like(target[..., :1])], axis=-1)
    position = quaternion_multiply(quaternion_multiply(inverse, offset), current[..., 3:])[..., :3]
    return np.concatenate([position, quaternion_multiply(inverse, target[..., 3:])], axis=-1)


BACKEND = RLBenchBackend
