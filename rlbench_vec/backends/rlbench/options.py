"""The rlbench backend's checks that need no simulator: where the installed RLBench keeps its tasks (found
without importing rlbench, which loads libcoppeliaSim) and which backend_options can work. The main
process runs these."""

from __future__ import annotations

import difflib
import importlib.util
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...config import EnvConfig
from ...errors import BackendUnavailableError, ConfigError

ENVIRONMENT_OPTIONS = (
    "dataset_root", "static_positions", "robot_setup", "randomize_every", "frequency",
    "visual_randomization_config", "attach_grasped_objects", "shaped_rewards", "arm_max_velocity",
    "arm_max_acceleration",
)
OWN_OPTIONS = ("variation", "task_state_size", "collision_checking", "frame", "reset_attempts", "live_demos", "oracle")
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


def task_file(task: str) -> Path:
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


def check_randomization(options: Mapping[str, Any]) -> None:
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


def check_options(config: EnvConfig) -> None:
    """Raise ConfigError for backend_options that cannot work (the checks that need no simulator)."""
    options = config.backend_options
    check_randomization(options)
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
    if not isinstance(options.get("oracle", False), bool):
        raise ConfigError(f"oracle must be True or False, got {options['oracle']!r}.")
    if options.get("oracle") and config.arm_mode not in ("ik", "planning"):
        raise ConfigError(f"backend_options['oracle'] acts RLBench's waypoints as end-effector poses, which arm_mode "
                          f"{config.arm_mode!r} cannot take: use arm_mode 'planning' (RLBench plans each move, as "
                          "keyframe agents act) or 'ik'.")
    if options.get("dataset_root") and not Path(options["dataset_root"]).exists():
        raise ConfigError(f"dataset_root {options['dataset_root']!r} does not exist.")
    if not isinstance(options.get("live_demos", True), bool):
        raise ConfigError(f"live_demos must be True or False, got {options['live_demos']!r}.")
    if options.get("live_demos") is False and not options.get("dataset_root"):
        raise ConfigError("live_demos=False reads stored demos from dataset_root: pass backend_options['dataset_root'] "
                          "(a folder written by RLBench's dataset generator).")
    if config.renderer not in RENDER_MODES:
        raise ConfigError(f"renderer for rlbench must be one of {list(RENDER_MODES)}, got {config.renderer!r}.")
