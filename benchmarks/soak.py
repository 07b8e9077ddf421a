"""Soak runs on the synthetic backend: nothing may leak, and no episode may be lost that was not killed.

Crash soak: SIGKILL a random worker every N steps.

    python benchmarks/soak.py --num_envs 8 --steps 3000 --kill_every 50 --xvfb --json docs/soak_cpu2.json

Recycling soak: workers replaced every R episodes of their envs, for M minutes of stepping, side by
side (--compare) with the same env without recycling, the two stepped in alternating blocks so that
both see the same machine load.

    python benchmarks/soak.py --num_envs 4 --minutes 30 --recycle_after_episodes 5 --compare --xvfb \\
        --step_cost_s 0.05 --kill_every 0 --json docs/soak_recycle.json

Reports throughput (executed actions per second of stepping), resident memory over time (main
process, each worker, each Xvfb, and all of the soak's processes together), kills, restarts and
recycles, episodes lost, processes alive during the run (more than the workers, a replacement beside
each and their Xvfbs means some were left running), and what outlived close(): processes (workers,
Xvfb), /dev/shm segments and Xvfb sockets. An episode is lost when an env's episode ends other than
by the task (truncated, restarted) or when its step count breaks: the synthetic backend reports the
step count within the episode in task_low_dim_state, which must go 0, 1, 2, ... episode_length and
restart at 0 on each autoreset, across every recycle. The exit code is 1 if anything leaked or was
left running, or an episode was lost beyond the kills.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

import numpy as np
import psutil

from rlbench_vec import RLBenchVectorEnv
from rlbench_vec.cli import ArgumentParser, run_main
from rlbench_vec.wire.shm import PREFIX, SHM_DIR

MB = 1 << 20


@dataclass
class Run:
    """One vector env under soak: its counters, its continuity check and its memory samples."""

    name: str
    env: RLBenchVectorEnv
    episode_length: int
    rng: random.Random
    processes: dict[int, float]  # pid -> create time of every child process seen (shared by the runs of a soak)
    counts: np.ndarray = field(init=False)  # each env's step count within its episode
    steps: int = 0  # vector steps
    seconds: float = 0.0  # time spent stepping
    kills: int = 0
    flagged_restarts: int = 0
    episodes: int = 0  # ended by the task, as they should
    lost: int = 0  # ended otherwise (truncated, restarted)
    broken: list[str] = field(default_factory=list)  # step counts that did not continue
    recycled_flags: int = 0
    flags_per_env: np.ndarray | None = None  # recycled autoresets seen, per env
    ended: np.ndarray | None = None  # envs whose last step ended their episode (their autoreset is still to come)
    samples: list[dict] = field(default_factory=list)
    displays: dict[str, int] = field(default_factory=dict)  # display -> its Xvfb's pid

    def __post_init__(self) -> None:
        obs, _ = self.env.reset(seed=self.rng.randrange(2**31))
        self.counts = obs["task_low_dim_state"][:, 0].astype(np.int64)
        self.actions = np.zeros(self.env.action_space.shape, np.float32)
        self.observe_processes()

    def step(self, kill_every: int) -> None:
        if kill_every and (self.steps + 1) % kill_every == 0:
            os.kill(self.env.worker_pids[self.rng.randrange(len(self.env.worker_pids))], signal.SIGKILL)
            self.kills += 1
        obs, _, terminated, truncated, info = self.env.step(self.actions)
        self.steps += 1
        n = self.env.num_envs
        restarted = info.get("restarted", np.zeros(n, bool))
        autoreset = info.get("autoreset", np.zeros(n, bool))
        counts = obs["task_low_dim_state"][:, 0].astype(np.int64)
        expected = np.where(autoreset, 0, self.counts + 1)
        for i in np.flatnonzero((counts != expected) & ~restarted):
            self.broken.append(f"step {self.steps}, env {i}: step count {counts[i]}, expected {expected[i]}")
        ended_by_task = terminated & (counts == self.episode_length)
        self.episodes += int(ended_by_task.sum())
        self.lost += int((terminated & ~ended_by_task).sum() + truncated.sum())
        self.flagged_restarts += int(restarted.sum())
        flagged = np.asarray(info.get("recycled", np.zeros(n, bool)), bool)
        recycled = int(flagged.sum())
        self.recycled_flags += recycled
        self.flags_per_env = flagged.astype(np.int64) if self.flags_per_env is None else self.flags_per_env + flagged
        self.ended = terminated | truncated
        if recycled:  # a new worker serves an env: note it and its Xvfb before it may go again
            self.observe_processes()
        self.counts = counts

    def observe_processes(self) -> None:
        for child in psutil.Process().children(recursive=True):
            try:
                self.processes.setdefault(child.pid, child.create_time())
            except psutil.Error:
                pass
        for facts in self.env.worker_facts:
            if facts.get("display") and facts.get("xvfb_pid"):
                self.displays[facts["display"]] = facts["xvfb_pid"]

    def sample_memory(self, elapsed_s: float) -> None:
        self.observe_processes()
        workers = [rss_mb(pid) for pid in self.env.worker_pids]
        xvfbs = [rss_mb(f["xvfb_pid"]) for f in self.env.worker_facts if f.get("xvfb_pid")]
        living = alive(self.processes)
        self.samples.append({
            "stepping_s": round(self.seconds, 1), "wall_s": round(elapsed_s, 1),
            "main_mb": round(rss_mb(os.getpid()), 1), "worker_mb": [round(m, 1) for m in workers],
            "xvfb_mb": [round(m, 1) for m in xvfbs], "recycles": int(self.env.stats()["recycles"].sum()),
            "processes_alive": len(living),  # the soak's workers and Xvfbs (both runs'), and any left over
            "all_processes_mb": round(sum(rss_mb(p.pid) for p in living) + rss_mb(os.getpid()), 1),
        })

    def recycle_check(self, recycles: np.ndarray) -> dict:
        """A recycle is counted when its env's episode ends and flagged at that env's autoreset, one step
        later: per env, recycles minus flags must be 0, or 1 for an env whose episode ended on the last step."""
        flags = np.zeros(len(recycles), np.int64) if self.flags_per_env is None else self.flags_per_env
        ended = np.zeros(len(recycles), bool) if self.ended is None else self.ended
        unflagged = recycles.astype(np.int64) - flags
        return {"recycles_awaiting_autoreset": int(np.sum((unflagged == 1) & ended)),
                "recycle_flag_mismatches": int(np.sum((unflagged != 0) & ~((unflagged == 1) & ended)))}

    def summary(self) -> dict:
        stats = self.env.stats()
        executed = float(stats["steps"].sum())
        return {
            "vector_steps": self.steps, "executed_actions": int(executed), "stepping_s": round(self.seconds, 1),
            "actions_per_s": round(executed / self.seconds, 1), "kills": self.kills,
            "restarts": int(stats["restarts"].sum()), "restarted_steps_flagged": self.flagged_restarts,
            "recycles": int(stats["recycles"].sum()), "recycled_autoresets_flagged": self.recycled_flags,
            **self.recycle_check(stats["recycles"]),
            "episodes_completed": self.episodes, "episodes_lost": self.lost,
            "step_count_breaks": len(self.broken), "first_breaks": self.broken[:5],
            "memory": memory_summary(self.samples), "samples": self.samples,
        }


def alive(processes: dict[int, float]) -> list[psutil.Process]:
    """The processes of `processes` (pid -> create time) still running, the interpreter's resource tracker aside."""
    out = []
    for pid, created in processes.items():
        try:
            p = psutil.Process(pid)
            if p.create_time() == created and p.status() != psutil.STATUS_ZOMBIE and \
                    "resource_tracker" not in " ".join(p.cmdline()):
                out.append(p)
        except psutil.Error:
            pass
    return out


def rss_mb(pid: int | None) -> float:
    try:
        return psutil.Process(pid).memory_info().rss / MB
    except (psutil.Error, TypeError, ValueError):
        return float("nan")


def slope_mb_per_hour(seconds: list[float], values: list[float]) -> float | None:
    if len(seconds) < 3:
        return None
    return round(float(np.polyfit(np.asarray(seconds) / 3600, values, 1)[0]), 2)


def memory_summary(samples: list[dict]) -> dict:
    """First and last sample after the first tenth of the run (start-up allocations settled), and
    the least-squares slope over that span: for the main process, the largest worker and Xvfb, and
    all processes of the soak together (main, workers, Xvfbs, anything left over)."""
    settled = samples[len(samples) // 10:]
    t = [s["wall_s"] for s in settled]
    out = {"processes_alive": {"first": settled[0]["processes_alive"], "last": settled[-1]["processes_alive"],
                               "max": max(s["processes_alive"] for s in settled)}} if settled else {}
    for key in ("main_mb", "worker_mb", "xvfb_mb", "all_processes_mb"):
        values = [max(s[key]) if isinstance(s[key], list) else s[key] for s in settled if s[key] != []]
        if values:  # no Xvfb without --xvfb
            out[key.removesuffix("_mb")] = {"first_mb": values[0], "last_mb": values[-1], "max_mb": max(values),
                                            "slope_mb_per_hour": slope_mb_per_hour(t, values)}
    return out


def leaks(runs: list[Run], segments_before: set[str]) -> dict:
    """What outlived close(): our child processes (by pid and start time), our shared-memory segments,
    and the sockets and lock files of the Xvfbs our workers started."""
    time.sleep(0.5)
    processes = [f"{p.pid} {' '.join(p.cmdline())[:80]}" for p in alive(runs[0].processes)]
    segments = sorted({n for n in os.listdir(SHM_DIR) if n.startswith(f"{PREFIX}_{os.getpid()}_")} - segments_before)
    sockets = []
    for run in runs:
        for display, pid in run.displays.items():
            number = display[1:].split(".")[0]
            socket, lock = f"/tmp/.X11-unix/X{number}", f"/tmp/.X{number}-lock"
            try:
                owner = int(open(lock).read().strip())
            except (OSError, ValueError):
                owner = None
            if os.path.exists(socket) and owner in (pid, None):  # ours, or left without an owner
                sockets.append(socket)
    return {"leaked_processes": processes, "leaked_segments": segments, "leaked_xvfb_sockets": sorted(set(sockets)),
            "displays_used": sum(len(run.displays) for run in runs)}


def make_run(name: str, args: argparse.Namespace, recycle: int | None, rng: random.Random,
             processes: dict[int, float]) -> Run:
    options = {"step_cost_s": args.step_cost_s, "episode_length": args.episode_length, "needs_display": args.xvfb}
    env = RLBenchVectorEnv(num_envs=args.num_envs, backend="synthetic", backend_options=options,
                           envs_per_worker=args.envs_per_worker, recycle_after_episodes=recycle,
                           max_restarts_per_env=10**6, max_restarts_total=10**6)
    return Run(name, env, args.episode_length, rng, processes)


def main() -> int:
    parser = ArgumentParser(description=__doc__)
    parser.add_argument("--num_envs", type=int, default=8)
    parser.add_argument("--envs_per_worker", type=int, default=1, help="1, as for RLBench (one CoppeliaSim each)")
    parser.add_argument("--steps", type=int, default=3000, help="vector steps (when --minutes is not given)")
    parser.add_argument("--minutes", type=float, default=None, help="minutes of stepping per run instead of --steps")
    parser.add_argument("--kill_every", type=int, default=50, help="SIGKILL a random worker every N steps (0: never)")
    parser.add_argument("--recycle_after_episodes", type=int, default=None)
    parser.add_argument("--compare", action="store_true",
                        help="also run the same env without recycling, in alternating blocks of --block_s")
    parser.add_argument("--block_s", type=float, default=60.0)
    parser.add_argument("--sample_s", type=float, default=10.0, help="memory sampling interval")
    parser.add_argument("--step_cost_s", type=float, default=0.001)
    parser.add_argument("--episode_length", type=int, default=100)
    parser.add_argument("--xvfb", action="store_true", help="give every worker its own Xvfb, like RLBench")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()

    rng = random.Random(args.seed)
    segments_before = {n for n in os.listdir(SHM_DIR) if n.startswith(f"{PREFIX}_{os.getpid()}_")}
    load_before = os.getloadavg()
    processes: dict[int, float] = {}
    runs = [make_run("recycling" if args.recycle_after_episodes else "soak", args, args.recycle_after_episodes, rng,
                     processes)]
    if args.compare:
        runs.append(make_run("no_recycling", args, None, rng, processes))
    started = time.perf_counter()
    last_sample = [-float("inf") for _ in runs]
    budget_s = None if args.minutes is None else args.minutes * 60
    block_s = args.block_s if args.compare else float("inf")
    while True:
        pending = [r for r in runs if (r.seconds < budget_s if budget_s is not None else r.steps < args.steps)]
        if not pending:
            break
        for index, run in enumerate(runs):
            if run not in pending:
                continue
            block_start = time.perf_counter()
            while time.perf_counter() - block_start < block_s:
                if budget_s is not None and run.seconds >= budget_s or budget_s is None and run.steps >= args.steps:
                    break
                step_start = time.perf_counter()
                run.step(args.kill_every)
                run.seconds += time.perf_counter() - step_start
                now = time.perf_counter()
                if now - last_sample[index] >= args.sample_s:
                    run.sample_memory(now - started)
                    last_sample[index] = now
    for run in runs:
        run.sample_memory(time.perf_counter() - started)
    summaries = {run.name: run.summary() for run in runs}
    for run in runs:
        run.env.close()
    leaked = leaks(runs, segments_before)

    result = {
        "command": "python " + " ".join(sys.argv), "git_commit": git_commit(), "cpu_cores": os.cpu_count(),
        "load_average_before_after": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
        "num_envs": args.num_envs, "envs_per_worker": args.envs_per_worker, "step_cost_s": args.step_cost_s,
        "episode_length": args.episode_length, "xvfb": args.xvfb, "recycle_after_episodes": args.recycle_after_episodes,
        "wall_s": round(time.perf_counter() - started, 1), **leaked, "runs": summaries,
    }
    # at most every worker, a replacement beside each, and their Xvfbs: more were left running
    bound = len(runs) * 2 * math.ceil(args.num_envs / args.envs_per_worker) * (2 if args.xvfb else 1)
    result["processes_alive_max"] = max(s["processes_alive"] for run in runs for s in run.samples)
    result["processes_alive_bound"] = bound
    if args.compare:
        ours, theirs = (summaries[name]["actions_per_s"] for name in ("recycling", "no_recycling"))
        result["throughput_vs_no_recycling"] = round(ours / theirs, 4)
    print_result(result)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    clean = not (leaked["leaked_processes"] or leaked["leaked_segments"] or leaked["leaked_xvfb_sockets"]) \
        and result["processes_alive_max"] <= bound
    per_kill = args.envs_per_worker  # a killed worker takes its envs' episodes along
    intact = all(s["episodes_lost"] <= per_kill * s["kills"] and s["step_count_breaks"] == 0
                 and s["restarts"] == s["restarted_steps_flagged"] == per_kill * s["kills"] for s in summaries.values())
    return 0 if clean and intact else 1


def git_commit() -> str | None:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          cwd=os.path.dirname(os.path.abspath(__file__)))
    return done.stdout.strip() or None


def print_result(result: dict) -> None:
    for key, value in result.items():
        if key != "runs":
            print(f"{key:>28}: {value}")
    for name, summary in result["runs"].items():
        print(f"--- {name}")
        for key, value in summary.items():
            if key != "samples":
                print(f"{key:>28}: {value}")


if __name__ == "__main__":
    run_main(main, "python benchmarks/soak.py")
