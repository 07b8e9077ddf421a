"""What `evaluate` writes: the episodes as they end (episodes.jsonl, read back to resume), the scores with
Wilson intervals (results.json) and the table papers print (results.md, and stdout)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..errors import ConfigError

EPISODES_FILE = "episodes.jsonl"
RESULTS_FILE = "results.json"
TABLE_FILE = "results.md"
Z95 = 1.959963984540054  # the normal quantile of a two-sided 95% interval


def wilson(successes: int, episodes: int) -> tuple[float, float]:
    """The Wilson score interval (95%) of a success rate: sound at 0 or all successes and few episodes."""
    if episodes == 0:
        return 0.0, 1.0
    rate = successes / episodes
    scale = 1 + Z95**2 / episodes
    centre = (rate + Z95**2 / (2 * episodes)) / scale
    half = Z95 * math.sqrt(rate * (1 - rate) / episodes + Z95**2 / (4 * episodes**2)) / scale
    return max(0.0, centre - half), min(1.0, centre + half)


def read_episodes(out: Path) -> list[dict[str, Any]]:
    """The episodes a run (or the runs before a resume) finished. A last line cut by a crash is dropped: its
    episode runs again."""
    path = out / EPISODES_FILE
    if not path.is_file():
        return []
    episodes = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        try:
            episodes.append(json.loads(line))
        except json.JSONDecodeError:
            if number != len(path.read_text().splitlines()):
                raise ConfigError(f"{path} line {number} is not JSON: it is not an evaluation's episodes file; "
                                  "choose another --out.") from None
    return episodes


class EpisodeLog:
    """episodes.jsonl, one line appended and flushed per finished episode."""

    def __init__(self, out: Path):
        self.path = out / EPISODES_FILE
        if self.path.is_file():  # a last line cut short by a stop: dropped (read_episodes skipped it)
            content = self.path.read_bytes()
            with self.path.open("r+b") as file:
                file.truncate(content.rfind(b"\n") + 1)
        self.file = self.path.open("a")

    def write(self, record: dict[str, Any]) -> None:
        self.file.write(json.dumps(record) + "\n")
        self.file.flush()

    def close(self) -> None:
        self.file.close()


def scores(tasks: Iterable[str], episodes: list[dict[str, Any]]) -> dict[str, Any]:
    """Per task: episodes, successes, success_rate and ci95; and the mean of the task rates."""
    table: dict[str, dict[str, Any]] = {}
    for task in tasks:
        mine = [e for e in episodes if e["task"] == task]
        wins = sum(bool(e["success"]) for e in mine)
        low, high = wilson(wins, len(mine))
        table[task] = {"episodes": len(mine), "successes": wins,
                       "success_rate": round(wins / len(mine), 4) if mine else None,
                       "ci95": [round(low, 4), round(high, 4)]}
    rates = [row["success_rate"] for row in table.values() if row["success_rate"] is not None]
    return {"tasks": table, "mean_success": round(sum(rates) / len(rates), 4) if rates else None}


def markdown(result: dict[str, Any]) -> str:
    """Task rows with success % and its 95% interval, then the mean: the layout of RLBench papers' tables."""
    lines = [f"Policy `{result['policy']}` on `{result['backend']}`, {result['episodes_per_task']} episodes per task",
             "", "| task | success % | 95% CI | episodes |", "| --- | ---: | ---: | ---: |"]
    for task, row in result["tasks"].items():
        rate = "-" if row["success_rate"] is None else f"{100 * row['success_rate']:.1f}"
        low, high = row["ci95"]
        lines.append(f"| {task} | {rate} | {100 * low:.0f}-{100 * high:.0f} | {row['episodes']} |")
    mean = "-" if result["mean_success"] is None else f"{100 * result['mean_success']:.1f}"
    episodes = sum(int(row["episodes"]) for row in result["tasks"].values())
    lines.append(f"| **mean** | **{mean}** | | {episodes} |")
    return "\n".join(lines) + "\n"
