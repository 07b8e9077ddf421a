"""Resets off the critical path: an RL loop whose policy takes time, against slow resets.

The main process spends --policy_ms per batch (sleeping, as it would while a GPU runs the policy);
episodes last --episode_length steps; a reset burns --reset_s of CPU in the worker (synthetic
backend). For each reset time, the loop runs with
  off      eager_reset=False: an env resets when its next step asks (the loop waits for it)
  eager    eager_reset=True: the worker resets right after the step that ended the episode, during
           the policy's time
  spares   eager, plus --spares pre-reset instances that take over ended envs at once
and the throughput (executed env-steps/s) is compared with free resets (reset_s = 0). Two loops:
sync (step() on the whole batch) and async (send/recv: act on the first half of the envs to finish,
so an env that is still resetting holds no one up).

    python benchmarks/reset_overlap.py --tag gpu16 --num_envs 16
Writes {out}/reset_overlap_{tag}.json and .png.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import numpy as np

from rlbench_vec import RLBenchVectorEnv
from rlbench_vec.cli import ArgumentParser, run_main

MODES = ("off", "eager", "spares")
LOOPS = ("sync", "async")


def run_loop(env: RLBenchVectorEnv, loop: str, policy_s: float, seconds: float) -> float:
    """Executed env-steps per second over `seconds` of the loop (after one warm-up episode)."""
    n = env.num_envs
    actions = np.zeros((n, env.single_action_space.shape[0]), np.float32)
    env.reset(seed=0)
    if loop == "sync":
        step = lambda: env.step(actions)  # noqa: E731
    else:
        env.send(actions)

        def step():
            ids = env.recv(min_envs=max(1, n // 2))[4]["env_id"]
            time.sleep(policy_s)
            env.send(actions[:len(ids)], env_ids=ids)
    for _ in range(30):  # warm-up: first episodes and resets
        step()
        if loop == "sync":
            time.sleep(policy_s)
    env.reset_stats()
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        step()
        if loop == "sync":
            time.sleep(policy_s)
    elapsed = time.perf_counter() - start
    if loop == "async":
        env.recv()
    return float(env.stats()["steps"].sum()) / elapsed


def measure(args: argparse.Namespace, loop: str, mode: str, reset_s: float) -> float:
    options = {"episode_length": args.episode_length, "reset_cost_s": reset_s, "step_cost_s": args.step_ms / 1000}
    with RLBenchVectorEnv(num_envs=args.num_envs, backend="synthetic", cameras=(), envs_per_worker=1,
                          eager_reset=mode != "off", spare_envs=args.spares if mode == "spares" else 0,
                          max_episode_steps=10 * args.episode_length, backend_options=options) as env:
        return run_loop(env, loop, args.policy_ms / 1000, args.seconds)


def plot(report: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(report["loops"]), figsize=(6 * len(report["loops"]), 4.4), squeeze=False)
    for ax, loop in zip(axes[0], report["loops"]):
        rows = [r for r in report["results"] if r["loop"] == loop]
        free = next(r["sps"] for r in rows if r["reset_s"] == 0 and r["mode"] == "eager")
        for mode in report["modes"]:
            points = sorted((r["reset_s"], r["sps"]) for r in rows if r["mode"] == mode and r["reset_s"] > 0)
            ax.plot(*zip(*points), marker="o", label=mode)
        ax.axhline(free, color="k", ls="--", lw=1, label="free resets")
        ax.axhline(0.9 * free, color="gray", ls=":", lw=1, label="0.9 x free")
        ax.set(title=f"{loop} loop", xlabel="reset time (s)", ylabel="env-steps/s", xscale="log")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"{report['command']}\n{report['num_envs']} envs, policy {report['policy_ms']} ms per batch, "
                 f"episodes of {report['episode_length']} steps, {report['machine']['cpus']} CPUs", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = ArgumentParser(description=__doc__)
    parser.add_argument("--tag", required=True)
    parser.add_argument("--num_envs", type=int, default=16)
    parser.add_argument(
        "--spares", type=int, default=None, help="spare instances for the spares mode (default num_envs)"
    )
    parser.add_argument("--policy_ms", type=float, default=50.0)
    parser.add_argument("--step_ms", type=float, default=0.0, help="CPU cost of a step in the worker")
    parser.add_argument("--episode_length", type=int, default=20)
    parser.add_argument("--reset_s", type=float, nargs="+", default=[0.0, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0])
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    parser.add_argument("--loops", nargs="+", default=list(LOOPS), choices=LOOPS)
    parser.add_argument("--seconds", type=float, default=6.0, help="timed seconds per configuration")
    parser.add_argument("--out", default="docs")
    args = parser.parse_args()
    args.spares = args.num_envs if args.spares is None else args.spares
    results = []
    for loop in args.loops:
        for reset_s in args.reset_s:
            for mode in args.modes if reset_s > 0 else ["eager"]:  # free resets: one baseline
                sps = measure(args, loop, mode, reset_s)
                results.append({"loop": loop, "mode": mode, "reset_s": reset_s, "sps": round(sps, 1)})
                print(f"{loop:>5} | {mode:>6} | reset {reset_s:5.3f} s | {sps:8,.1f} env-steps/s", flush=True)
    report = {
        "command": " ".join(["python", *sys.argv]), "num_envs": args.num_envs, "spares": args.spares,
        "policy_ms": args.policy_ms, "step_ms": args.step_ms, "episode_length": args.episode_length,
        "modes": args.modes, "loops": args.loops, "results": results,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
    }
    os.makedirs(args.out, exist_ok=True)
    stem = os.path.join(args.out, f"reset_overlap_{args.tag}")
    with open(stem + ".json", "w") as file:
        json.dump(report, file, indent=2)
    plot(report, stem + ".png")
    print(f"wrote {stem}.json and .png")


if __name__ == "__main__":
    run_main(main, "python benchmarks/reset_overlap.py")
