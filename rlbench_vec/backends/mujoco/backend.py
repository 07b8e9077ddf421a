"""The embedded MuJoCo backend: RLBench's Panda, cameras, tasks and action modes without CoppeliaSim.

backend_options:
  variation         the task variation of every reset: an int, or "random" to draw one per reset from
                    the reset's seed. Unset: variation 0, as an RLBench TaskEnvironment until
                    set_variation. reset(options={"variation": v}) sets it for one reset.
  shaped_rewards    (bool) each step returns the task's reward() as RLBench's Environment(shaped_rewards=True):
                    only for tasks that define one (reach_target, take_lid_off_saucepan); success still ends
                    the episode.
  dense_rewards     (bool) each step returns this package's staged dense reward (not RLBench's: see
                    docs/tasks.md), in [0, 1), and 1 on success, which still ends the episode: only for
                    tasks that declare dense_reward() (reach_target, pick_and_lift, push_button,
                    slide_block_to_color_target, open_drawer).
  oracle (bool)     each step acts the task's waypoint oracle's next action for the episode (the action
                    given is checked, then ignored): the upper bound `rlbench_vec.evaluate --policy oracle`
                    scores. An oracle out of waypoints ends the episode (info["oracle_exhausted"]).
  keyframes (bool)  like oracle, but each step acts the next keyframe of the episode's own oracle demo (a
                    frame per control step, reduced by PerAct's keypoint discovery) through the pose arm
                    mode: `rlbench_vec.evaluate --policy keyframes` (keyframes.py).
  arm_mode "planning" only (see actions.py; RLBench's EndEffectorPoseViaPlanning):
  collision_checking         (bool) without ignore_collisions_flag: every move is collision-checked and
                             planned around obstacles (default False, as RLBench's constructor)
  retry_ignoring_collisions  (bool) PerAct's fork: where no collision-free path exists, the straight one
  clip_to_workspace          (bool) RVT's EndEffectorPoseViaPlanning2: the target clipped into the workspace

Renderer: config.renderer, else $MUJOCO_GL, else "egl" where an NVIDIA GPU is visible and "osmesa"
otherwise. egl and osmesa are headless; glfw needs an X display (the engine then starts Xvfb).
MuJoCo reads MUJOCO_GL when it is first imported, so this module imports it only in __init__.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ...config import EnvConfig, flag
from ...errors import BackendUnavailableError, ConfigError
from ..base import Backend, BackendGroup, Demo, EnvGroup, StepResult, failure
from .scene import offscreen_size
from .tasks import TASKS, Task, find_task

RENDERERS = ("egl", "osmesa", "glfw")
PLANNING_OPTIONS = ("collision_checking", "retry_ignoring_collisions", "clip_to_workspace")
OPTIONS = ("variation", "oracle", "keyframes", "shaped_rewards", "dense_rewards", *PLANNING_OPTIONS)
MAX_OFFSCREEN = 16384  # GL_MAX_RENDERBUFFER_SIZE of Mesa's llvmpipe (GPUs allow at least as much)
DEMO_ATTEMPTS = 10  # fresh episodes tried per demo before one is returned unsuccessful, like RLBench


def default_renderer() -> str:
    return "egl" if os.path.exists("/dev/nvidia0") else "osmesa"


def resolve_renderer(config: EnvConfig) -> str:
    return (config.renderer or os.environ.get("MUJOCO_GL") or default_renderer()).strip().lower()


def loaded_renderer() -> str | None:
    """The GL backend of an already imported MuJoCo ("osmesa", "egl", "glfw"), else None."""
    mujoco = sys.modules.get("mujoco")
    if mujoco is None:
        return None
    context = getattr(mujoco, "GLContext", None)  # absent where MUJOCO_GL=disable
    return "disable" if context is None else context.__module__.rsplit(".", 1)[-1]


def renderer_environ(config: EnvConfig) -> dict[str, str]:
    """The variables that point MuJoCo (and PyOpenGL) at the configured renderer at their first import."""
    renderer = resolve_renderer(config)
    return {"MUJOCO_GL": renderer} if renderer == "glfw" else {"MUJOCO_GL": renderer, "PYOPENGL_PLATFORM": renderer}


def use_renderer(config: EnvConfig) -> None:
    """Point MuJoCo at the configured renderer before its first import in this process. Where MuJoCo
    is already imported (e.g. a test calling the backend in-process), its renderer stays, unless
    config.renderer asks for another or it cannot render here: neither can be mended in this process."""
    current = loaded_renderer()
    if current is not None:
        wanted = resolve_renderer(config)
        if config.renderer and wanted != current:
            raise BackendUnavailableError(
                f"MuJoCo was already imported in this process with the {current!r} renderer, so it cannot "
                f"use {config.renderer!r}; set MUJOCO_GL={config.renderer} before importing mujoco, or run "
                "the env in a worker (RLBenchVectorEnv)."
            )
        renders = bool(config.cameras and config.modalities) or bool(config.video_cameras)
        if renders and (current == "disable" or (current == "glfw" and not os.environ.get("DISPLAY"))):
            hint = wanted if wanted in RENDERERS and wanted != "glfw" else default_renderer()
            raise BackendUnavailableError(
                f"MuJoCo was already imported in this process with the {current!r} renderer, which cannot "
                "render here (glfw needs an X display). A library may have imported it before MUJOCO_GL was "
                f"set (torchrl.envs does); set MUJOCO_GL={hint} before anything imports mujoco, or run the "
                "env in a worker (RLBenchVectorEnv), which sets it for its workers."
            )
        return
    environ = renderer_environ(config)
    os.environ.update(environ)
    if "PYOPENGL_PLATFORM" not in environ:  # glfw: PyOpenGL picks its platform from the display
        os.environ.pop("PYOPENGL_PLATFORM", None)


def task_class(config: EnvConfig) -> type[Task]:
    """The declaration of config's task (a config of one task: see EnvConfig.for_task)."""
    return find_task(config.one_task, config.backend if config.backend in ("mujoco", "mjwarp") else "mujoco")


def _check_variation(task: type[Task], variation: Any, where: str, alternative: str = "") -> int:
    if isinstance(variation, bool) or not isinstance(variation, (int, np.integer)) or not (
        0 <= variation < task.variation_count
    ):
        raise ConfigError(
            f"{where} variation must be an integer in 0..{task.variation_count - 1} ({task.name} has "
            f"{task.variation_count} variations){alternative}, got {variation!r}."
        )
    return int(variation)


RANDOM_VARIATION = "random"  # backend_options["variation"]: draw a variation per reset


def check_variation_option(task: type[Task], value: Any, backend: str) -> None:
    """backend_options["variation"]: a variation of the task or RANDOM_VARIATION, else a ConfigError."""
    if value != RANDOM_VARIATION:
        _check_variation(task, value, f"{backend} backend_options", f" or {RANDOM_VARIATION!r} (one drawn per reset)")


def check_shaped_rewards(task: type[Task], options: Mapping[str, Any], backend: str) -> None:
    """backend_options["shaped_rewards"]: a flag, and only for a task that declares RLBench's reward(), else
    a ConfigError naming the tasks that do."""
    if flag(f"{backend} backend_options['shaped_rewards']", options.get("shaped_rewards", False)) \
            and not task.has_reward():
        with_reward = ", ".join(name for name, declared in sorted(TASKS.items()) if declared.has_reward())
        raise ConfigError(f"shaped_rewards=True, but task {task.name!r} has no reward() upstream (RLBench would raise "
                          f"at the first step). Tasks with one: {with_reward}; or leave shaped_rewards unset "
                          "(reward 1.0 on success).")


def check_dense_rewards(task: type[Task], options: Mapping[str, Any], backend: str) -> None:
    """backend_options["dense_rewards"]: a flag, only for a task that declares dense_reward() and not with
    shaped_rewards, else a ConfigError saying which tasks have one."""
    if not flag(f"{backend} backend_options['dense_rewards']", options.get("dense_rewards", False)):
        return
    if options.get("shaped_rewards"):
        raise ConfigError("dense_rewards=True and shaped_rewards=True both set the reward: choose one (dense_rewards "
                          "is this package's staged reward, shaped_rewards RLBench's reward()).")
    if not task.has_dense_reward():
        with_dense = ", ".join(name for name, declared in sorted(TASKS.items()) if declared.has_dense_reward())
        raise ConfigError(f"dense_rewards=True, but task {task.name!r} declares no dense reward (this package's "
                          f"staged rewards, docs/tasks.md). Tasks with one: {with_dense}; or leave dense_rewards "
                          "unset (reward 1.0 on success).")


def check_planning_options(config: EnvConfig) -> None:
    """The planning options: flags, and only with arm_mode 'planning'."""
    for name in PLANNING_OPTIONS:
        if name in config.backend_options and flag(f"mujoco backend_options[{name!r}]", config.backend_options[name]) \
                and config.arm_mode != "planning":
            raise ConfigError(f"backend_options[{name!r}] applies to arm_mode='planning' (RLBench's planner), not "
                              f"{config.arm_mode!r}.")


def check_oracle_option(config: EnvConfig) -> None:
    """backend_options["oracle"] plans one action per waypoint, each run to its end: rlbench timing only;
    "keyframes" also a pose arm mode."""
    for name in ("oracle", "keyframes"):
        if config.backend_options.get(name) and config.action_timing != "rlbench":
            raise ConfigError(f"backend_options[{name!r}] plans one action per waypoint, each run until it is done: "
                              "it needs action_timing='rlbench'.")
    if config.backend_options.get("keyframes") and config.arm_mode not in ("ik", "planning"):
        raise ConfigError("backend_options['keyframes'] acts gripper poses: it needs arm_mode 'ik' or 'planning'.")


def choose_variation(task: type[Task], config: EnvConfig, options: Mapping[str, Any] | None,
                     rng: np.random.Generator) -> int:
    """The variation of a new episode: reset options, else backend_options (a variation, or "random":
    drawn from `rng`), else 0 as RLBench."""
    options = options or {}
    if "variation" in options:
        return _check_variation(task, options["variation"], "reset options")
    fixed = config.backend_options.get("variation", 0)
    return int(rng.integers(task.variation_count)) if fixed == RANDOM_VARIATION else int(fixed)


class MujocoBackend(Backend):
    name = "mujoco"

    @classmethod
    def validate(cls, config: EnvConfig) -> None:
        task = task_class(config)
        unknown = sorted(set(config.backend_options) - set(OPTIONS))
        if unknown:
            raise ConfigError(f"unknown mujoco backend_options {unknown}; allowed: {list(OPTIONS)}.")
        if "variation" in config.backend_options:
            check_variation_option(task, config.backend_options["variation"], cls.name)
        check_shaped_rewards(task, config.backend_options, cls.name)
        check_dense_rewards(task, config.backend_options, cls.name)
        check_oracle_option(config)
        check_planning_options(config)
        renderer = resolve_renderer(config)
        if renderer not in RENDERERS:
            source = "renderer" if config.renderer else "MUJOCO_GL"
            raise ConfigError(f"{source} {renderer!r} is not supported; choose from {', '.join(RENDERERS)}.")
        width, height = offscreen_size(len(config.cameras), config.width, config.height, config.modalities)
        if max(width, height) > MAX_OFFSCREEN:
            raise ConfigError(
                f"image_size {config.image_size} with {len(config.cameras)} cameras needs a {width}x{height} "
                f"offscreen buffer (a column per camera, a row per render pass); the renderer allows "
                f"{MAX_OFFSCREEN} per side: use smaller images or fewer cameras."
            )

    @classmethod
    def task_state_size(cls, config: EnvConfig) -> int:
        return task_class(config).state_size()

    @classmethod
    def task_names(cls) -> list[str]:
        return sorted(TASKS)

    @classmethod
    def task_variation_count(cls, config: EnvConfig) -> int:
        return task_class(config).variation_count

    @classmethod
    def needs_display(cls, config: EnvConfig) -> bool:
        return resolve_renderer(config) == "glfw"

    @classmethod
    def spawn_environ(cls, config: EnvConfig) -> dict[str, str]:
        return renderer_environ(config)

    @classmethod
    def make_group(cls, config: EnvConfig, instances: Sequence[int]) -> EnvGroup:
        return MujocoGroup(config, instances)

    def __init__(self, config: EnvConfig, env_index: int, renderers: SharedRenderers | None = None, envs: int = 1):
        """renderers: the worker's, shared with its other envs (see MujocoGroup); envs: how many envs a
        renderer made here draws per read-back."""
        self.config = config
        self.rng = np.random.default_rng(env_index)
        use_renderer(config)
        self._own_renderers = renderers is None
        self.renderers = SharedRenderers(envs) if renderers is None else renderers
        self.sims: dict[str, Any] = {}  # per task this env ran: switching back to one costs nothing
        self.variation = 0
        self.oracle: Iterator[np.ndarray] | None = None  # backend_options["oracle"]: the episode's oracle
        self._start_task(config.task_of(env_index))

    def _start_task(self, task: str) -> None:
        """Make `task` this env's task: its simulation, made at its first use."""
        self.task = task
        self.task_class = find_task(task, self.name)
        self.variation_count = self.task_class.variation_count
        if task not in self.sims:
            self.sims[task] = self.renderers.simulation(self.config.for_task(task))
        self.sim = self.sims[task]

    def reset(self, seed: int | None, options: Mapping[str, Any] | None) -> dict[str, Any]:
        if options and options.get("task", self.task) != self.task:
            self._start_task(options["task"])
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.variation = choose_variation(self.task_class, self.config, options, self.rng)
        self.sim.reset(self.variation, self.rng)
        self.oracle = self.sim.oracle_actions() if self.config.backend_options.get("oracle") else None
        if self.config.backend_options.get("keyframes"):
            self.oracle = self.sim.keyframe_actions()
        return {"descriptions": self.sim.task.descriptions(self.variation), "variation_index": self.variation,
                "task": self.task, "task_low_dim_size": self.task_class.state_size()}

    def step(self, action: np.ndarray) -> StepResult:
        if self.oracle is not None:
            planned = next(self.oracle, None)
            if planned is None:
                return StepResult(0.0, True, {"oracle_exhausted": True})
            action = planned
        return self.sim.act(action)

    def write_observation(self, out: Mapping[str, np.ndarray]) -> None:
        self.sim.write_observation(out)

    def render_rgb(self, camera: str) -> np.ndarray:
        return self.sim.render_rgb(camera)

    def get_demos(self, amount: int, seed: int | None = None, variation: int | None = None) -> list[Demo]:
        """`amount` oracle demonstrations in the env's action mode; each from a fresh seeded episode of
        `variation` (None: as a reset chooses it: backend_options' variation, else 0), retried up to
        DEMO_ATTEMPTS times until it succeeds. The env needs a reset afterwards."""
        from ...spec import observation_spec

        options = None if variation is None else {
            "variation": _check_variation(self.task_class, variation, "get_demos")}
        spec = observation_spec(replace(self.config, backend=self.name))
        seeds = np.random.default_rng(seed) if seed is not None else self.rng
        demos = []
        for _ in range(amount):
            for _ in range(DEMO_ATTEMPTS):
                demo = self.record_demo(int(seeds.integers(2**31)), spec, options)
                if demo.success:
                    break
            demos.append(demo)
        return demos

    def record_demo(self, seed: int, spec: Mapping[str, Any], options: Mapping[str, Any] | None) -> Demo:
        """One oracle demo of the episode `seed` starts, observed in `spec`'s layout, without retrying
        (get_demos retries; benchmarks/task_oracles.py measures the oracles with this)."""
        info = self.reset(seed, options)
        frames, success, marks = [self._observe(spec)], False, [0.0]
        actions: list[np.ndarray] = []
        for action in self.sim.oracle_actions():
            if len(actions) >= self.config.max_episode_steps:
                break
            result = self.sim.act(action)
            actions.append(action)
            frames.append(self._observe(spec))
            marks.append(float(self.sim.executor.waypoint_ignores_collisions))
            if result.terminated:  # success, or an invalid action (the reward may be shaped: read neither from it)
                success = not result.info.get("invalid_action", False)
                break
        observations = {key: np.stack([frame[key] for frame in frames]) for key in spec}
        action_array = np.array(actions, np.float32).reshape(len(actions), -1)
        return Demo(observations, action_array, success, info["variation_index"], info["descriptions"], seed,
                    np.array(marks))

    def _observe(self, spec: Mapping[str, Any]) -> dict[str, np.ndarray]:
        frame = {key: np.empty(s.shape, s.dtype) for key, s in spec.items()}
        self.write_observation(frame)
        return frame

    def close(self) -> None:
        for sim in self.sims.values():
            sim.close()  # idempotent
        if self._own_renderers:
            self.renderers.close()


class SharedRenderers:
    """The renderers of a worker's envs, one per task (one GL context each): the envs of a task are drawn
    into one offscreen buffer and read back with one call. A renderer serves the models of one task's scene
    (its meshes, textures and body ids), and outlives an env's switch to another task. envs: how many envs
    one read-back holds."""

    def __init__(self, envs: int):
        self.envs = envs
        self.by_task: dict[str, Any] = {}

    def simulation(self, config: EnvConfig) -> Any:
        """A simulation of config.task drawn by the task's renderer (made with the task's first one)."""
        from .simulation import Simulation  # imports mujoco

        task = config.one_task
        sim = Simulation(config, self.by_task.get(task), self.envs)
        if task not in self.by_task:
            self.by_task[task] = sim.give_renderer()
        return sim

    def close(self) -> None:
        for renderer in self.by_task.values():
            if renderer is not None:
                renderer.close()
        self.by_task.clear()


class MujocoGroup(BackendGroup):
    """The envs of one worker share a renderer per task (SharedRenderers): a command's envs of one task are
    drawn into one offscreen buffer and read back with one call, instead of one context and read-back each."""

    def __init__(self, config: EnvConfig, instances: Sequence[int]):
        band = offscreen_size(len(config.cameras), config.width, config.height, config.modalities)[1]
        self.renderers = SharedRenderers(max(1, min(len(instances), MAX_OFFSCREEN // band)))
        try:
            super().__init__(lambda index: MujocoBackend(config, index, self.renderers), instances)
        except BaseException:
            self.renderers.close()
            raise

    def observe(self, local, views, slots):
        rows = [self.row(views, slot) for slot in slots.tolist()]
        sims = [self.backends[i].sim for i in local.tolist()]
        draws: dict[int, tuple[Any, list]] = {}  # per renderer (per task), its envs
        for sim, row in zip(sims, rows):
            if sim.renderer is not None:
                draws.setdefault(id(sim.renderer), (sim.renderer, []))[1].append((sim.model, sim.data, row))
        try:
            for renderer, items in draws.values():
                renderer.render(items)
            for sim, row in zip(sims, rows):
                sim.write_low_dim(row)
        except Exception as error:
            return {j: failure(error) for j in range(len(sims))}
        return {}

    def close(self) -> None:
        super().close()
        self.renderers.close()
