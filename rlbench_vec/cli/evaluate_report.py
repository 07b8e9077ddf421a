"""What `evaluate` reports, derived from its run folder's log: the scores with Wilson intervals and the counts
(results.json) and the table papers print (results.md, and stdout)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

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


def repeat_scores(tasks: list[str], repeats: int, episodes: list[dict[str, Any]]) -> dict[str, Any]:
    """Each repeat's scores (its task rates and their mean), and the mean and standard deviation (sample, n - 1)
    of the repeats' means and of each task's rates: RVT's mean and spread over 5 evaluations."""
    each = [scores(tasks, [e for e in episodes if e.get("repeat", 0) == r]) for r in range(repeats)]
    rows = [{"repeat": r, "mean_success": score["mean_success"],
             "tasks": {task: row["success_rate"] for task, row in score["tasks"].items()}}
            for r, score in enumerate(each)]
    means = [row["mean_success"] for row in rows]
    per_task = {task: spread([row["tasks"][task] for row in rows]) for task in tasks}
    return {"repeats": rows, "repeat_mean": spread(means), "repeat_tasks": per_task}


def spread(values: list[float | None]) -> dict[str, float | None]:
    """Mean and sample standard deviation of the values known (None where fewer than one or two are)."""
    known = [value for value in values if value is not None]
    mean = sum(known) / len(known) if known else None
    std = math.sqrt(sum((v - mean) ** 2 for v in known) / (len(known) - 1)) if mean is not None and len(known) > 1 \
        else None
    return {"mean": None if mean is None else round(mean, 4), "std": None if std is None else round(std, 4)}


def summary(header: dict[str, Any], runs: list[dict[str, Any]], episodes: list[dict[str, Any]],
            planned: list[tuple[str, int, int, int, int]], ignored: int = 0) -> dict[str, Any]:
    """results.json from a run folder's log: the scores (with several repeats: each repeat's, and their mean and
    spread), and counts over every run of the folder; planned: the plan's (task, episode, repeat, ...)."""
    scored = header["scored"]
    per_run: dict[int, dict[str, Any]] = {}
    used: dict[tuple[int, int], int] = {}  # (run, rank): the most envs one of its vector envs used
    for record in runs:
        run = per_run.setdefault(record["run"], {"num_envs_used": 0, "episodes": 0, "seconds": 0.0})
        if record["record"] == "run":  # under torchrun one per rank: the run's envs are the ranks' sum
            run.update(command=record["command"], num_envs=run.get("num_envs", 0) + record["num_envs"],
                       world_size=record.get("world_size", 1))
        elif record["record"] == "envs":
            key = (record["run"], record.get("rank", 0))
            used[key] = max(used.get(key, 0), record["num_envs"])
        run["seconds"] = max(run["seconds"], record.get("at", 0.0))
    for (number, _), envs in used.items():
        per_run[number]["num_envs_used"] += envs
    for episode in episodes:
        run = per_run.setdefault(episode["run"], {"num_envs_used": 0, "episodes": 0, "seconds": 0.0})
        run["episodes"] += 1
        run["seconds"] = max(run["seconds"], episode["at"])
    last = per_run[max(per_run)] if per_run else {}
    per_task = {sum(key[0] == task and key[2] == 0 for key in planned) for task in scored["tasks"]}
    return {
        **scores(scored["tasks"], episodes), "command": last.get("command", ""), "backend": scored["backend"],
        "policy": scored["policy"], "policy_identity": header["policy_identity"], "version": header["version"],
        "episodes_per_task": per_task.pop() if len(per_task) == 1 else None,
        "invalid_actions": sum("invalid_action" in e for e in episodes),
        "backend_errors": sum("backend_error" in e for e in episodes),
        "reruns": sum(e.get("reruns", 0) for e in episodes),
        "num_envs": max((run["num_envs_used"] for run in per_run.values()), default=0),
        "seconds": round(sum(run["seconds"] for run in per_run.values()), 3),
        "runs": [{"run": n, **run} for n, run in sorted(per_run.items())], "config": scored,
        "finished": len(episodes) == len(planned), "ignored_log_records": ignored,
        **repeat_scores(scored["tasks"], scored.get("repeats", 1), episodes),
        "dataset": {"episodes_from": scored.get("episodes_from"), **header.get("dataset", {})},
    }


def markdown(result: dict[str, Any]) -> str:
    """Task rows with success % and its 95% interval, then the mean: the layout of RLBench papers' tables."""
    count, repeats = result["episodes_per_task"], len(result.get("repeats", ()))
    times = f", {repeats} repeats" if repeats > 1 else ""
    lines = [f"Policy `{result['policy']}` on `{result['backend']}`, "
             f"{'the stored' if count is None else count} episodes per task{times}",
             "", "| task | success % | 95% CI | episodes |", "| --- | ---: | ---: | ---: |"]
    for task, row in result["tasks"].items():
        rate = "-" if row["success_rate"] is None else f"{100 * row['success_rate']:.1f}"
        low, high = row["ci95"]
        lines.append(f"| {task} | {rate} | {100 * low:.0f}-{100 * high:.0f} | {row['episodes']} |")
    mean = "-" if result["mean_success"] is None else f"{100 * result['mean_success']:.1f}"
    episodes = sum(int(row["episodes"]) for row in result["tasks"].values())
    lines.append(f"| **mean** | **{mean}** | | {episodes} |")
    if len(result.get("repeats", ())) > 1:
        lines += ["", f"{len(result['repeats'])} repeats over the same episodes: success % of each, mean and standard "
                  "deviation", "", "| task | " + " | ".join(f"repeat {row['repeat']}" for row in result["repeats"])
                  + " | mean | std |", "| --- |" + " ---: |" * (len(result["repeats"]) + 2)]
        for task, both in [*result["repeat_tasks"].items(), ("**mean**", result["repeat_mean"])]:
            rates = [row["tasks"][task] for row in result["repeats"]] if task in result["repeat_tasks"] else [
                row["mean_success"] for row in result["repeats"]]
            lines.append(f"| {task} | " + " | ".join(map(_percent, rates)) + f" | {_percent(both['mean'])} | "
                         f"{_percent(both['std'])} |")
    return "\n".join(lines) + "\n"


def _percent(rate: float | None) -> str:
    return "-" if rate is None else f"{100 * rate:.1f}"
