"""How much of a step() is the engine's own machinery, and how fast the loop could go without any.

One vector env of the synthetic backend at 0 ms (RLBench's default observation, episodes that never end)
is stepped with full batches in four ways:

  engine        RLBenchVectorEnv.step as it is
  bare main     the main side cut to what moves the data: the actions checked and written to shared
                memory, one command per worker, a wait for every plain reply on the shared pipe, the page
                flip, views of the page and the rewards and flags (no deadlines, no env table, no restarts,
                no accounts)
  bare workers  step() as it is, with each worker's command loop cut to the env's own work per entry: the
                backend's step, its outcome row, its observation write, then one plain reply (no routes,
                no autoreset, no timing)
  bare both     both cut

"bare both" is what is left of a step without the engine: the env's own work (the synthetic backend's
step and observation write, the same env that benchmarks/peers.py gives every system) and one round trip
per worker. No vector env of Python worker processes stepping this env can go faster on this machine,
so the figures bound what the engine can gain by trimming its own Python, and its ratios to the peers.

The cuts reach into the engine's internals on purpose (they replace its code). Each figure is the median
of --repeats runs of --steps steps; the engine's and the bare main side's runs alternate on one vector env,
and the bare workers are a second vector env whose workers this script patches when they start (a spawned
worker imports its parent's main module first).

    PYTHONPATH=. python benchmarks/machinery_bound.py --num_envs 16 64 --envs_per_worker 1 4 --steps 3000 \
        --repeats 3 --json docs/machinery_bound_gpu16.json
"""

from __future__ import annotations

import json
import os
import select
import shlex
import statistics
import sys
import time
from typing import Any

import numpy as np

import rlbench_vec.worker
from rlbench_vec import RLBenchVectorEnv
from rlbench_vec.cli import ArgumentParser, run_main
from rlbench_vec.protocol import (
    CALL,
    CLAIM,
    CLOSE,
    OK,
    PLAIN_REPLY,
    RESET,
    STEP,
    command_reader,
    send_plain,
    send_reply,
)
from rlbench_vec.results import EXECUTED, REWARD, TERMINATED

BARE_WORKERS_VAR = "RLBENCH_VEC_BARE_WORKERS"  # set while the bare workers' vector env starts
NEVER_ENDS = 10**9  # max_episode_steps: no episode ends, so every reply of either loop is plain
REPLY_TIMEOUT_MS = 10_000
WARMUP_STEPS = 200
LOOPS = {("engine", "engine"): "engine", ("engine", "bare"): "bare main", ("bare", "engine"): "bare workers",
         ("bare", "bare"): "bare both"}  # (workers, main side) -> name


def bare_serve(command_fd: int, replies: Any, runner: Any) -> None:
    """rlbench_vec.worker.serve cut to the env's own work for a step of one action per entry, each to
    its own slot; resets and calls still go through the runner."""
    reader = command_reader(command_fd)
    group, out, actions = runner.group, runner.out, runner.actions
    while True:
        try:
            (command, page, _k, seq), entries, payload = reader.read()
        except (EOFError, OSError):
            return
        if command == CLOSE:
            send_reply(replies.fd, seq, OK)
            return
        if command == STEP:
            outcome, obs = out.outcome[page], out.obs[page]
            for local, env, slot in entries.tolist():
                backend = group.backends[local]
                result = backend.step(actions[env, 0])
                row = outcome[slot, :, 0]
                row[REWARD], row[TERMINATED], row[EXECUTED] = result.reward, result.terminated, 1.0
                backend.write_observation(group.row(obs, slot))
            send_plain(replies.plain_fd, replies.worker, replies.generation, seq, page, CLAIM, 0.0, 0.0)
        elif command == RESET:
            replies.other(seq, *runner.reset(page, entries, payload))
        elif command == CALL:
            replies.other(seq, *runner.call(entries, payload))


if __name__ == "__mp_main__" and os.environ.get(BARE_WORKERS_VAR):  # a worker spawned for the bare workers
    rlbench_vec.worker.serve = bare_serve


class BareMain:
    """step() of a full batch cut to what moves the data (see the module's docstring). Replies other
    than plain ones never come: episodes never end."""

    def __init__(self, env: RLBenchVectorEnv):
        self.env, self.pool = env, env._pool
        full_batch = self.pool.commands._full_batch()
        self.commands = [(handle, len(entries), data) for handle, entries, (_, data) in full_batch]
        self.plain_fd = self.pool.workers.plain_fd
        self.poll = select.poll()
        self.poll.register(self.plain_fd, select.POLLIN)
        self.reply_bytes = len(self.commands) * PLAIN_REPLY.size
        self.outcome = [page["outcome"] for page in env._output.pages]
        self.views = [env._output._views(page, env.num_envs) for page in (0, 1)]

    def step(self, actions: np.ndarray) -> tuple:
        env, n = self.env, self.env.num_envs
        env._actions[:, :1] = env._check_actions(actions, n, False)
        page = self.pool.buffers.filling
        for handle, count, data in self.commands:
            handle.write(STEP, count, data, page, 1)
        received = 0
        while received < self.reply_bytes:
            if not self.poll.poll(REPLY_TIMEOUT_MS):
                raise RuntimeError(f"a worker did not answer within {REPLY_TIMEOUT_MS / 1000:.0f} s")
            received += len(os.read(self.plain_fd, self.reply_bytes - received))
        self.pool._flip()
        block = self.outcome[page][:n, :, 0]
        flags = block[:, TERMINATED:] > 0
        return dict(self.views[page]), block[:, REWARD].copy(), flags[:, 0], flags[:, 1], {}


def timed(step: Any, actions: np.ndarray, steps: int) -> tuple[float, float]:
    """Env-steps/s and the main process's CPU microseconds per step of `steps` calls."""
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(steps):
        step(actions)
    return steps * len(actions) / (time.perf_counter() - wall), (time.process_time() - cpu) / steps * 1e6


def measure(num_envs: int, envs_per_worker: int, bare_workers: bool, steps: int, repeats: int) -> dict[str, list]:
    """Per main side ("engine", "bare"): the runs' (env-steps/s, main CPU us per step), alternating."""
    if bare_workers:
        os.environ[BARE_WORKERS_VAR] = "1"
    try:
        env = RLBenchVectorEnv(num_envs, backend="synthetic", envs_per_worker=envs_per_worker,
                               max_episode_steps=NEVER_ENDS)
    finally:
        os.environ.pop(BARE_WORKERS_VAR, None)
    with env:
        env.reset(seed=0)
        actions = np.zeros((num_envs, env.single_action_space.shape[0]), np.float32)
        bare = BareMain(env)
        sides = {"engine": env.step, "bare": bare.step}
        for step in sides.values():
            timed(step, actions, WARMUP_STEPS)
        runs: dict[str, list] = {side: [] for side in sides}
        for _ in range(repeats):
            for side, step in sides.items():
                runs[side].append(timed(step, actions, steps))
        env.step(actions)  # the engine's own loop still works after the bare one
        # the engine's workers report their simulators' seconds with each reply, the bare ones none
        if bare_workers != (float(env._pool.totals()["exec_s"].sum()) == 0.0):
            raise RuntimeError(f"the {'bare' if bare_workers else 'engine'} workers did not serve this vector env")
    return runs


def main() -> None:
    parser = ArgumentParser(prog="python benchmarks/machinery_bound.py", description=__doc__)
    parser.add_argument("--num_envs", type=int, nargs="+", default=[16, 64], help="env counts")
    parser.add_argument("--envs_per_worker", type=int, nargs="+", default=[1, 4], help="envs per worker process")
    parser.add_argument("--steps", type=int, default=3000, help="timed steps per run")
    parser.add_argument("--repeats", type=int, default=3, help="runs per figure; the median is kept")
    parser.add_argument("--json", default=None, metavar="PATH", help="write the figures here")
    args = parser.parse_args()
    if args.repeats < 1 or args.steps < 1:
        parser.error("--steps and --repeats must be at least 1")
    load_before = os.getloadavg()
    results = []
    for num_envs in args.num_envs:
        for per_worker in args.envs_per_worker:
            figures = {}
            for bare_workers in (False, True):
                runs = measure(num_envs, per_worker, bare_workers, args.steps, args.repeats)
                for main_side, side_runs in runs.items():
                    workers = "bare" if bare_workers else "engine"
                    rate = statistics.median(r for r, _ in side_runs)
                    figures[workers, main_side] = rate
                    results.append({"num_envs": num_envs, "envs_per_worker": per_worker, "workers": workers,
                                    "main": main_side, "env_steps_per_s": rate,
                                    "main_cpu_us_per_step": statistics.median(c for _, c in side_runs),
                                    "runs_env_steps_per_s": [r for r, _ in side_runs]})
            line = ", ".join(f"{name} {figures[loop]:,.0f}" for loop, name in LOOPS.items())
            gain = figures["bare", "bare"] / figures["engine", "engine"]
            print(f"{num_envs:4d} envs, {per_worker} per worker (env-steps/s): {line} ({gain:.2f}x the engine)",
                  flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"command": shlex.join(["python", *sys.argv]), "cpus": os.cpu_count(),
                       "load_average_1_5_15_min_before": load_before, "python": sys.version.split()[0],
                       "results": results}, f, indent=1)


if __name__ == "__main__":
    run_main(main, "python benchmarks/machinery_bound.py")
