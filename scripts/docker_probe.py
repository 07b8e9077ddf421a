"""Run by scripts/docker_check.sh inside the embedded image, as the container's program (every other process but
PID 1 is the env's or, with `leftovers`, its caller's). Prints one line; exit status 1 on a failure.

    python docker_probe.py worker_kill  # a worker killed with SIGKILL is restarted, and neither a zombie nor its
                                        # Xvfb is left once PID 1 (tini) reaps the orphaned Xvfb; closing the env
                                        # then leaves no process, X socket or shared-memory segment
    python docker_probe.py leftovers    # after a command ended: no process (but the caller), X socket or segment
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable

from rlbench_vec import RLBenchVectorEnv

WORKERS = 2
SETTLE_S = 10.0  # a killed worker's Xvfb gets its parent-death SIGKILL, then PID 1 reaps it


def processes() -> dict[int, tuple[str, str, int]]:
    """pid -> (name, state, parent pid) of every process but PID 1, this one, its caller and its multiprocessing
    resource tracker (Python's own, which ends with this interpreter)."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in (1, os.getpid(), os.getppid()):
            continue
        try:
            with open(f"/proc/{entry}/stat") as file:
                stat = file.read()
            with open(f"/proc/{entry}/cmdline", "rb") as file:
                if b"multiprocessing.resource_tracker" in file.read():
                    continue
        except FileNotFoundError:
            continue  # ended while listed
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        state, parent = stat[stat.rindex(")") + 2:].split()[:2]
        found[int(entry)] = (name, state, int(parent))
    return found


def leftovers() -> list[str]:
    """What the env would have left: processes (zombies too), X sockets, shared-memory segments."""
    found = [f"{name} (pid {pid}, state {state})" for pid, (name, state, _) in processes().items()]
    found += [f"X socket {name}" for name in os.listdir("/tmp/.X11-unix")] if os.path.isdir("/tmp/.X11-unix") else []
    return found + [f"/dev/shm/{name}" for name in os.listdir("/dev/shm") if name.startswith("rlbv")]


def settled(condition: Callable[[], bool]) -> bool:
    deadline = time.monotonic() + SETTLE_S
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def worker_kill() -> int:
    env = RLBenchVectorEnv(num_envs=WORKERS, envs_per_worker=1, backend="mujoco", renderer="glfw",
                           cameras=("front",), image_size=(64, 64), seed=0)
    with env:
        env.reset(seed=0)
        env.step(env.action_space.sample())
        victim = env.worker_pids[0]
        xvfb = [pid for pid, (name, _, parent) in processes().items() if name == "Xvfb" and parent == victim]
        os.kill(victim, signal.SIGKILL)
        for _ in range(3):
            env.step(env.action_space.sample())
        restarts = int(env.stats()["restarts"].sum())

        def clean() -> bool:
            listed = processes()
            return (not any(state == "Z" for _, state, _ in listed.values())
                    and not any(pid in listed for pid in xvfb)
                    and sum(name == "Xvfb" for name, _, _ in listed.values()) == WORKERS)
        reaped = settled(clean)
        during = sorted(f"{name} {pid} {state} (parent {parent})" for pid, (name, state, parent) in processes().items())
    closed = settled(lambda: not leftovers())
    ok = restarts == 1 and len(xvfb) == 1 and reaped and closed
    print(f"worker kill: {'ok' if ok else 'FAILED'}: worker {victim} (its Xvfb {xvfb}) killed, restarts {restarts}; "
          f"{'no zombie, its Xvfb gone' if reaped else 'after ' + str(SETTLE_S) + ' s: ' + ', '.join(during)}; "
          f"after close {'nothing left' if closed else 'left: ' + ', '.join(leftovers())}")
    return 0 if ok else 1


def no_leftovers() -> int:
    left = leftovers()
    print(f"leftovers: {'none' if not left else ', '.join(left)}")
    return 1 if left else 0


if __name__ == "__main__":
    probes = {"worker_kill": worker_kill, "leftovers": no_leftovers}
    if len(sys.argv) != 2 or sys.argv[1] not in probes:
        sys.exit(f"usage: python docker_probe.py {{{','.join(probes)}}}")
    sys.exit(probes[sys.argv[1]]())
