"""The worker process: serves a group of env instances, runs the main process's commands, writes
results into shared memory and answers each command with one reply frame.

Per instance the worker keeps the episode's state: whether its episode is over (so the next command
autoresets it), whether a reset was already done ahead (eager reset, a restart or a spare), and
whether a restart must be reported. It reports each env's episode end in its reply's records; the
main process never re-derives it.
"""

from __future__ import annotations

import os
import select
import signal
import time
from dataclasses import dataclass
from multiprocessing.reduction import ForkingPickler
from typing import Any

import numpy as np

from .backends.base import EnvGroup, failure
from .config import EnvConfig, VideoConfig
from .process import die_with_parent, release_boot_output
from .protocol import (
    AUTORESET,
    CALL,
    CLAIM,
    CLOSE,
    ENV,
    EPISODE_OVER,
    ERROR,
    EXEC_S,
    EXECUTED_ACTIONS,
    FAILED,
    FLAGS,
    HAS_PAYLOAD,
    HOLD,
    NOTICE,
    OBSERVE,
    OK,
    PAGE,
    RECORD_FIELDS,
    RESET,
    RESTARTED,
    RESULT,
    SLOT,
    SPARE,
    STEP,
    command_reader,
    send_reply,
)
from .shm import SharedBuffers
from .spec import observation_spec

REWARD, TERMINATED, TRUNCATED, EXECUTED = range(4)  # rows of a slot's `outcome` block (4, max_chunk)
EXEC, WRITE, RESET_TIME = range(3)  # columns of the per-instance seconds not yet reported
NO_RECORDS = np.zeros((0, len(RECORD_FIELDS)))


@dataclass(frozen=True)
class WorkerSpec:
    """Everything a worker needs, pickled once at spawn."""

    worker_index: int
    instances: tuple[int, ...]  # global instance numbers: they name and seed the simulators
    config: EnvConfig
    shm_name: str
    fields: list
    max_chunk: int
    chunk_obs: str
    rows: int  # slots per result page (num_envs)
    autoreset_mode: str
    eager_reset: bool
    display: Any
    cpu_affinity: tuple[int, ...] | None = None
    video: VideoConfig | None = None
    parent_pid: int = 0
    parent_is_main_thread: bool = True


class Delivery:
    """What one command delivers for m entries: flags and outcomes per entry, and payload pieces
    (info, error, final observation) for the entries that have any."""

    def __init__(self, m: int, width: int):
        self.flags = np.zeros(m, np.uint8)
        self.outcome = np.zeros((m, 4, width))  # a slot's whole block: columns past k are written as zeros
        self.no_observation = np.zeros(m, bool)  # its reset failed: nothing to observe
        self.extra: dict[int, dict[str, Any]] = {}

    def info(self, position: int) -> dict[str, Any]:
        return self.extra.setdefault(position, {}).setdefault("info", {})

    def error(self, position: int, error: tuple[str, str]) -> None:
        self.extra.setdefault(position, {})["error"] = error
        self.flags[position] |= ERROR


class Runner:
    """Runs the commands of one worker over its EnvGroup."""

    def __init__(self, group: EnvGroup, buffers: SharedBuffers, spec: WorkerSpec,
                 device_pages: list[dict[str, dict[str, Any]]] | None = None):
        """device_pages: per page, "obs" (and "chunk") arrays that the group keeps on its device,
        instead of the shared block's."""
        g = group.size
        self.group = group
        self.buffers = buffers
        self.spec = spec
        self.mode = spec.autoreset_mode
        self.max_steps = spec.config.max_episode_steps
        self.env = np.full(g, -1, np.int32)  # the env each instance serves (-1: a spare)
        self.over = np.ones(g, bool)  # the next command resets it (never started, or the episode ended)
        self.ready = np.zeros(g, bool)  # reset done ahead; its info waits in reset_infos
        self.notice = np.zeros(g, bool)  # restarted: report it with the next command
        self.reset_failed = np.zeros(g, bool)  # its last reset raised: retry when asked, not ahead
        self.elapsed = np.zeros(g, np.int64)
        self.reset_infos: list[Any] = [None] * g
        self.seconds = np.zeros((g, 3))
        self.actions = buffers.arrays["actions"]
        self.layout = observation_spec(spec.config)
        observations = device_pages or [
            {"obs": buffers.group(f"page{p}/obs"), "chunk": buffers.group(f"page{p}/chunk")} for p in (0, 1)]
        self.pages: list[dict[str, Any]] = [
            {"obs": observations[p]["obs"], "outcome": buffers.arrays[f"page{p}/outcome"],
             "env": buffers.arrays[f"page{p}/env"]}
            for p in (0, 1)
        ]
        # the observation after sub-step t of a chunk: one views dict per page and t, made once
        self.chunk_views = [
            [{key: view[:, t] for key, view in observations[p].get("chunk", {}).items()} for t in range(spec.max_chunk)]
            for p in (0, 1)
        ] if spec.chunk_obs == "all" else None
        self.recorders: dict[int, Any] = {}

    # ------------------------------------------------------------------ resets
    def _reset(self, local: np.ndarray, seeds: list, options: list) -> None:
        """Reset these instances now; their infos wait in reset_infos until delivered."""
        if not len(local):
            return
        start = time.perf_counter()
        infos = self.group.reset(local, seeds, options)
        self.seconds[local, RESET_TIME] += (time.perf_counter() - start) / len(local)
        for i, info in zip(local.tolist(), infos):
            self.reset_infos[i] = info
            self.reset_failed[i] = isinstance(info, tuple)
        self.elapsed[local] = 0
        self.ready[local] = True

    def reset_one_ahead(self) -> bool:
        """Eager reset: reset one instance whose episode is over. False when none is left."""
        waiting = np.flatnonzero(self.over & ~self.ready & ~self.reset_failed)
        if not len(waiting):
            return False
        self._reset(waiting[:1], [None], [None])
        return True

    def _take_reset(self, delivery: Delivery, position: int, i: int) -> None:
        """Deliver instance i's pending reset: its info, or its failure (the episode stays over)."""
        info = self.reset_infos[i]
        self.reset_infos[i] = None
        self.ready[i] = False
        if isinstance(info, tuple):
            delivery.error(position, info)
            delivery.flags[position] |= EPISODE_OVER
            delivery.no_observation[position] = True
            self.over[i] = True
        else:
            self.over[i] = False
            delivery.info(position).update(info or {})
            self._start_video(i)

    # ------------------------------------------------------------------ commands
    def step(self, page: int, k: int, entries: np.ndarray) -> tuple[np.ndarray, dict | None]:
        local, envs = entries["instance"], entries["env"]
        self.env[local] = envs
        m = len(local)
        d = Delivery(m, self.spec.max_chunk)
        special = self.notice[local] | self.over[local]
        if special.any():
            for position in np.flatnonzero(special).tolist():
                i = int(local[position])
                if self.notice[i]:
                    self._notify(d, position, i)
                    continue
                if not self.ready[i]:
                    self._reset(local[position:position + 1], [None], [None])
                d.flags[position] |= AUTORESET
                d.info(position)["autoreset"] = True
                self._take_reset(d, position, i)
            running = np.flatnonzero(~special)
        else:
            running = np.arange(m)
        # claim slots after stepping, so a slow env holds no slot while it steps; but sub-step
        # observations (chunk_obs="all") need their slots from the first sub-step
        slots, pages = self._slots(page, entries) if self.chunk_views is not None else (None, page)
        self._run(d, local, envs, k, running, slots, pages)
        if slots is None:
            slots, pages = self._slots(page, entries)
        return self._deliver(d, entries, slots, pages, k)

    def _notify(self, d: Delivery, position: int, i: int) -> None:
        """A restart replaced the command in flight: the episode was cut (truncated), the instance
        already started a new one. With next-step autoreset the next command is a free autoreset."""
        self.notice[i] = False
        d.flags[position] |= RESTARTED
        d.outcome[position, TRUNCATED, 0] = 1.0
        info = self.reset_infos[i]
        self.reset_infos[i] = {} if self.mode == "next_step" else None
        if isinstance(info, tuple):
            d.error(position, info)
        elif info:
            d.info(position).update(info)
        if self.mode == "same_step":
            self.over[i], self.ready[i] = False, False
        else:
            d.flags[position] |= EPISODE_OVER
            self.over[i] = True

    def _run(self, d: Delivery, local: np.ndarray, envs: np.ndarray, k: int, active: np.ndarray,
             slots: np.ndarray | None, pages: Any) -> None:
        """Up to k actions for the entries at `active`, each stopping at its episode's end."""
        for t in range(k):
            if not len(active):
                return
            i = local[active]
            result = self.group.step(i, self.actions[envs[active], t])
            self.seconds[i, EXEC] += result.seconds / len(i)
            self.elapsed[i] += 1
            terminated = result.terminated.astype(bool)
            truncated = (self.elapsed[i] >= self.max_steps) & ~terminated
            if result.truncated is not None:
                truncated |= result.truncated.astype(bool) & ~terminated
            ended = terminated | truncated
            for j, error in result.errors.items():
                d.error(int(active[j]), error)
                terminated[j], ended[j] = False, True  # not the task's termination: the episode is simply over
            d.outcome[active, REWARD, t] = result.reward
            d.outcome[active, TERMINATED, t] = terminated
            d.outcome[active, TRUNCATED, t] = truncated
            d.outcome[active, EXECUTED, t] = 1.0
            for j, info in result.infos.items():
                d.info(int(active[j])).update(info)
            self._capture(i)
            if slots is not None:
                for j, error in self._observe(i, slots[active], pages if np.isscalar(pages) else pages[active],
                                              t).items():
                    d.error(int(active[j]), error)
            if ended.any():
                self._end(d, active[ended], local[active[ended]])
            active = active[~ended]

    def _end(self, d: Delivery, positions: np.ndarray, local: np.ndarray) -> None:
        if self.mode != "same_step":
            d.flags[positions] |= EPISODE_OVER
            self.over[local], self.ready[local] = True, False
            return
        # same-step autoreset: the final observation goes into the info, the slot gets the new episode's
        final = [{key: np.empty(s.shape, s.dtype) for key, s in self.layout.items()} for _ in range(len(local))]
        for i, out in zip(local.tolist(), final):
            self.group.write_one(i, out)
        self._reset(local, [None] * len(local), [None] * len(local))
        for j, (position, i) in enumerate(zip(positions.tolist(), local.tolist())):
            final_info = d.extra.get(position, {}).pop("info", {})
            self._take_reset(d, position, i)
            d.info(position).update(final_obs=final[j], final_info=final_info)

    def _slots(self, page: int, entries: np.ndarray) -> tuple[np.ndarray, Any]:
        """Each entry's slot and page: its fixed destination, or a claimed slot of the filling page.
        The page is one int when every entry's is the same (the usual case), else an array."""
        dest = entries["dest"]
        claims = np.flatnonzero(dest == CLAIM)
        if not len(claims):
            return dest, page
        claimed_page, first = self.buffers.claim(entries["env"][claims])
        slots = dest.copy()
        slots[claims] = first + np.arange(len(claims))
        if len(claims) == len(dest) or claimed_page == page:
            return slots, claimed_page
        pages = np.full(len(dest), page)
        pages[claims] = claimed_page
        return slots, pages

    @staticmethod
    def _by_page(pages: Any, wanted: np.ndarray) -> list[tuple[int, np.ndarray]]:
        """The positions in `wanted` (indices) grouped by their page."""
        if isinstance(pages, (int, np.integer)):
            return [(int(pages), wanted)] if len(wanted) else []
        return [(p, wanted[pages[wanted] == p]) for p in (0, 1) if (pages[wanted] == p).any()]

    def _observe(self, local: np.ndarray, slots: np.ndarray, pages: Any,
                 t: int | None = None) -> dict[int, tuple[str, str]]:
        """Observations into their slots: the result's, or (t) a chunk's sub-step t. Returns the
        failures by position."""
        start = time.perf_counter()
        errors: dict[int, tuple[str, str]] = {}
        for p, on in self._by_page(pages, np.arange(len(local))):
            views = self.pages[p]["obs"] if t is None or self.chunk_views is None else self.chunk_views[p][t]
            errors.update({int(on[j]): e for j, e in self.group.observe(local[on], views, slots[on]).items()})
        self.seconds[local, WRITE] += (time.perf_counter() - start) / max(1, len(local))
        return errors

    def _deliver(self, d: Delivery, entries: np.ndarray, slots: np.ndarray, pages: Any,
                 k: int) -> tuple[np.ndarray, dict | None]:
        """Write outcomes and observations of the entries with a destination; build the records."""
        local, envs = entries["instance"], entries["env"]
        held = entries["dest"] == HOLD
        delivered: Any = True if not held.any() else ~held
        wanted = np.arange(len(local)) if delivered is True else np.flatnonzero(delivered)
        for p, on in self._by_page(pages, wanted):
            page = self.pages[p]
            page["env"][slots[on]] = envs[on]
            page["outcome"][slots[on]] = d.outcome[on]
        # an env whose reset failed has no observation to write: its slot is left alone
        seen = wanted[~d.no_observation[wanted]] if d.no_observation.any() else wanted
        if len(seen):
            for j, error in self._observe(
                local[seen], slots[seen], pages if np.isscalar(pages) else pages[seen]
            ).items():
                d.error(int(seen[j]), error)
                d.flags[seen[j]] |= EPISODE_OVER
                self.over[local[seen[j]]] = True
        if d.extra:
            d.flags[list(d.extra)] |= HAS_PAYLOAD
        records = np.empty((len(local), len(RECORD_FIELDS)))
        records[:, ENV] = envs
        records[:, SLOT] = slots if delivered is True else np.where(delivered, slots, -1)
        records[:, PAGE] = pages
        records[:, FLAGS] = d.flags
        records[:, EXECUTED_ACTIONS] = d.outcome[:, EXECUTED].sum(axis=1)
        records[:, EXEC_S:] = self.seconds[local]
        self.seconds[local] = 0.0
        return records, {int(envs[p]): extra for p, extra in d.extra.items()} or None

    def reset(self, page: int, entries: np.ndarray, payload: tuple) -> tuple[np.ndarray, dict | None]:
        """payload: (seeds, options, kinds), one each per entry (see protocol's reset kinds)."""
        seeds, options, kinds = payload
        kinds = np.asarray(kinds)
        local, envs = entries["instance"], entries["env"]
        self.env[local] = np.where(kinds == SPARE, -1, envs)
        # a reset done ahead (eager, after a restart) serves a reset that asks for no seed or options
        done_ahead = self.ready[local] & np.array([s is None and not o for s, o in zip(seeds, options)], bool)
        again = np.flatnonzero((kinds != OBSERVE) & ~(done_ahead & (kinds == RESULT)))
        self._reset(local[again], [seeds[j] for j in again], [options[j] for j in again])
        d = Delivery(len(local), self.spec.max_chunk)
        for position, (i, kind) in enumerate(zip(local.tolist(), kinds.tolist())):
            if kind == OBSERVE:  # the episode goes on as it was
                d.flags[position] |= EPISODE_OVER if self.over[i] else 0
                continue
            if kind == NOTICE:
                self._notify(d, position, i)
            elif entries["dest"][position] == HOLD or kind == SPARE:
                self.over[i], self.notice[i] = True, kind != SPARE  # the reset waits for the env's next command
                if isinstance(self.reset_infos[i], tuple):
                    d.error(position, self.reset_infos[i])
            else:
                if self.notice[i]:
                    self.notice[i] = False
                    d.flags[position] |= RESTARTED
                self._take_reset(d, position, i)
        slots, pages = self._slots(page, entries)
        return self._deliver(d, entries, slots, pages, 1)

    def call(self, entries: np.ndarray, payload: tuple) -> tuple[np.ndarray, dict | None]:
        name, args, kwargs, ends_episode = payload
        results: dict[int, Any] = {}
        flags = np.full(len(entries), HAS_PAYLOAD, np.uint8)
        for position, (i, env) in enumerate(zip(entries["instance"].tolist(), entries["env"].tolist())):
            try:
                results[env] = {"result": self.group.call(i, name, args, kwargs)}
            except Exception as error:
                results[env] = {"error": failure(error)}
                flags[position] |= ERROR
            if ends_episode:  # the env resets at its next command (or ahead of it)
                self.over[i], self.ready[i] = True, False
        zeros = np.zeros(len(entries))
        return np.column_stack([entries["env"], zeros - 1, zeros, flags, zeros, zeros, zeros, zeros]), results

    # ------------------------------------------------------------------ video
    def _recorder(self, i: int):
        video, env = self.spec.video, int(self.env[i])
        if video is None or env < 0 or not video.records(env):
            return None
        recorder = self.recorders.get(env)
        if recorder is None:
            from .video import VideoRecorder

            recorder = self.recorders[env] = VideoRecorder(video, env)
        return recorder

    def _start_video(self, i: int) -> None:
        recorder = self._recorder(i)
        if recorder is not None:
            recorder.start_episode()
            recorder.capture(lambda camera: self.group.render_rgb(i, camera))

    def _capture(self, local: np.ndarray) -> None:
        if self.spec.video is None:
            return
        for i in local.tolist():
            recorder = self._recorder(i)
            if recorder is not None:
                recorder.capture(lambda camera, i=i: self.group.render_rgb(i, camera))

    def close(self) -> None:
        for recorder in self.recorders.values():
            recorder.close()
        self.group.close()


def serve(fd: int, runner: Runner) -> None:
    """Answer commands until CLOSE or until the main process hangs up. Between commands, reset the
    instances whose episode ended (eager reset), one at a time, while no command waits."""
    reader = command_reader(fd)
    eager = runner.spec.eager_reset and runner.mode == "next_step"
    while True:
        try:
            (command, page, k, seq), entries, payload = reader.read()
        except (EOFError, OSError):
            return
        if command == CLOSE:
            send_reply(fd, seq, OK, NO_RECORDS)
            return
        try:
            if command == STEP:
                records, out = runner.step(page, k, entries)
            elif command == RESET:
                records, out = runner.reset(page, entries, payload)
            elif command == CALL:
                records, out = runner.call(entries, payload)
            else:
                raise ValueError(f"unexpected command {command!r}")
            send_reply(fd, seq, OK, records, out)
        except Exception as error:  # a fault of the worker itself: the main process replaces it
            send_reply(fd, seq, FAILED, NO_RECORDS, failure(error))
        while eager and not reader.pending() and not select.select([fd], [], [], 0)[0]:
            if not runner.reset_one_ahead():
                break


def worker_main(spec: WorkerSpec, conn) -> None:
    """Entry point of a spawned worker process."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the main process's to handle
    from .backends import backend_class

    display = runner = device_pages = None
    group: EnvGroup | None = None
    fd = conn.fileno()
    die_with_parent(spec.parent_pid, spec.parent_is_main_thread, lambda: display is None or display.alive())
    try:
        # Simulators are throughput work: SCHED_BATCH stops a worker woken by a command from
        # preempting the main process while it is still sending the rest of the batch.
        if hasattr(os, "SCHED_BATCH"):
            os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
        if spec.cpu_affinity:
            os.sched_setaffinity(0, spec.cpu_affinity)
        backend_type = backend_class(spec.config.backend)
        if backend_type.needs_display(spec.config) or spec.display is not None:
            from .display import open_display

            # exports DISPLAY, XAUTHORITY and the GLX vendor library for the simulator about to load
            display = open_display(spec.display, backend_type.needs_display(spec.config), spec.worker_index)
        buffers = SharedBuffers.attach(spec.shm_name, spec.fields)
        group = backend_type.make_group(spec.config, spec.instances)
        device_pages = group.device_pages(observation_spec(spec.config), spec.rows, spec.max_chunk,
                                          spec.chunk_obs == "all")
        runner = Runner(group, buffers, spec, device_pages)
    except Exception as error:
        send_reply(fd, 0, FAILED, NO_RECORDS, failure(error))
        _shutdown(group, display)
        return
    facts = _facts(display)
    if device_pages is not None:  # shared once with the main process (CUDA IPC for torch tensors)
        facts["pages"] = [{part: dict(views) for part, views in page.items()} for page in device_pages]
    send_reply(fd, 0, OK, NO_RECORDS, facts, bytes(ForkingPickler.dumps(facts)) if device_pages is not None else None)
    release_boot_output()
    try:
        serve(fd, runner)
    finally:
        _shutdown(runner, display)


def _facts(display) -> dict[str, Any]:
    facts: dict[str, Any] = {"pid": os.getpid()}
    if display is not None:
        facts.update(display.facts())
    return facts


def _shutdown(*resources) -> None:
    """Close in order: the runner (recorders flush their files, then the simulators), then the display."""
    for resource in resources:
        if resource is not None:
            try:
                resource.close()
            except Exception:
                import traceback

                traceback.print_exc()

