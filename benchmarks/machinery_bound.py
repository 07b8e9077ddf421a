"""How much of a step is the engine's own machinery, and how fast the loop could go without any.

One vector env of the synthetic backend at 0 ms (RLBench's default observation, episodes that never end)
is stepped four ways, with full batches (step()) and with half batches (recv(min_envs=N/2), then send to
the envs it returned, as benchmarks/peers.py times them):

  engine        the vector env as it is
  bare main     the main side cut to what moves the data: the actions checked and written to shared
                memory, one command per worker, a wait for the plain replies on the shared pipe, the page
                flip (half batches: the claims' limit, the flip, the wait for slots still being written),
                views of the page and the rewards and flags (no deadlines, no env table, no restarts, no
                accounts)
  bare workers  the engine's main side, with each worker's command loop cut to the env's own work per
                entry: the backend's step, its slot (half batches: claimed once the command's steps are
                done), its outcome row, its observation write, then one plain reply (no routes, no
                autoreset, no timing)
  bare both     both cut

"bare both" is what is left without the engine: the env's own work (the synthetic backend's step and
observation write, the same env that benchmarks/peers.py gives every system) and one round trip per
worker and call. No vector env of Python worker processes stepping this env this way can go faster on
this machine, so the figures bound what the engine can gain by trimming its own Python, and its ratios
to the peers; "bare both" of half batches against that of full batches says what half batches cost
without any engine.

The cuts reach into the engine's internals on purpose (they replace its code). Each figure is the median
of --repeats runs of --steps calls; the engine's and the bare main side's runs alternate on one vector env,
and the bare workers are a second vector env whose workers this script patches when they start (a spawned
worker imports its parent's main module first).

    PYTHONPATH=. python benchmarks/machinery_bound.py --num_envs 16 64 --envs_per_worker 1 4 \
        --batches full half --steps 3000 --repeats 3 --json docs/machinery_bound_gpu16.json
"""

from __future__ import annotations

import json
import os
import select
import shlex
import statistics
import sys
import time
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

import rlbench_vec.worker.main
from rlbench_vec import RLBenchVectorEnv
from rlbench_vec.cli import ArgumentParser, run_main
from rlbench_vec.engine.results import EXECUTED, REWARD, TERMINATED
from rlbench_vec.wire.protocol import (
    CALL,
    CLAIM,
    CLOSE,
    OK,
    RESET,
    STEP,
    command_reader,
    read_plain,
    send_plain,
    send_reply,
)

BARE_WORKERS_VAR = "RLBENCH_VEC_BARE_WORKERS"  # set while the bare workers' vector env starts
NEVER_ENDS = 10**9  # max_episode_steps: no episode ends, so every reply of either loop is plain
REPLY_TIMEOUT_MS = 10_000
WARMUP_CALLS = 200
BATCHES = ("full", "half")
T = TypeVar("T")
LOOPS = {("engine", "engine"): "engine", ("engine", "bare"): "bare main", ("bare", "engine"): "bare workers",
         ("bare", "bare"): "bare both"}  # (workers, main side) -> name


def bare_serve(command_fd: int, replies: Any, runner: Any) -> None:
    """rlbench_vec.worker.main.serve cut to the env's own work for a step of one action per entry, each to
    its own slot or to the next free slots of the filling page; resets and calls still go through the
    runner."""
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
            rows = entries.tolist()  # (local instance, env, slot)
            results = [group.backends[local].step(actions[env, 0]) for local, env, _ in rows]
            first = CLAIM
            if rows[0][2] == CLAIM:  # a partial batch: slots claimed once the results are ready, as the engine does
                page, first = out.buffers.claim([env for _, env, _ in rows])
                slots = list(range(first, first + len(rows)))
            else:
                slots = [slot for _, _, slot in rows]
            outcome, obs = out.outcome[page], out.obs[page]
            for (local, _, _), result, slot in zip(rows, results, slots):
                row = outcome[slot, :, 0]
                row[REWARD], row[TERMINATED], row[EXECUTED] = result.reward, result.terminated, 1.0
                group.backends[local].write_observation(group.row(obs, slot))
            send_plain(replies.plain_fd, replies.worker, replies.generation, seq, page, first, 0.0, 0.0)
        elif command == RESET:
            replies.other(seq, *runner.reset(page, entries, payload))
        elif command == CALL:
            replies.other(seq, *runner.call(entries, payload))


if __name__ == "__mp_main__" and os.environ.get(BARE_WORKERS_VAR):  # a worker spawned for the bare workers
    rlbench_vec.worker.main.serve = bare_serve


class Loop:
    """calls of one kind on one vector env: begin() sets them going, run(calls) returns the env-steps
    they made, end() leaves nothing in flight (the other side's loop comes next)."""

    def __init__(self, env: RLBenchVectorEnv, actions: np.ndarray):
        self.env, self.actions, self.num_envs = env, actions, env.num_envs
        self.half = max(1, env.num_envs // 2)

    def begin(self) -> None:
        pass

    def end(self) -> None:
        pass

    def run(self, calls: int) -> int:
        raise NotImplementedError


class EngineFull(Loop):
    def run(self, calls: int) -> int:
        for _ in range(calls):
            self.env.step(self.actions)
        return calls * self.num_envs


class EngineHalf(Loop):
    def begin(self) -> None:
        self.env.send(self.actions)

    def run(self, calls: int) -> int:
        rows = 0
        for _ in range(calls):
            *_, info = self.env.recv(min_envs=self.half)
            ids = info["env_id"]
            self.env.send(self.actions[:len(ids)], env_ids=ids)
            rows += len(ids)
        return rows

    def end(self) -> None:
        self.env.recv()


class BareMain(Loop):
    """Full batches, step() cut to what moves the data (see the module's docstring). Replies other than
    plain ones never come: episodes never end."""

    def __init__(self, env: RLBenchVectorEnv, actions: np.ndarray):
        super().__init__(env, actions)
        self.pool, self.buffers = env._pool, env._pool.buffers
        self.commands = [(handle, len(entries), data) for handle, entries, (_, data)
                         in self.pool.commands._full_batch()]
        self.plain_fd = self.pool.workers.plain_fd
        self.poll = select.poll()
        self.poll.register(self.plain_fd, select.POLLIN)
        self.outcome = [page["outcome"] for page in env._output.pages]

    def wait(self) -> list[tuple]:
        """The plain replies that came, after a wait for the first."""
        if not self.poll.poll(REPLY_TIMEOUT_MS):
            raise RuntimeError(f"a worker did not answer within {REPLY_TIMEOUT_MS / 1000:.0f} s")
        return read_plain(self.plain_fd)

    def batch(self, page: int, rows: int) -> tuple:
        """What a call returns: views of the rows, their rewards and flags."""
        block = self.outcome[page][:rows, :, 0]
        flags = block[:, TERMINATED:] > 0
        return dict(self.env._output._views(page, rows)), block[:, REWARD].copy(), flags[:, 0], flags[:, 1]

    def run(self, calls: int) -> int:
        env, n, workers = self.env, self.num_envs, len(self.commands)
        for _ in range(calls):
            env._actions[:, :1] = env._check_actions(self.actions, env._pool.everyone, False)
            page = self.buffers.filling
            for handle, count, data in self.commands:
                handle.write(STEP, count, data, page, 1)
            replies = 0
            while replies < workers:
                replies += len(self.wait())
            self.pool._flip()
            self.batch(page, n)
        return calls * n


class BareHalf(BareMain):
    """Half batches, recv and send cut to what moves the data: commands to claimed slots, the claims'
    limit, the flip and the wait for slots still being written, views of the rows."""

    def __init__(self, env: RLBenchVectorEnv, actions: np.ndarray):
        super().__init__(env, actions)
        # per worker, the envs of each command in flight: a plain reply names its worker, not its envs
        self.queued: dict[int, deque[int]] = {handle.spec.worker_index: deque() for handle in self.pool.serving}
        self.replied = [0, 0]
        self.page_env = [self.buffers.arrays[f"page{p}/env"] for p in (0, 1)]

    def send(self, ids: list[int]) -> None:
        env = self.env
        env._actions[ids, :1] = env._check_actions(self.actions[:len(ids)], ids, False)
        page = self.buffers.filling
        for handle, entries, (_, data) in self.pool.commands._claims(ids):
            handle.write(STEP, len(entries), data, page, 1)
            self.queued[handle.spec.worker_index].append(len(entries))

    def take_replies(self) -> None:
        for worker, _, _, page, *_ in self.wait():
            self.replied[page] += self.queued[worker].popleft()

    def ready_next_page(self) -> None:
        """As the engine's: the page after the filling one counts no replies until claims may go there."""
        if not self.buffers.limited:
            self.replied[1 - self.buffers.filling] = 0

    @staticmethod
    def locked(attempt: Callable[[], T | None]) -> T:
        """A change of the claims' control, retried while a worker holds their lock (the engine's retry
        would read replies meanwhile, which this loop reads itself)."""
        while (done := attempt()) is None:
            os.sched_yield()
        return done

    def recv(self, min_envs: int) -> list[int]:
        buffers, locked, page = self.buffers, self.locked, self.buffers.filling
        if self.replied[page] < min_envs:
            self.ready_next_page()
            locked(lambda: buffers.try_limit(min_envs))
        while self.replied[page] < min_envs:
            self.take_replies()
        self.ready_next_page()
        closed, rows = locked(buffers.try_flip)
        while self.replied[closed] < rows:
            self.take_replies()
        ids = self.page_env[closed][:rows].astype(np.int64)
        self.batch(closed, rows)
        return ids.tolist()

    def begin(self) -> None:
        self.replied = [0, 0]
        self.send(list(range(self.num_envs)))

    def run(self, calls: int) -> int:
        rows = 0
        for _ in range(calls):
            ids = self.recv(self.half)
            self.send(ids)
            rows += len(ids)
        return rows

    def end(self) -> None:
        self.recv(self.num_envs)
        self.pool.table.replied[:] = [0, 0]  # the engine's count of the page it fills next (none claimed there)


def timed(loop: Loop, calls: int) -> tuple[float, float, float]:
    """Env-steps/s, the main process's CPU microseconds per call and env-steps per call of `calls` calls."""
    wall, cpu = time.perf_counter(), time.process_time()
    env_steps = loop.run(calls)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return env_steps / wall, cpu / calls * 1e6, env_steps / calls


def measure(num_envs: int, envs_per_worker: int, batches: str, bare_workers: bool, calls: int,
            repeats: int) -> dict[str, list]:
    """Per main side ("engine", "bare"): the runs' timed() figures, the sides alternating."""
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
        engine, bare = (EngineFull, BareMain) if batches == "full" else (EngineHalf, BareHalf)
        sides = {"engine": engine(env, actions), "bare": bare(env, actions)}
        runs: dict[str, list] = {side: [] for side in sides}
        for repeat in range(-1, repeats):  # a warm-up round first
            for side, loop in sides.items():
                loop.begin()
                if repeat < 0:
                    loop.run(WARMUP_CALLS)
                else:
                    runs[side].append(timed(loop, calls))
                loop.end()
        env.step(actions)  # the engine's own loop still works after the bare one
        # the engine's workers report their simulators' seconds with each reply, the bare ones none
        if bare_workers != (float(env._pool.totals()["exec_s"].sum()) == 0.0):
            raise RuntimeError(f"the {'bare' if bare_workers else 'engine'} workers did not serve this vector env")
    return runs


def main() -> None:
    parser = ArgumentParser(prog="python benchmarks/machinery_bound.py", description=__doc__)
    parser.add_argument("--num_envs", type=int, nargs="+", default=[16, 64], help="env counts")
    parser.add_argument("--envs_per_worker", type=int, nargs="+", default=[1, 4], help="envs per worker process")
    parser.add_argument("--batches", nargs="+", default=list(BATCHES), choices=BATCHES,
                        help="full: step(); half: recv(min_envs=N/2), then send to the envs it returned")
    parser.add_argument("--steps", type=int, default=3000, help="timed calls per run (step(), or recv and send)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per figure; the median is kept")
    parser.add_argument("--json", default=None, metavar="PATH", help="write the figures here")
    args = parser.parse_args()
    if args.repeats < 1 or args.steps < 1:
        parser.error("--steps and --repeats must be at least 1")
    load_before = os.getloadavg()
    results = []
    for num_envs in args.num_envs:
        for per_worker in args.envs_per_worker:
            for batches in args.batches:
                figures = {}
                for bare_workers in (False, True):
                    runs = measure(num_envs, per_worker, batches, bare_workers, args.steps, args.repeats)
                    workers = "bare" if bare_workers else "engine"
                    for main_side, side_runs in runs.items():
                        rate = figures[workers, main_side] = statistics.median(r for r, _, _ in side_runs)
                        results.append({"num_envs": num_envs, "envs_per_worker": per_worker, "batches": batches,
                                        "workers": workers, "main": main_side, "env_steps_per_s": rate,
                                        "main_cpu_us_per_call": statistics.median(c for _, c, _ in side_runs),
                                        "env_steps_per_call": statistics.median(e for _, _, e in side_runs),
                                        "runs_env_steps_per_s": [r for r, _, _ in side_runs]})
                line = ", ".join(f"{name} {figures[loop]:,.0f}" for loop, name in LOOPS.items())
                gain = figures["bare", "bare"] / figures["engine", "engine"]
                print(f"{num_envs:4d} envs, {per_worker} per worker, {batches} batches (env-steps/s): {line} "
                      f"({gain:.2f}x the engine)", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"command": shlex.join(["python", *sys.argv]), "cpus": os.cpu_count(),
                       "load_average_1_5_15_min_before": load_before, "python": sys.version.split()[0],
                       "results": results}, f, indent=1)


if __name__ == "__main__":
    run_main(main, "python benchmarks/machinery_bound.py")
