"""What any vector env of Python worker processes can reach on this machine with RLBench's default
observation (5 cameras, rgb + depth + mask at 128x128): the same work as the engine's on the synthetic
backend at 0 ms (each env writes its whole observation into shared memory on every step, into two
result pages in turn), with nothing else around it. The figures bound what `benchmarks/peers.py` can
show for any system.

Modes (env-steps/s, each the best of --repeats runs):
  free        every worker writes its envs' observations in a loop, no round trips: the machine's
              bandwidth for these writes (an upper bound for everything below)
  pipes       lockstep steps: the main process writes one byte to each worker's pipe, each worker
              writes its envs' observations and one byte to a pipe shared by all, the main process
              reads until every worker answered; the least a blocking round trip in Python costs
  pipes_bare  the same round trips without the writes
  bell        as pipes, but one write wakes every worker: they all poll one pipe, and the main process
              rings two such pipes in turn (draining the one rung the step before)
  bell_bare   the same without the writes
  spin        lockstep steps through shared memory: workers and the main process busy-poll a step
              counter and per-worker done counters (as PufferLib's Multiprocessing does), no system calls

    PYTHONPATH=. python benchmarks/ceiling.py --num_envs 16 64 --envs_per_worker 1 4 --steps 3000 --seconds 2 \
        --repeats 3 --json docs/ceiling_gpu16.json
"""

from __future__ import annotations

import json
import os
import select
import shlex
import sys
import time

import numpy as np

from rlbench_vec.cli import ArgumentParser, run_main
from rlbench_vec.config import EnvConfig
from rlbench_vec.spec import observation_bytes
from rlbench_vec.wire.process import SPAWN
from rlbench_vec.wire.shm import SharedBuffers

MODES = ("free", "pipes", "pipes_bare", "bell", "bell_bare", "spin")
STEP, DONE = 0, 1  # rows of the spin mode's counters: the step asked for, and each worker's last step done


def slot_bytes() -> int:
    return observation_bytes(EnvConfig(backend="synthetic").validated())


def worker(name: str, fields: list, index: int, slots: range, mode: str, seconds: float, command, answer,
           bells: list) -> None:
    """One worker: writes the observations of its envs (slots) as the mode says."""
    buffers = SharedBuffers.attach(name, fields)
    obs, counters = buffers.arrays["obs"], buffers.arrays["counters"]
    source = np.random.default_rng(index).integers(0, 256, obs.shape[2], dtype=np.uint8)
    command_fd, answer_fd = command.fileno(), answer.fileno()

    page = 0

    def write() -> None:  # into the pages in turn, as the engine's steps do
        nonlocal page
        for slot in slots:
            obs[page, slot] = source
        page ^= 1

    if mode == "free":
        os.read(command_fd, 1)
        steps, end = 0, time.perf_counter() + seconds
        while time.perf_counter() < end:
            write()
            steps += 1
        os.write(answer_fd, (steps * len(slots)).to_bytes(8, "little"))  # its env-steps
    elif mode.startswith("bell"):
        polls = []
        for bell in bells:
            polls.append(select.poll())
            polls[-1].register(bell.fileno(), select.POLLIN)
        done = 0
        while True:
            polls[(done + 1) % 2].poll()
            if counters[STEP, 0] < 0:
                break
            if mode == "bell":
                write()
            done += 1
            os.write(answer_fd, b"d")
    elif mode == "spin":
        done = 0
        while True:
            while counters[STEP, 0] == done:
                pass
            if counters[STEP, 0] < 0:
                break
            write()
            done += 1
            counters[DONE, index] = done
    else:
        writes = mode == "pipes"
        while os.read(command_fd, 1) == b"s":
            if writes:
                write()
            os.write(answer_fd, b"d")
    buffers.close()


def run(mode: str, num_envs: int, envs_per_worker: int, steps: int, seconds: float) -> float:
    """env-steps/s of one run."""
    workers = -(-num_envs // envs_per_worker)
    buffers = SharedBuffers.create({"obs": ((2, num_envs, slot_bytes()), np.dtype(np.uint8)),
                                    "counters": ((2, max(workers, 1)), np.dtype(np.int64))})
    answers_in, answers_out = SPAWN.Pipe(duplex=False)
    bells = [SPAWN.Pipe(duplex=False) for _ in range(2)]
    commands, processes = [], []
    try:
        for w in range(workers):
            command_in, command_out = SPAWN.Pipe(duplex=False)
            slots = range(w * envs_per_worker, min(num_envs, (w + 1) * envs_per_worker))
            process = SPAWN.Process(target=worker, daemon=True, args=(
                buffers.name, buffers.fields, w, slots, mode, seconds, command_in, answers_out, [r for r, _ in bells]))
            process.start()
            command_in.close()
            commands.append(command_out.fileno())
            processes.append((process, command_out))
        if mode.startswith("bell"):  # no command pipes: a step rings a bell's write end, drains a read end
            commands = [w.fileno() for _, w in bells] + [r.fileno() for r, _ in bells]
        return _timed(mode, buffers.arrays["counters"], commands, answers_in.fileno(), num_envs, steps, seconds,
                      workers)
    finally:
        for _, command_out in processes:
            command_out.close()  # EOF ends a pipes worker
        buffers.arrays["counters"][STEP, 0] = -1  # ends a spin or bell worker
        for _, ring in bells:
            os.write(ring.fileno(), b"x")
        for process, _ in processes:
            process.join(timeout=10)
            if process.is_alive():
                process.kill()
        for connection in (answers_in, answers_out, *(end for bell in bells for end in bell)):
            connection.close()
        buffers.close()
        buffers.unlink()


def _timed(mode: str, counters: np.ndarray, commands: list[int], answers: int, num_envs: int, steps: int,
           seconds: float, workers: int) -> float:
    if mode == "free":
        for fd in commands:
            os.write(fd, b"s")
        return sum(int.from_bytes(_read_exactly(answers, 8), "little") for _ in range(workers)) / seconds
    step = {"spin": _spin_step, "bell": _bell_step, "bell_bare": _bell_step}.get(mode, _pipe_step)
    for n in range(1, steps // 10 + 1):  # warm-up: every worker started and every slot written
        step(n, counters, commands, answers, workers)
    start = time.perf_counter()
    for n in range(steps // 10 + 1, steps // 10 + 1 + steps):
        step(n, counters, commands, answers, workers)
    return steps * num_envs / (time.perf_counter() - start)


def _pipe_step(n: int, counters: np.ndarray, commands: list[int], answers: int, workers: int) -> None:
    for fd in commands:
        os.write(fd, b"s")
    _read_exactly(answers, workers)


def _bell_step(n: int, counters: np.ndarray, bells: list[int], answers: int, workers: int) -> None:
    if n > 1:
        os.read(bells[2 + (n - 1) % 2], 1)  # every worker answered step n - 1: none polls that bell now
    os.write(bells[n % 2], b"b")
    _read_exactly(answers, workers)


def _spin_step(n: int, counters: np.ndarray, commands: list[int], answers: int, workers: int) -> None:
    counters[STEP, 0] = n
    done = counters[DONE, :workers]
    while done.min() < n:
        pass


def _read_exactly(fd: int, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = os.read(fd, size - len(data))
        if not chunk:
            raise RuntimeError("a worker died")
        data += chunk
    return data


def main() -> None:
    parser = ArgumentParser(prog="python benchmarks/ceiling.py", description=__doc__)
    parser.add_argument("--num_envs", type=int, nargs="+", default=[16, 64], help="env counts")
    parser.add_argument("--envs_per_worker", type=int, nargs="+", default=[1, 4], help="envs per worker process")
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES), help="what to measure")
    parser.add_argument("--steps", type=int, default=2000, help="timed lockstep steps per run")
    parser.add_argument("--seconds", type=float, default=2.0, help="length of a free run")
    parser.add_argument("--repeats", type=int, default=3, help="runs per figure; the best is kept")
    parser.add_argument("--json", default=None, help="write the figures here")
    args = parser.parse_args()
    load_before = os.getloadavg()
    results = []
    for num_envs in args.num_envs:
        for per_worker in args.envs_per_worker:
            for mode in args.modes:
                runs = [run(mode, num_envs, per_worker, args.steps, args.seconds) for _ in range(args.repeats)]
                results.append({"num_envs": num_envs, "envs_per_worker": per_worker, "mode": mode,
                                "env_steps_per_s": max(runs), "runs": runs})
                print(f"{num_envs:4d} envs, {per_worker} per worker, {mode:10s} {max(runs):10,.0f} env-steps/s "
                      f"(runs: {', '.join(f'{r:,.0f}' for r in runs)})", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"command": shlex.join(["python", *sys.argv]), "cpus": os.cpu_count(),
                       "load_average_1_5_15_min_before": load_before, "slot_bytes": slot_bytes(),
                       "results": results}, f, indent=1)


if __name__ == "__main__":
    run_main(main, "python benchmarks/ceiling.py")
