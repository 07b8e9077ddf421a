"""rlbench_vec side by side with gymnasium AsyncVectorEnv, stable-baselines3 SubprocVecEnv and PufferLib.

Every system steps the same env: the synthetic backend (RLBench's default observation: 5 cameras at
128x128 with rgb, depth and mask, plus low-dim state) with the same step and reset costs (busy waits).
The peers get it behind gymnasium's Env API (peer_env.PeerEnv), writing into persistent arrays as ours does.

Systems:
  rlbench_vec sync         step(): one round trip per step
  rlbench_vec chunk16      step_chunk() with K=16 actions per round trip
  rlbench_vec async        send/recv partial batches: act on the first half of the envs to finish
  rlbench_vec ... 1/worker the same with one env per worker process (envs_per_worker=1), as real RLBench runs
  gymnasium async          AsyncVectorEnv(context="spawn", shared_memory=True, copy=False)
  sb3 subproc              SubprocVecEnv(start_method="spawn")
  pufferlib sync           pufferlib.vector.Multiprocessing, one worker per physical core, full batches
  pufferlib async          the same with batch_size=num_envs/2 (its zero-copy contiguous half batches)
  pufferlib serial         pufferlib.vector.Serial, every env in one process
PufferLib runs in its own interpreter (--pufferlib_python; PufferLib 2.0.2 pins numpy 1.23, see
docs/engine.md), through benchmarks/peers_puffer.py; without it, its systems are skipped and say why.
Step-cost settings: 0 ms (the machinery alone), 10 ms constant, and heavy-tailed (Pareto steps with a
10 ms mean, 50 ms resets every 10 steps).

Counted: actions executed (an autoreset step that only resets is not counted, for any system), after
an untimed warm-up of 16 actions per env in every system (for partial batches, envs' first writes into
each slot of the pages).
Each system is built once per num_envs and re-costed between settings, since starting 64 spawned
workers takes longer than measuring them (PufferLib's, which cannot be re-costed, once per setting;
start-up is never timed). Writes {out}/peers_{tag}.json (every system's version in it) and .png.

    python benchmarks/peers.py --tag cpu2 --pufferlib_python /work/venvs/puffer/bin/python
    python benchmarks/peers.py --tag gpu16 --num_envs 1 2 4 8 16 32 64
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shlex
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from importlib import metadata
from typing import Any

import gymnasium as gym
import numpy as np
from peer_env import ACTION_SIZE, cost_attrs, make_peer
from peers_puffer import NOT_IMPORTABLE, WARMUP_STEPS
from peers_puffer import SYSTEMS as PUFFER_SYSTEMS
from step_costs import SETTINGS

from rlbench_vec import RLBenchVectorEnv
from rlbench_vec.cli import ArgumentParser, run_main

SYSTEMS = ("rlbench_vec sync", "rlbench_vec chunk16", "rlbench_vec async", "rlbench_vec sync 1/worker",
           "rlbench_vec async 1/worker", "gymnasium async", "sb3 subproc", *PUFFER_SYSTEMS)
CHUNK = 16
HERE = os.path.dirname(os.path.abspath(__file__))


# ---------------------------------------------------------------------- timed loops: (env-steps, seconds)
def drive_ours(env: RLBenchVectorEnv, mode: str, steps: int) -> None:
    n, a = env.num_envs, ACTION_SIZE
    if mode == "sync":
        for _ in range(steps):
            env.step(np.zeros((n, a), np.float32))
    elif mode == "chunk16":
        for _ in range(math.ceil(steps / CHUNK)):
            env.step_chunk(np.zeros((n, CHUNK, a), np.float32))
    else:  # async partial batches, until each env averaged `steps` commands
        half, sent = max(1, n // 2), n
        env.send(np.zeros((n, a), np.float32))
        while sent < steps * n:
            ids = env.recv(min_envs=half)[4]["env_id"]
            env.send(np.zeros((len(ids), a), np.float32), env_ids=ids)
            sent += len(ids)
        env.recv()


def time_ours(env: RLBenchVectorEnv, mode: str, steps: int) -> tuple[int, float]:
    env.reset(seed=0)
    drive_ours(env, mode, WARMUP_STEPS)  # not timed: first writes into each slot of the pages
    env.reset(seed=0)  # every episode starts with the timing (a chunk after an episode's end only resets)
    env.reset_stats()
    start = time.perf_counter()
    drive_ours(env, mode, steps)
    elapsed = time.perf_counter() - start
    return int(env.stats()["steps"].sum()), elapsed


def time_gymnasium(env: gym.vector.AsyncVectorEnv, steps: int) -> tuple[int, float]:
    n = env.num_envs
    actions = np.zeros((n, ACTION_SIZE), np.float32)
    env.reset(seed=0)
    for _ in range(WARMUP_STEPS):  # not timed
        env.step(actions)
    env.reset(seed=0)
    terminated = truncated = np.zeros(n, bool)
    executed, start = 0, time.perf_counter()
    for _ in range(steps):
        executed += n - int(np.count_nonzero(terminated | truncated))  # next-step autoreset executes nothing
        _, _, terminated, truncated, _ = env.step(actions)
    return executed, time.perf_counter() - start


def time_sb3(env, steps: int) -> tuple[int, float]:
    n = env.num_envs
    actions = np.zeros((n, ACTION_SIZE), np.float32)
    env.reset()
    for _ in range(WARMUP_STEPS):  # not timed; SB3 resets inside the step that ends an episode: every step executes
        env.step(actions)
    env.reset()
    start = time.perf_counter()
    for _ in range(steps):
        env.step(actions)
    return n * steps, time.perf_counter() - start


# ---------------------------------------------------------------------- one system, every setting
Runs = list[tuple[int, float]]  # (env-steps, seconds) of each timed run


def median_run(runs: Runs) -> tuple[int, float]:
    """The run with the median env-steps/s (the faster middle one of an even count)."""
    return sorted(runs, key=lambda run: run[0] / run[1])[len(runs) // 2]


def steps_per_env(setting: dict[str, Any], n: int, scale: float) -> int:
    """Timed actions per env: the setting's env-step budget over n envs, in whole chunks."""
    return CHUNK * max(1, math.ceil(setting["env_steps"] * scale / n / CHUNK))


def measure(system: str, n: int, settings: dict[str, dict[str, Any]], scale: float, repeats: int) -> dict[str, Runs]:
    """Build `system` with n envs once; time it `repeats` times in a row under each setting."""
    out = {}
    if system.startswith("rlbench_vec"):
        mode, *grouping = system.split()[1:]  # "1/worker": one env per worker, as real RLBench runs
        envs_per_worker = 1 if grouping else None
        with RLBenchVectorEnv(num_envs=n, backend="synthetic", max_chunk=CHUNK, envs_per_worker=envs_per_worker) as env:
            for name, setting in settings.items():
                for attr, value in cost_attrs(setting["options"]).items():
                    env.set_attr(attr, value)
                out[name] = [time_ours(env, mode, steps_per_env(setting, n, scale)) for _ in range(repeats)]
    elif system == "gymnasium async":
        env = gym.vector.AsyncVectorEnv(
            [make_peer(i) for i in range(n)], shared_memory=True, copy=False, context="spawn"
        )
        try:
            for name, setting in settings.items():
                env.call("set_costs", setting["options"])
                out[name] = [time_gymnasium(env, steps_per_env(setting, n, scale)) for _ in range(repeats)]
        finally:
            env.close()
    else:
        from stable_baselines3.common.vec_env import SubprocVecEnv

        env = SubprocVecEnv([make_peer(i) for i in range(n)], start_method="spawn")
        try:
            for name, setting in settings.items():
                env.env_method("set_costs", setting["options"])
                out[name] = [time_sb3(env, steps_per_env(setting, n, scale)) for _ in range(repeats)]
        finally:
            env.close()
    return out


class Skipped(Exception):
    """A peer that cannot run here; its reason goes into the JSON."""


def measure_pufferlib(
    system: str, n: int, settings: dict[str, dict[str, Any]], scale: float, repeats: int, python: str | None,
    workers: int
) -> tuple[dict[str, Runs], dict[str, Any]]:
    """Time a PufferLib system in PufferLib's interpreter (peers_puffer.py): its timings and versions."""
    if python is None:
        raise Skipped("no --pufferlib_python given (PufferLib 2.0.2 pins numpy 1.23: it runs from its own venv, "
                      "docs/engine.md says how to make one)")
    request = {"num_envs": n, "workers": workers, "repeats": repeats, "systems": [system], "settings": {
        name: {"options": s["options"], "steps": steps_per_env(s, n, scale)} for name, s in settings.items()}}
    paths = os.pathsep.join(p for p in (os.path.dirname(HERE), os.environ.get("PYTHONPATH")) if p)
    with tempfile.TemporaryDirectory(prefix="peers_puffer_") as folder:
        result = os.path.join(folder, "result.json")
        command = [python, os.path.join(HERE, "peers_puffer.py"), "--request", json.dumps(request), "--json", result]
        try:  # its own session, so that its forked workers go with it whatever happens here
            child = subprocess.Popen(command, env={**os.environ, "PYTHONPATH": paths}, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, start_new_session=True)
        except OSError as error:
            raise Skipped(f"cannot run --pufferlib_python {python}: {error}") from error
        try:
            output = child.communicate()[0]
        finally:
            try:
                os.killpg(child.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass  # the session ended with its workers, as it should
        lines = output.strip().splitlines()
        if child.returncode == NOT_IMPORTABLE:
            raise Skipped(lines[-1])
        if child.returncode != 0:
            raise RuntimeError(f"{system} failed (exit status {child.returncode}):\n" + "\n".join(lines[-20:]))
        with open(result) as file:
            report = json.load(file)
    versions = {**report["versions"], "layout": report["layouts"][system]}
    return {name: [tuple(run) for run in runs] for name, runs in report["results"][system].items()}, versions


def versions() -> dict[str, Any]:
    """The versions this process runs (PufferLib's come from its interpreter)."""
    found: dict[str, Any] = {"python": platform.python_version()}
    for package in ("rlbench_vec", "numpy", "gymnasium", "stable_baselines3"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = None
    return found


# ---------------------------------------------------------------------- output
def print_tables(results: list[dict[str, Any]], settings: list[str], systems: list[str]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=max(100, 16 * (len(systems) + 1)))  # full system names, even when piped
    for setting in settings:
        table = Table(title=f"env-steps/s, step cost {setting}")
        table.add_column("num_envs", justify="right")
        for system in systems:
            table.add_column(system, justify="right")
        for n in sorted({r["num_envs"] for r in results}):
            row = {r["system"]: r["sps"] for r in results if r["setting"] == setting and r["num_envs"] == n}
            table.add_row(str(n), *(f"{row[s]:,.0f}" if s in row else "-" for s in systems))
        console.print(table)


def cpu_bound(setting: dict[str, Any], n: int, cpus: int) -> float | None:
    """The most env-steps/s that min(n, cpus) cores can give when every step burns its cost in CPU."""
    per_step = setting["step_cost_s"] + (
        setting["reset_cost_s"] / setting["episode_length"] if setting["episode_length"] else 0.0
    )
    return min(n, cpus) / per_step if per_step > 0 else None


def plot(report: dict[str, Any], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results, settings, cpus = report["results"], report["settings"], report["machine"]["cpus"]
    systems = list(dict.fromkeys(r["system"] for r in results))
    counts = sorted({r["num_envs"] for r in results})
    fig, axes = plt.subplots(1, len(settings), figsize=(5 * len(settings), 4.6), squeeze=False)
    for ax, (name, setting) in zip(axes[0], settings.items()):
        for system in systems:
            points = sorted(
                (r["num_envs"], r["sps"]) for r in results if r["setting"] == name and r["system"] == system
            )
            ax.plot(*zip(*points), marker="o", label=system)
        if cpu_bound(setting, 1, cpus) is not None:
            ax.plot(
                counts, [cpu_bound(setting, n, cpus) for n in counts], "k--", lw=1, label=f"CPU bound ({cpus} cores)"
            )
        ax.set(title=f"step cost {name}", xlabel="num_envs", ylabel="env-steps/s", yscale="log")
        ax.set_xscale("log", base=2)
        ax.set_xticks(counts, [str(n) for n in counts])
        ax.grid(True, which="both", alpha=0.3)
    handles: dict[str, Any] = {}  # one legend for all panels
    for ax in axes[0]:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    columns = min(len(handles), 5)
    fig.legend(handles.values(), handles.keys(), loc="lower center", ncol=columns, fontsize=8, frameon=False)
    machine = report["machine"]
    fig.suptitle(f"{textwrap.fill(report['command'], 130)}\n{cpus} CPUs, load average "
                 f"{machine['load_average_at_start']:.1f} at start, {machine['load_average_at_end']:.1f} at end",
                 fontsize=10)
    fig.tight_layout(rect=(0, 0.04 * math.ceil(len(handles) / columns), 1, 1))  # room for the shared legend
    fig.savefig(path, dpi=120)


def run(args: argparse.Namespace) -> dict[str, Any]:
    settings = {name: SETTINGS[name] for name in args.settings}
    machine = {
        "cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
        "load_average_at_start": os.getloadavg()[0],  # other work on the machine skews the numbers
    }
    started, found = time.perf_counter(), versions()
    results: list[dict[str, Any]] = []
    skipped: dict[str, str] = {}
    layouts: dict[str, str] = {}  # PufferLib's workers and batch size per system and num_envs
    for n in args.num_envs:
        for system in [s for s in args.systems if s not in skipped]:
            try:
                if system in PUFFER_SYSTEMS:
                    timings, puffer = measure_pufferlib(system, n, settings, args.scale, args.repeats,
                                                        args.pufferlib_python, args.pufferlib_workers)
                    found["pufferlib"] = puffer
                    layouts[f"{system}, {n} envs"] = puffer.pop("layout")
                else:
                    timings = measure(system, n, settings, args.scale, args.repeats)
            except Skipped as reason:
                skipped[system] = str(reason)
                print(f"{system:>20} | skipped: {reason}", flush=True)
                continue
            for setting, runs in timings.items():
                env_steps, elapsed = median_run(runs)
                results.append({"system": system, "setting": setting, "num_envs": n, "env_steps": env_steps,
                                "elapsed_s": round(elapsed, 4), "sps": round(env_steps / elapsed, 1),
                                **({"runs_sps": [round(s / t, 1) for s, t in runs]} if len(runs) > 1 else {})})
                print(f"{system:>20} | {setting:>12} | num_envs {n:>3} | {env_steps / elapsed:10,.0f} env-steps/s",
                      flush=True)
    machine["load_average_at_end"] = os.getloadavg()[0]
    return {
        "command": shlex.join(["python", *sys.argv]), "tag": args.tag, "machine": machine, "versions": found,
        "wall_s": round(time.perf_counter() - started, 1),
        "settings": {name: {**cost_attrs(s["options"])["options"], "env_steps": round(s["env_steps"] * args.scale)}
                     for name, s in settings.items()},
        "observation": "5 cameras 128x128 rgb+depth+mask, RLBench default low-dim", "results": results,
        "skipped": skipped, "pufferlib_layouts": layouts,
    }


def main() -> None:
    parser = ArgumentParser(description=__doc__)
    parser.add_argument("--tag", required=True, help='names the output files, e.g. "cpu2" or "gpu16"')
    parser.add_argument("--num_envs", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64])
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    parser.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=SYSTEMS)
    parser.add_argument("--pufferlib_python", default=None,
                        help="Python of a venv with pufferlib 2.0.2 (without it, its systems are skipped)")
    parser.add_argument("--pufferlib_workers", type=int, default=0,
                        help="most PufferLib worker processes (0: one per physical core, PufferLib's advice)")
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies the timed env-steps of every setting")
    parser.add_argument("--repeats", type=int, default=1,
                        help="timed runs per system, setting and size, in a row on one vector env: the median "
                             "run is reported, every run's env-steps/s kept in the JSON (runs_sps)")
    parser.add_argument("--out", default="docs", help="folder for peers_{tag}.json and .png")
    parser.add_argument("--replot", action="store_true", help="redraw the table and plot from the JSON, run nothing")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1 (timed runs per measurement), got {args.repeats}")

    stem = os.path.join(args.out, f"peers_{args.tag}")
    if args.replot:
        with open(stem + ".json") as file:
            report = json.load(file)
    else:
        report = run(args)
        os.makedirs(args.out, exist_ok=True)
        with open(stem + ".json", "w") as file:
            json.dump(report, file, indent=2)
    systems = list(dict.fromkeys(r["system"] for r in report["results"]))
    if not systems:
        print(f"every system was skipped: wrote {stem}.json, no plot")
        return
    print_tables(report["results"], list(report["settings"]), systems)
    plot(report, stem + ".png")
    print(f"wrote {stem}.png" + ("" if args.replot else f" and {stem}.json"))


if __name__ == "__main__":
    run_main(main, "python benchmarks/peers.py")
