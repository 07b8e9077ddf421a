"""PufferLib's side of benchmarks/peers.py, run by it in PufferLib's own interpreter (PufferLib 2.0.2
pins numpy 1.23 and gymnasium<=0.29, so it lives in a separate venv; docs/engine.md says how to make
it). Steps peer_env.PeerEnv, wrapped by PufferLib's GymnasiumPufferEnv as PufferLib does for any
gymnasium env, and writes {"versions": ..., "results": {system: {setting: [[env_steps, seconds], ...]}},
"layouts": {system: its workers and batch size}}, one [env_steps, seconds] per timed run.

Systems (PufferLib's own layout: one worker process per physical core, or at most the request's
"workers"; envs_per_worker = num_envs / workers; its default fork start):
  pufferlib sync      vector.Multiprocessing, batch_size=num_envs: every recv waits for all envs
  pufferlib async     vector.Multiprocessing, batch_size=num_envs/2: recv returns the first ready
                      contiguous half (its zero-copy path), like rlbench_vec's recv(min_envs=N/2)
  pufferlib serial    vector.Serial: every env in this one process

Exit status 3 with one line on stderr when PufferLib cannot be imported here.

    python benchmarks/peers_puffer.py --request '{"num_envs": 8, "systems": ["pufferlib sync"],
        "settings": {"0 ms": {"options": {}, "steps": 16}}}' --json /tmp/puffer.json
"""

from __future__ import annotations

import functools
import json
import platform
import sys
import time
from typing import Any

import gymnasium
import numpy as np
import psutil
from peer_env import ACTION_SIZE, PeerEnv

from rlbench_vec.cli import ArgumentParser, run_main

try:  # a missing or broken PufferLib is reported, not raised: peers.py then skips its systems
    import pufferlib
    import pufferlib.emulation
    import pufferlib.vector
except ImportError as error:
    IMPORT_ERROR: ImportError | None = error
else:
    IMPORT_ERROR = None

NOT_IMPORTABLE = 3
WARMUP_STEPS = 16  # untimed actions per env before each timing, in every system (peers.py imports it)
SYSTEMS = ("pufferlib sync", "pufferlib async", "pufferlib serial")


def puffer_env(index: int, options: dict[str, Any]):
    return pufferlib.emulation.GymnasiumPufferEnv(env=PeerEnv(index, options))


def workers_for(n: int, most: int) -> int:
    """The most workers <= `most` (0: physical cores, PufferLib's advice of one worker per core) dividing n."""
    most = most or psutil.cpu_count(logical=False) or 1
    return max(w for w in range(1, min(n, most) + 1) if n % w == 0)


def build(system: str, n: int, options: dict[str, Any], most_workers: int):
    creators = [functools.partial(puffer_env, i, options) for i in range(n)]
    lists = {"env_args": [[] for _ in range(n)], "env_kwargs": [{} for _ in range(n)], "num_envs": n}
    if system == "pufferlib serial":
        return pufferlib.vector.make(creators, backend=pufferlib.vector.Serial, **lists)
    workers = workers_for(n, most_workers)
    per_worker = n // workers
    batch = n // 2 if system == "pufferlib async" and (n // 2) % per_worker == 0 and n > 1 else n
    return pufferlib.vector.make(creators, backend=pufferlib.vector.Multiprocessing, **lists,
                                 num_workers=workers, batch_size=batch)


def time_pufferlib(vecenv, n: int, steps: int) -> tuple[int, float]:
    """Send/recv until each env averaged `steps` actions sent; count the actions whose results came back
    in that time. A send to an env that ended its episode only resets it (next-step autoreset): not counted."""
    pending = np.zeros(n, bool)  # per env: the action in flight executes (the env was not done)

    def round_trip(ids: np.ndarray, done: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        pending[ids] = ~done
        vecenv.send(np.zeros((len(ids), ACTION_SIZE), np.float32))
        _, _, terminated, truncated, _, ids, _ = vecenv.recv()
        return ids, terminated | truncated, int(np.count_nonzero(pending[ids]))

    vecenv.async_reset(seed=0)
    _, _, terminated, truncated, _, ids, _ = vecenv.recv()
    done = terminated | truncated
    warm = 0
    while warm < WARMUP_STEPS * n:  # not timed, as long as every peer's warm-up (peers.py)
        warm += len(ids)
        ids, done, _ = round_trip(ids, done)
    if len(ids) == n:  # nothing in flight (full batches): the timing starts at fresh episodes, as every peer's
        vecenv.async_reset(seed=0)
        _, _, terminated, truncated, _, ids, _ = vecenv.recv()
        done = terminated | truncated
    # Half batches go on: PufferLib takes no recv without a send, so the half in flight cannot be drained
    # before a reset (a reset under it mixes its result into the count). Its results are counted at the
    # start, as the last half sent is not at the end.
    executed, sent, start = 0, 0, time.perf_counter()
    while sent < steps * n:
        sent += len(ids)
        ids, done, count = round_trip(ids, done)
        executed += count
    return executed, time.perf_counter() - start


def layout(vecenv) -> str:
    if isinstance(vecenv, pufferlib.vector.Serial):
        return f"{vecenv.num_envs} envs in the main process"
    return (f"{vecenv.num_workers} workers x {vecenv.envs_per_worker} envs, "
            f"batch_size {vecenv.agents_per_batch}")


def versions() -> dict[str, Any]:
    return {"pufferlib": pufferlib.__version__, "numpy": np.__version__, "gymnasium": gymnasium.__version__,
            "python": platform.python_version(), "executable": sys.executable,
            "cython_extensions": pufferlib.emulation.emulate.__module__ == "pufferlib.extensions"}


def main() -> int:
    parser = ArgumentParser(description=__doc__)
    parser.add_argument("--request", required=True,
                        help="JSON: num_envs, workers, repeats, systems, settings {name: {options, steps}}")
    parser.add_argument("--json", required=True, help="where to write the versions and results")
    args = parser.parse_args()
    request = json.loads(args.request)
    if IMPORT_ERROR is not None:
        print(f"pufferlib is not importable by {sys.executable}: {IMPORT_ERROR}", file=sys.stderr)
        return NOT_IMPORTABLE
    report: dict[str, Any] = {"versions": versions(), "results": {}, "layouts": {}}
    n = request["num_envs"]
    for system in request["systems"]:
        if system not in SYSTEMS:
            parser.error(f"unknown system {system!r}; choose from {', '.join(SYSTEMS)}")
        timings = report["results"][system] = {}
        for name, setting in request["settings"].items():
            vecenv = build(system, n, setting["options"], request.get("workers", 0))
            report["layouts"][system] = layout(vecenv)
            try:
                timings[name] = [time_pufferlib(vecenv, n, setting["steps"]) for _ in range(request.get("repeats", 1))]
            finally:
                vecenv.close()
    with open(args.json, "w") as file:
        json.dump(report, file)
    return 0


if __name__ == "__main__":
    run_main(main, "python benchmarks/peers_puffer.py")
