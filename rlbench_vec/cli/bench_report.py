"""What the bench shows: the progress bar, the result of all ranks combined and its summary table."""

from __future__ import annotations

import argparse
import shlex
from typing import Any

import numpy as np

from ..backends import mjwarp


class Progress:
    """A rich progress bar on stderr (or nothing: quiet, or not rank 0), drawn from the first report on: a
    command refused before its workers start (a misspelt task) prints its error alone."""

    def __init__(self, enabled: bool):
        self.enabled, self.bar = enabled, None

    def _started(self):
        if self.bar is None:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
            from rich.progress import Progress as RichProgress

            self.bar = RichProgress(TextColumn("{task.description:<18}"), BarColumn(), MofNCompleteColumn(),
                                    TimeElapsedColumn(), console=Console(stderr=True))
            self.bar.start()
        return self.bar

    def task(self, description: str, total: int | None = None):
        """A bar; the returned function takes (completed) or (completed, total)."""
        if not self.enabled:
            return lambda completed, total=None: None
        added: list[Any] = []

        def report(completed: int, total: int | None = total) -> None:
            bar = self._started()
            if not added:
                added.append(bar.add_task(description, total=total))
            bar.update(added[0], completed=completed, total=total)
        return report

    def stop(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def combine(args: argparse.Namespace, ranks: list[dict[str, Any]]) -> dict[str, Any]:
    """One result for the whole job: sums over ranks (throughput, envs, steps, CPU), worst start-up."""
    first = ranks[0]
    env_steps = sum(r["env_steps"] for r in ranks)
    result = {
        "command": shlex.join(["python", "-m", "rlbench_vec.bench", *args.argv]),  # quoted: runs as printed
        "world_size": len(ranks), "backend": first["backend"], "task": args.task, "arm_mode": args.arm_mode,
        "action_timing": args.action_timing,
        "num_envs": sum(r["num_envs"] for r in ranks), "steps": args.steps, "action_chunk": args.action_chunk,
        "async": args.async_, "min_envs": first["min_envs"], "copy_obs": bool(args.copy_obs),
        "record": args.record, "image_size": list(args.image_size), "cameras": args.cameras, "seed": args.seed,
        "gripper_switch": args.gripper_switch, "as_torch": args.as_torch, "device": args.device,
        "env_steps": env_steps, "elapsed_s": max(r["elapsed_s"] for r in ranks),
        "sps": sum(r["sps"] for r in ranks), "startup_s": max(r["startup_s"] for r in ranks),
    }
    result["gl_renderers"] = sorted({name for r in ranks for name in r["gl_renderers"]})
    for key in ("resets", "invalid_actions", "restarts", "workers", "cpu_main_cores", "cpu_workers_cores"):
        result[key] = sum(r[key] for r in ranks)
    for key in ("exec_ms", "write_ms", "ipc_ms", "reset_ms", "step_ms"):  # weighted by each rank's steps
        result[key] = sum(r[key] * r["env_steps"] for r in ranks) / max(env_steps, 1)
    if "phases_ms" in first:
        result["phases_ms"] = combine_phases(ranks, env_steps)
        # what the step's wall time holds beyond the timed phases: host work, launches, the engine, IPC
        result["unprofiled_ms"] = result["step_ms"] - sum(result["phases_ms"].values())
    for key in ("cpu_machine_percent", "rss_main_mb", "rss_worker_mb_mean", "shm_mb"):
        result[key] = float(np.mean([r[key] for r in ranks]))
    result["rss_worker_mb_max"] = max(r["rss_worker_mb_max"] for r in ranks)
    gpu = [r["gpu_memory_mb"] for r in ranks if r["gpu_memory_mb"] is not None]
    result["gpu_memory_mb"] = sum(gpu) if gpu else None
    if len(ranks) > 1:
        result["ranks"] = ranks
    return result


def combine_phases(ranks: list[dict[str, Any]], env_steps: int) -> dict[str, float]:
    """Each phase's ms per env-step over all ranks (weighted by their steps), in the order first seen."""
    names = list(dict.fromkeys(name for r in ranks for name in r["phases_ms"]))
    return {name: sum(r["phases_ms"].get(name, 0.0) * r["env_steps"] for r in ranks) / max(env_steps, 1)
            for name in names}


def phase_rows(result: dict[str, Any]) -> list[tuple[str, str]]:
    """The summary's rows for a --profile run: each phase per env-step and its share of the step."""
    step = result["step_ms"]
    rows = [("wall time per env-step (1 / env-steps/s)", f"{step:.4f} ms"),
            ("mjwarp phases per env-step (--profile)", "")]
    for name, ms in [*result["phases_ms"].items(), ("rest: host, launches, engine, IPC", result["unprofiled_ms"])]:
        rows.append((f"  {name}", f"{ms:.4f} ms ({100 * ms / step if step else 0.0:.0f}%)"))
    return rows


def print_summary(result: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    r = result
    mode = "step_chunk" if r["action_chunk"] > 1 else "step"
    if r["async"]:
        mode += f", async (min_envs={r['min_envs']})"
    ranks = f" over {r['world_size']} ranks" if r["world_size"] > 1 else ""
    table = Table(title=f"rlbench_vec bench: {r['task']} on {r['backend']}, {r['num_envs']} envs{ranks}, "
                        f"{r['arm_mode']}, K={r['action_chunk']} ({mode})" + (", recording" if r["record"] else ""))
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_row("env-steps/s", f"{r['sps']:,.0f}")
    table.add_row("env-steps timed", f"{r['env_steps']:,} in {r['elapsed_s']:.2f} s")
    worker_ms = r["exec_ms"] + r["write_ms"] + r["ipc_ms"] + r["reset_ms"]
    for part, label in (("exec", "worker execution"), ("write", "observation write"), ("ipc", "IPC wait"),
                        ("reset", "reset")):
        share = 100 * r[f"{part}_ms"] / worker_ms if worker_ms else 0.0
        table.add_row(f"  {label} per env-step", f"{r[f'{part}_ms']:.3f} ms ({share:.0f}%)")
    for row in phase_rows(r) if "phases_ms" in r else ():
        table.add_row(*row)
    table.add_row("startup (all workers ready)", f"{r['startup_s']:.2f} s")
    table.add_row("worker processes", str(r["workers"]))
    if r["gl_renderers"]:
        table.add_row("GL renderer (workers' X displays)", ", ".join(r["gl_renderers"]))
    table.add_row("RSS main process", f"{r['rss_main_mb']:.0f} MB")
    table.add_row("RSS per worker (mean / max)", f"{r['rss_worker_mb_mean']:.0f} / {r['rss_worker_mb_max']:.0f} MB")
    table.add_row("shared memory block", f"{r['shm_mb']:.1f} MB" + (" per rank" if r["world_size"] > 1 else ""))
    if r["gpu_memory_mb"] is not None:
        table.add_row("GPU memory (device, all processes)",
                      f"{r['gpu_memory_mb']:.0f} MB, {r['gpu_memory_mb'] / r['num_envs']:.2f} MB per env")
    table.add_row("CPU main / workers", f"{r['cpu_main_cores']:.2f} / {r['cpu_workers_cores']:.2f} cores")
    table.add_row("CPU machine busy", f"{r['cpu_machine_percent']:.0f}%")
    table.add_row(
        "resets / invalid-action ends / restarts", f"{r['resets']} / {r['invalid_actions']} / {r['restarts']}"
    )
    for rank in r.get("ranks", []):
        table.add_row(f"rank {rank['rank']}", f"{rank['sps']:,.0f} env-steps/s, {rank['num_envs']} envs")
    Console().print(table)
    if r["backend"] == "mujoco" and mjwarp.usable_here():
        Console().print(mjwarp.BENCH_HINT)
