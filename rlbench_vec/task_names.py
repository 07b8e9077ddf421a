"""Task names as a vector env's `task` option takes them: RLBench's names in snake_case or CamelCase, task
suites (a name for a list of tasks), and a task per env. Pure: imports errors only."""

from __future__ import annotations

import re
from collections.abc import Sequence

from .errors import ConfigError

# Task suites, a name for a list of tasks: `task="peract18"` gives env i the suite's task i (mod its length).
# peract18: PerAct's 18 RLBench tasks (Shridhar et al., 2022, Table 1), in PerAct's order.
SUITES = {
    "peract18": (
        "open_drawer", "slide_block_to_color_target", "sweep_to_dustpan_of_size", "meat_off_grill", "turn_tap",
        "put_item_in_drawer", "close_jar", "reach_and_drag", "stack_blocks", "light_bulb_in", "put_money_in_safe",
        "place_wine_at_rack_location", "put_groceries_in_cupboard", "place_shape_in_shape_sorter", "push_buttons",
        "insert_onto_square_peg", "stack_cups", "place_cups",
    ),
}


def snake_case(name: str) -> str:
    """'OpenDrawer' / 'open_drawer' / 'open-drawer' -> 'open_drawer'."""
    name = name.strip().replace("-", "_")
    name = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name)
    return name.lower()


def camel_case(name: str) -> str:
    """'open_drawer' -> 'OpenDrawer' (RLBench's task class names)."""
    return "".join(part.capitalize() for part in snake_case(name).split("_"))


def task_list(task: str | Sequence[str]) -> tuple[str, ...]:
    """A task option as its tasks in order, snake_case: a suite's, a name alone, or a list's (repeats kept)."""
    if isinstance(task, str):
        name = snake_case(task) if task.strip() else task
        return SUITES.get(name, (name,))
    if not isinstance(task, (list, tuple)) or not task:
        raise ConfigError(f"task must be a task name, a suite ({', '.join(SUITES)}) or a list of names, got {task!r}.")
    names = []
    for name in task:
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(f"task lists must hold task names such as 'reach_target', got {name!r} in {task!r}.")
        names.append(snake_case(name))
    return tuple(names)


def env_tasks(task: str | Sequence[str], num_envs: int) -> str | tuple[str, ...]:
    """Each env's task: one name for all, a suite's tasks in turn (env i gets task i mod its length), or a list of
    num_envs names, one per env. A single task stays a string."""
    names = task_list(task)
    if not isinstance(task, str) and len(names) != num_envs:
        raise ConfigError(f"task lists one name per env: got {len(names)} names for num_envs={num_envs}. Give "
                          f"{num_envs} names, or a suite ({', '.join(SUITES)}), whose tasks the envs take in turn.")
    per_env = tuple(names[i % len(names)] for i in range(num_envs))
    return per_env[0] if len(set(per_env)) == 1 else per_env
