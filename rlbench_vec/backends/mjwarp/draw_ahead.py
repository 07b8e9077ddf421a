"""Episode draws off the critical path (backend_options={"draw_ahead": N}): N host processes draw each world's
next episode while the worlds step, so a reset costs the upload only.

A draw is a function of the world's generator state and the reset's options alone (the mujoco backend's
`Simulation.reset` from its home state), so a process of its own, with its own host copy of the task, draws the
same episode as the worker would in place. Only the next episode of a reset without a seed and without options is
drawn ahead (an RL run's autoresets); each draw ahead records the generator state it started from and is used
only when the world's generator is still in that state, else dropped and drawn in place: so the episodes are the
same as without draw_ahead, whatever the order of resets and seeds (tests/test_mjwarp_draw_ahead.py).

The processes are the worker's children, started as `python -m` of this module (no fork of a process that holds a
GPU context; the worker is a daemon, which multiprocessing does not let have children), each with the mujoco
backend's task without cameras, taking pickled requests on stdin and answering on stdout; they exit when the worker
closes them or dies (a watchdog on their parent).
"""

from __future__ import annotations

import itertools
import os
import pickle
import subprocess
import sys
import weakref
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from ...config import EnvConfig
from ...wire.process import die_with_parent

FIELDS = ("qpos", "ctrl", "mocap_pos", "mocap_quat", "geom_rgba")  # an episode start, as EpisodeStarts keeps it


def draw_episode(host: Any, config: EnvConfig, state: Mapping[str, Any]) -> tuple[Mapping[str, Any], int, dict]:
    """The episode a world whose generator is in `state` draws on a reset without seed and options, on `host`
    (the mujoco backend's Simulation of the task): the generator's state after it, the variation, the start's
    arrays (FIELDS)."""
    from ..mujoco.backend import choose_variation, task_class

    rng = np.random.default_rng()
    rng.bit_generator.state = state
    variation = choose_variation(task_class(config), config, None, rng)
    host.reset(variation, rng)
    data, model = host.data, host.model
    start = {"qpos": data.qpos.copy(), "ctrl": data.ctrl.copy(), "mocap_pos": data.mocap_pos.copy(),
             "mocap_quat": data.mocap_quat.copy(), "geom_rgba": model.geom_rgba.copy()}
    return rng.bit_generator.state, variation, start


def serve(parent: int) -> None:
    """A draw process: the config, then (key, state) requests on stdin, each answered (key, draw) on stdout."""
    die_with_parent(parent, parent_is_main_thread=False)
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # whatever a library prints goes to stderr, not into the replies
    requests = sys.stdin.buffer
    config = pickle.load(requests)
    from ..mujoco.simulation import Simulation  # MUJOCO_GL=disable: these processes never render

    host = Simulation(replace(config, cameras=(), video_cameras=()))
    while True:
        try:
            key, state = pickle.load(requests)
        except EOFError:
            return
        pickle.dump((key, draw_episode(host, config, state)), replies)
        replies.flush()


class DrawProcess:
    """One draw process; its replies come in the order of its requests, kept until asked for."""

    def __init__(self, config: EnvConfig):
        self.process = subprocess.Popen([sys.executable, "-m", __spec__.name if __spec__ else __name__,
                                         str(os.getpid())], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        env={**os.environ, "MUJOCO_GL": "disable"})
        self.live: set[int] = set()  # keys still wanted
        self.replies: dict[int, Any] = {}
        self.send(config)

    def send(self, message: Any) -> None:
        assert self.process.stdin is not None
        pickle.dump(message, self.process.stdin)
        self.process.stdin.flush()

    def request(self, key: int, state: Mapping[str, Any]) -> None:
        self.live.add(key)
        self.send((key, state))

    def reply(self, key: int) -> Any:
        assert self.process.stdout is not None
        while key not in self.replies:
            found, value = pickle.load(self.process.stdout)
            if found in self.live:
                self.replies[found] = value
        self.live.discard(key)
        return self.replies.pop(key)

    def forget(self, key: int) -> None:
        self.live.discard(key)
        self.replies.pop(key, None)

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class DrawAhead:
    """`processes` draw processes for one simulator's worlds; `take(world, rng)` answers a world's reset without
    seed and options from its draw ahead when there is a valid one, `submit(world, rng)` starts the next."""

    def __init__(self, config: EnvConfig, processes: int):
        self.config = config
        self.processes = [DrawProcess(config) for _ in range(processes)]
        self.keys = itertools.count()
        # world -> (the generator state its draw starts from, the process drawing it, the request's key)
        self.pending: dict[int, tuple[Mapping[str, Any], DrawProcess, int]] = {}
        weakref.finalize(self, DrawAhead._close, self.processes)

    def submit(self, world: int, rng: np.random.Generator) -> None:
        self.drop(world)
        key = next(self.keys)
        process = self.processes[key % len(self.processes)]
        state = rng.bit_generator.state
        process.request(key, state)
        self.pending[world] = (state, process, key)

    def take(self, world: int, rng: np.random.Generator) -> tuple[int, dict[str, np.ndarray]] | None:
        """The world's drawn-ahead (variation, start), its generator moved past the draw; None where there is
        none for the generator's current state (then draw in place)."""
        found = self.pending.get(world)
        if found is None or found[0] != rng.bit_generator.state:
            self.drop(world)
            return None
        del self.pending[world]
        state, variation, start = found[1].reply(found[2])
        rng.bit_generator.state = state
        return variation, start

    def drop(self, world: int) -> None:
        """A reset with a seed or options: the world's draw ahead no longer applies."""
        found = self.pending.pop(world, None)
        if found is not None:
            found[1].forget(found[2])

    def close(self) -> None:
        DrawAhead._close(self.processes)

    @staticmethod
    def _close(processes: list[DrawProcess]) -> None:
        for process in processes:
            process.close()


def spare_cores() -> int:
    """The cores of this process's affinity beyond the worker's own: draw_ahead="auto"."""
    return max(1, len(os.sched_getaffinity(0)) - 1)


if __name__ == "__main__":
    serve(int(sys.argv[1]))
