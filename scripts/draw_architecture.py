"""Draw the package's layers from the code: docs/architecture.svg.

    python scripts/draw_architecture.py [--out docs/architecture.svg]

Rows are the layers that tests/test_layout.py checks (highest on top: a module imports only rows below
its own, or modules of its own box); each box is a folder, or the top-level modules of that layer, with
the modules it holds today.
"""

from __future__ import annotations

import sys
import textwrap
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyBboxPatch  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from test_layout import LAYERS, MODULES, layer  # noqa: E402

from rlbench_vec.cli import ArgumentParser, run_main  # noqa: E402

ROLES = {  # what each box is for, under its name
    "entries": "what users import and run", "cli": "command lines", "front": "the public API",
    "engine": "the main side", "worker": "the worker side (spawned)", "backends": "simulators",
    "datasets": "demos on disk", "display": "X displays, GL check", "wire": "what both sides share",
    "base": "options, layout, errors",
}
WIDTH, MARGIN, LINE, PAD = 17.0, 1.6, 0.26, 0.18


def boxes() -> dict[int, dict[str, list[str]]]:
    """layer -> box name -> the modules in it (a folder's subfolders as one name each)."""
    rows: dict[int, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for module in sorted(MODULES):
        index, group = layer(module)
        parts = module.split(".")
        if group in ("backends", "datasets", "engine", "worker", "wire", "display", "cli"):
            name = parts[1] if len(parts) > 1 else "__init__"
        else:
            name = {"": "__init__", "backends": "backends (registry)"}.get(module, module)
        if name not in rows[index][group]:
            rows[index][group].append(name)
    return rows


def draw(out: Path) -> None:
    rows = boxes()
    heights = {}
    for index, groups in rows.items():
        lines = [len(textwrap.wrap(", ".join(names), 34 if len(groups) > 1 else 90)) for names in groups.values()]
        heights[index] = (max(lines) + 2) * LINE + 2 * PAD
    total = sum(heights.values()) + 0.25 * len(heights)
    fig, ax = plt.subplots(figsize=(WIDTH * 0.62, total * 0.62))
    ax.set_xlim(0, WIDTH), ax.set_ylim(0, total), ax.axis("off")
    y = total
    for index in sorted(rows, reverse=True):
        height, groups = heights[index], rows[index]
        y -= height
        ax.text(0.05, y + height / 2, "\n".join(textwrap.wrap(LAYERS[index][0], 12)), va="center", ha="left",
                fontsize=8, color="0.35")
        width = (WIDTH - MARGIN) / len(groups)
        for column, (group, names) in enumerate(groups.items()):
            x = MARGIN + column * width
            ax.add_patch(FancyBboxPatch((x + 0.06, y + 0.04), width - 0.12, height - 0.08,
                                        boxstyle="round,pad=0.02,rounding_size=0.12", fc="#eef3fb", ec="#4a6fa5"))
            title = f"{group}/" if (REPO / "rlbench_vec" / group).is_dir() else group
            ax.text(x + 0.2, y + height - PAD, f"{title}  ({ROLES.get(group, '')})", va="top", fontsize=9,
                    weight="bold")
            body = "\n".join(textwrap.wrap(", ".join(names), 34 if len(groups) > 1 else 90))
            ax.text(x + 0.2, y + height - PAD - 1.3 * LINE, body, va="top", fontsize=8, family="monospace")
        y -= 0.25
    fig.savefig(out, bbox_inches="tight")
    print(f"wrote {out}")


def main() -> None:
    parser = ArgumentParser(description=__doc__)
    parser.add_argument("--out", default=str(REPO / "docs" / "architecture.svg"), help="the picture (svg or png)")
    draw(Path(parser.parse_args().out))


if __name__ == "__main__":
    run_main(main, "python scripts/draw_architecture.py")
