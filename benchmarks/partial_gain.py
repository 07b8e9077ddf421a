"""The most partial batches can gain over `step` in benchmarks/peers.py's step-cost settings, for an
engine with no overhead and a core per env: a model, not a measurement. It replays peers.py's two loops
in simulated time, on the synthetic backend's costs (the same draws, episode length and reset cost,
each reset done ahead as soon as the episode's last step is answered, as eager_reset does):

  step   lockstep: every env gets an action; the call returns when the slowest env is done
  recv   peers.py's partial batches: send to every env, then again and again recv(min_envs=num_envs/2)
         and send to the envs it returned

and counts actions executed per second (an autoreset that only resets counts none, as in peers.py). No
engine beats its figures; a real one adds its own overhead, and where envs outnumber cores their CPU
caps both loops at cores / (CPU seconds per executed action), printed as `cpu_limit`.

    python benchmarks/partial_gain.py --num_envs 8 16 64 --cores 2 16 --json docs/partial_gain.json
"""

from __future__ import annotations

import heapq
import json
import shlex
import sys
from typing import Any

import numpy as np
from step_costs import SETTINGS

from rlbench_vec.backends.synthetic import draw_cost
from rlbench_vec.cli import ArgumentParser, run_main
from rlbench_vec.config import EnvConfig

TIMED = [name for name, setting in SETTINGS.items() if setting["options"].get("step_cost_s", 0.0) > 0]


class ModelEnvs:
    """The envs' clocks: when each is free, how far into its episode it is."""

    def __init__(self, num_envs: int, options: dict[str, Any], seed: int):
        self.rng = np.random.default_rng(seed)
        self.mean, self.dist = options.get("step_cost_s", 0.0), options.get("step_cost_dist", "constant")
        self.reset_s = options.get("reset_cost_s", 0.0)
        self.length = options.get("episode_length") or EnvConfig().max_episode_steps
        self.free_at = [0.0] * num_envs
        self.steps = [0] * num_envs

    def command(self, env: int, now: float) -> tuple[float, int]:
        """An action sent to env at `now`: when its result is ready, and the actions it executed (0 for
        the autoreset after an episode's end: it only hands over the reset done ahead)."""
        start = max(now, self.free_at[env])
        if self.steps[env] == self.length:
            self.steps[env] = 0
            return start, 0
        self.steps[env] += 1
        end = start + draw_cost(self.rng, self.mean, self.dist)
        self.free_at[env] = end + (self.reset_s if self.steps[env] == self.length else 0.0)
        return end, 1

    def cpu_per_action(self) -> float:
        return self.mean + self.reset_s / self.length


def lockstep(envs: ModelEnvs, num_envs: int, actions: int) -> float:
    now, executed = 0.0, 0
    while executed < actions:
        done = [envs.command(env, now) for env in range(num_envs)]
        now = max(end for end, _ in done)
        executed += sum(count for _, count in done)
    return executed / now


def partial_batches(envs: ModelEnvs, num_envs: int, actions: int) -> float:
    half = max(1, num_envs // 2)
    running = [(*envs.command(env, 0.0), env) for env in range(num_envs)]
    heapq.heapify(running)
    now, executed = 0.0, 0
    while executed < actions:
        returned = [heapq.heappop(running) for _ in range(half)]
        now = returned[-1][0]
        for _, count, env in returned:
            executed += count
            heapq.heappush(running, (*envs.command(env, now), env))
    return executed / now


def main() -> None:
    parser = ArgumentParser(prog="python benchmarks/partial_gain.py", description=__doc__)
    parser.add_argument("--num_envs", type=int, nargs="+", default=[8, 16, 64], help="env counts")
    parser.add_argument("--settings", nargs="+", default=TIMED, choices=TIMED, help="peers.py's step-cost settings")
    parser.add_argument("--cores", type=int, nargs="+", default=[2, 16], help="core counts for cpu_limit")
    parser.add_argument("--actions", type=int, default=200_000, help="simulated actions per loop")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="write the figures here")
    args = parser.parse_args()
    results = []
    for name in args.settings:
        options = SETTINGS[name]["options"]
        for n in args.num_envs:
            step = lockstep(ModelEnvs(n, options, args.seed), n, args.actions)
            recv = partial_batches(ModelEnvs(n, options, args.seed), n, args.actions)
            cpu = ModelEnvs(n, options, args.seed).cpu_per_action()
            limits = {str(cores): cores / cpu for cores in args.cores}
            results.append({"setting": name, "num_envs": n, "step": step, "recv": recv, "gain": recv / step,
                            "cpu_limit": limits})
            print(f"{name:12s} {n:4d} envs: step {step:9,.0f}  recv {recv:9,.0f} actions/s  gain {recv / step:.2f}x"
                  f"  cpu_limit {', '.join(f'{c} cores {v:,.0f}' for c, v in limits.items())}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"command": shlex.join(["python", *sys.argv]), "options": {n: SETTINGS[n]["options"]
                       for n in args.settings}, "results": results}, f, indent=1)


if __name__ == "__main__":
    run_main(main, "python benchmarks/partial_gain.py")
