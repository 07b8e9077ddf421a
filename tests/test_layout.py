"""The package's layout holds its layers: every import (function-level and type-only ones included)
goes down a layer or stays inside its own folder, no two modules import each other round a circle,
the engine and the worker side never import each other, and each folder says its job and what it may
import. docs/architecture.md draws these layers."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "rlbench_vec"
BASE = {"errors", "task_names", "config", "distributed", "spec", "backends", "backends.base"}
LAYERS = [  # lowest first: (layer name, the modules' first name parts)
    ("base", BASE),
    ("wire", {"wire"}),
    ("display", {"display"}),
    ("simulators and datasets", {"backends", "datasets"}),
    ("engine and worker", {"engine", "worker"}),
    ("front", {"vector_env", "gym_env", "sb3"}),
    ("cli", {"cli"}),
    ("entries", {"bench", "collect", "evaluate", "warmup", ""}),
]
MAX_FRONT_MODULES = 13


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in PACKAGE.rglob("*.py")}


def imports(module: str) -> set[str]:
    """The package's modules that `module` imports anywhere in its body."""
    path = MODULES[module]
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    package = [part for part in package if part]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join(base + (node.module.split(".") if node.module else []))
            elif node.module and node.module.split(".")[0] == "rlbench_vec":
                target = node.module.removeprefix("rlbench_vec").removeprefix(".")
            else:
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}".strip(".")
                found.add(sub if sub in MODULES else target)
        elif isinstance(node, ast.Import):
            found.update(alias.name.removeprefix("rlbench_vec").removeprefix(".") for alias in node.names
                         if alias.name.split(".")[0] == "rlbench_vec")
    return found - {module}


def layer(module: str) -> tuple[int, str]:
    """(the module's layer, its folder: the group it may import freely inside its layer)."""
    if module in BASE:
        return 0, "base"
    first = module.split(".")[0]
    for index, (name, names) in enumerate(LAYERS):
        if index and first in names:
            return index, first if first and (PACKAGE / first).is_dir() else name
    raise AssertionError(f"rlbench_vec.{module} has no layer: add it to tests/test_layout.py's LAYERS")


def wrong_imports(module: str) -> list[str]:
    own, folder = layer(module)
    wrong = []
    for target in sorted(imports(module)):
        other, other_folder = layer(target)
        if other > own or (other == own and other_folder != folder):
            wrong.append(f"{module} ({LAYERS[own][0]}) imports {target} ({LAYERS[other][0]})")
    return wrong


def test_every_import_goes_down_a_layer_or_stays_in_its_folder():
    wrong = [line for module in MODULES for line in wrong_imports(module)]
    assert not wrong, "\n".join(wrong)


def test_no_module_imports_itself_round_a_circle():
    graph = {module: imports(module) for module in MODULES}
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                pytest.fail("import circle: " + " -> ".join(path[path.index(target):] + [module, target]))
            if target not in state:
                visit(target, path + [module])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [])


def test_the_front_is_small_and_every_folder_says_its_job_and_what_it_may_import():
    front = [path for path in PACKAGE.glob("*.py") if path.name != "__init__.py"]
    assert len(front) <= MAX_FRONT_MODULES, sorted(path.name for path in front)
    for init in PACKAGE.glob("*/__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert "import" in doc, f"{init.relative_to(PACKAGE.parent)}'s docstring must say what the folder may import"


def test_the_layer_check_sees_wrong_imports(tmp_path, monkeypatch):
    """The check itself: the engine importing the worker side (at module level) or a command line (inside a
    function), and the wire importing the engine, are each reported."""
    engine, wire = tmp_path / "engine_fake.py", tmp_path / "wire_fake.py"
    engine.write_text("from ..worker.runner import Runner\n\n\ndef f():\n    from ..cli import run_main\n")
    wire.write_text("from ..engine import pool\n")
    monkeypatch.setitem(MODULES, "engine.fake", engine)
    monkeypatch.setitem(MODULES, "wire.fake", wire)
    assert imports("engine.fake") == {"worker.runner", "cli"}
    assert wrong_imports("engine.fake") == ["engine.fake (engine and worker) imports cli (cli)",
                                            "engine.fake (engine and worker) imports worker.runner (engine and worker)"]
    assert wrong_imports("wire.fake") == ["wire.fake (wire) imports engine.pool (engine and worker)"]
