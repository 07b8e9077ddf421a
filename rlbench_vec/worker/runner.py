"""A worker's commands over its EnvGroup: steps (with autoreset), resets and calls, each answered by
one reply.

Per instance the runner keeps the episode's state in plain Python lists (a command touches a few
instances, and per-element numpy costs more than the work): whether its episode is over (so the
next command autoresets it), whether a reset was already done ahead (eager reset, a restart or a
spare), and whether a restart must be reported. The simulators are called once per command for all
its instances (`EnvGroup.step`, `EnvGroup.observe`), and outcomes reach the page in one copy.

A step whose instances all ran their k actions with nothing to report gets a *plain* reply: no
records, no payload (see protocol). Anything else (an episode end, an autoreset, an error, an info,
a restart) is reported per env in the reply's records, with the worker's word on the episode. The
usual step (one action each, nothing to autoreset) checks its outcomes for that right after the
group's step, and a plain one is only written (`Writer.deliver_plain`); any other goes the general
way, with the step already run.
"""

from __future__ import annotations

import collections
import time
from typing import Any

import numpy as np

from ..backends.base import EnvGroup, GroupStep, failure
from ..spec import observation_spec
from ..wire.protocol import (
    AUTORESET,
    CLAIM,
    EPISODE_OVER,
    ERROR,
    HAS_PAYLOAD,
    HOLD,
    NOTICE,
    OBSERVE,
    RECORD_FIELDS,
    RESTARTED,
    RESULT,
    SPARE,
    WorkerSpec,
)
from ..wire.shm import SharedBuffers
from .delivery import EXECUTED, REWARD, TERMINATED, TRUNCATED, Delivery, Placement, Reply, Route, Writer


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
        self.next_step = spec.autoreset_mode == "next_step"
        self.same_step = spec.autoreset_mode == "same_step"
        self.max_steps = spec.config.max_episode_steps
        self.env = [-1] * g  # the env each instance serves (-1: a spare)
        self.over = [True] * g  # the next command resets it (never started, or the episode ended)
        self.ready = [False] * g  # reset done ahead; its info waits in reset_infos
        self.notice = [False] * g  # restarted: report it with the next command
        self.reset_failed = [False] * g  # its last reset raised: retry when asked, not ahead
        self.elapsed = [0] * g
        self.reset_infos: list[Any] = [None] * g
        self.reset_s = [0.0] * g  # reset seconds not yet reported
        self.ahead: collections.deque[int] = collections.deque()  # episodes ended: reset ahead (eager)
        self.actions = buffers.arrays["actions"]
        self.layout = observation_spec(spec.config)
        self.out = Writer(group, buffers, spec.max_chunk, spec.chunk_obs == "all", device_pages, self._end_episode)
        self.block = self.out.block  # outcomes of a command, by entry position
        self.lean = self.out.chunk_views is None and spec.video is None  # a plain step needs only deliver_plain
        self.recorders: dict[int, Any] = {}

    # ------------------------------------------------------------------ resets
    def _reset(self, local: list[int], seeds: list, options: list) -> None:
        """Reset these instances now; their infos wait in reset_infos until delivered."""
        if not local:
            return
        start = time.perf_counter()
        infos = self.group.reset(np.array(local), seeds, options)
        share = (time.perf_counter() - start) / len(local)
        for i, info in zip(local, infos):
            self.reset_s[i] += share
            self.reset_infos[i] = info
            self.reset_failed[i] = isinstance(info, tuple)
            self.elapsed[i] = 0
            self.ready[i] = True

    def _end_episode(self, i: int) -> None:
        """Instance i's episode is over: the next command resets it, or it is reset ahead."""
        self.over[i], self.ready[i] = True, False
        self.ahead.append(i)

    def reset_one_ahead(self) -> bool:
        """Eager reset: reset one instance whose episode is over. False when none is left."""
        while self.ahead:
            i = self.ahead.popleft()
            if self.over[i] and not self.ready[i] and not self.reset_failed[i]:
                self._reset([i], [None], [None])
                return True
        return False

    def _take_reset(self, d: Delivery, position: int, i: int) -> None:
        """Deliver instance i's pending reset: its info, or its failure (the episode stays over)."""
        info = self.reset_infos[i]
        self.reset_infos[i] = None
        self.ready[i] = False
        if isinstance(info, tuple):
            d.error(position, info)
            d.flag(position, EPISODE_OVER)
            d.blind.add(position)
            self.over[i] = True
        else:
            self.over[i] = False
            d.info(position).update(info or {})
            self._start_video(i)

    # ------------------------------------------------------------------ steps
    def step(self, page: int, k: int, entries: np.ndarray) -> Reply:
        """k actions for each entry (autoresetting those whose episode is over). Returns the records
        (none: a plain reply), the payload and the plain reply's (page, first slot, exec s, write s)."""
        route = self.out.route(entries)
        local = route.local
        over, notice = self.over, self.notice
        special = any(over[i] or notice[i] for i in local)
        first = None
        if k == 1 and not special and self.lean and route.whole:
            # the usual step: its reply is plain unless an outcome has something to report
            first = self._step(route, route.positions, 0)
            if self._plain(first, local):
                for i in local:
                    self.elapsed[i] += 1
                return self.out.deliver_plain(page, route, first.reward, first.seconds, self.reset_s)
        m = len(local)
        d = Delivery(m)
        if k > 1 or special:
            self.block[:m, :, :k] = 0.0  # actions an entry does not run read as zeros
        active = self._autoreset(d, self.block, local, route.envs) if special else route.positions
        # claim slots after stepping, so a slow env holds no slot while it steps; but sub-step
        # observations (chunk_obs="all") need their slots from the first sub-step
        placed = self.out.place(page, route) if self.out.chunk_views is not None else None
        self._run(d, route, k, active, placed, first)
        if placed is None:
            placed = self.out.place(page, route)
        return self.out.deliver(d, route, placed, k, self.reset_s)

    def _plain(self, result: GroupStep, local: list[int]) -> bool:
        """One action each with nothing to report: no error, info or episode end, no step limit reached."""
        elapsed, last = self.elapsed, self.max_steps - 1
        return not (result.errors or result.infos or any(result.terminated.tolist())
                    or (result.truncated is not None and any(result.truncated.tolist()))
                    or any(elapsed[i] >= last for i in local))

    def _autoreset(self, d: Delivery, block: np.ndarray, local: list[int], envs: list[int]) -> list[int]:
        """Autoreset the entries whose episode is over, answer those a restart replaced; returns the
        positions of the entries that act."""
        over, notice, m = self.over, self.notice, len(local)
        special = [p for p in range(m) if over[local[p]] or notice[local[p]]]
        for p in special:
            i = local[p]
            self.env[i] = envs[p]
            if notice[i]:
                self._notify(d, block, p, i)
                continue
            if not self.ready[i]:
                self._reset([i], [None], [None])
            d.flag(p, AUTORESET)
            d.info(p)["autoreset"] = True
            self._take_reset(d, p, i)
        return [p for p in range(m) if p not in special] if special else list(range(m))

    def _notify(self, d: Delivery, block: np.ndarray, position: int, i: int) -> None:
        """A restart replaced the command in flight: the episode was cut (truncated), the instance
        already started a new one. With next-step autoreset the next command is a free autoreset."""
        self.notice[i] = False
        d.flag(position, RESTARTED)
        block[position, TRUNCATED, 0] = 1.0
        info = self.reset_infos[i]
        self.reset_infos[i] = {} if self.next_step else None
        if isinstance(info, tuple):
            d.error(position, info)
        elif info:
            d.info(position).update(info)
        if self.same_step:
            self.over[i], self.ready[i] = False, False
        else:
            d.flag(position, EPISODE_OVER)
            self.over[i] = True

    def _step(self, route: Route, active: list[int], t: int, observed: bool = True) -> GroupStep:
        """Action t of the entries at `active`, in one call of the group; observed: their observations
        are read after it."""
        if len(active) == len(route.local):  # a copy: a backend may keep the action beyond the call
            return self.group.step(route.instances, self.actions[route.env_rows, t].copy(), observed)
        return self.group.step(route.instances[active], self.actions[[route.envs[p] for p in active], t], observed)

    def _run(self, d: Delivery, route: Route, k: int, active: list[int], placed: list[Placement] | None,
             first: GroupStep | None) -> None:
        """Up to k actions for the entries at `active`, each stopping at its episode's end. first: the
        first action's result, when it was already run."""
        local = route.local
        m = len(local)
        for t in range(k):
            if not active:
                return
            observed = t == k - 1 or placed is not None  # an inner sub-step is observed with chunk_obs="all" only
            result = first if t == 0 and first is not None else self._step(route, active, t, observed)
            ended = self._outcomes(d, self.block, t, active, local, result)
            if self.spec.video is not None:
                self._capture([local[p] for p in active])
            if placed is not None:  # chunk_obs="all": the observation after sub-step t
                self.out.observe(d, placed, None if len(active) == m else set(active), t)
            if ended:
                self._end(d, ended, local)
                gone = set(ended)
                active = [p for p in active if p not in gone]

    def _outcomes(self, d: Delivery, block: np.ndarray, t: int, active: list[int], local: list[int],
                  result: GroupStep) -> list[int]:
        """Action t's outcomes of the entries at `active` (result's order) into `block` and `d`;
        returns the positions whose episode ended."""
        elapsed, max_steps = self.elapsed, self.max_steps
        share = result.seconds / len(active)
        rewards, terminated = result.reward.tolist(), result.terminated.tolist()
        cut = result.truncated.tolist() if result.truncated is not None else None
        ended = []
        for j, p in enumerate(active):
            i = local[p]
            elapsed[i] += 1
            d.exec_s[p] += share
            d.executed[p] += 1
            done = bool(terminated[j])
            truncated = not done and (elapsed[i] >= max_steps or (cut is not None and bool(cut[j])))
            block[p, REWARD, t] = rewards[j]
            block[p, TERMINATED, t] = done
            block[p, TRUNCATED, t] = truncated
            block[p, EXECUTED, t] = 1.0
            if done or truncated:
                ended.append(p)
        for j, error in result.errors.items():
            p = active[j]
            d.error(p, error)
            block[p, TERMINATED, t] = 0.0  # not the task's termination: the episode is simply over
            if p not in ended:
                ended.append(p)
        for j, info in result.infos.items():
            d.info(active[j]).update(info)
        return ended

    def _end(self, d: Delivery, positions: list[int], local: list[int]) -> None:
        if not self.same_step:
            for p in positions:
                d.flag(p, EPISODE_OVER)
                self._end_episode(local[p])
            return
        # same-step autoreset: the final observation goes into the info, the slot gets the new episode's
        instances = [local[p] for p in positions]
        final = [{key: np.empty(s.shape, s.dtype) for key, s in self.layout.items()} for _ in instances]
        for i, out in zip(instances, final):
            self.group.write_one(i, out)
        self._reset(instances, [None] * len(instances), [None] * len(instances))
        for p, i, obs in zip(positions, instances, final):
            final_info = d.extra.get(p, {}).pop("info", {})
            self._take_reset(d, p, i)
            d.info(p).update(final_obs=obs, final_info=final_info)

    # ------------------------------------------------------------------ resets and calls
    def reset(self, page: int, entries: np.ndarray, payload: tuple) -> Reply:
        """payload: (seeds, options, kinds), one each per entry (see protocol's reset kinds)."""
        seeds, options, kinds = payload
        route = self.out.route(entries)
        local, envs, dest = route.local, route.envs, entries["dest"].tolist()
        for i, env, kind in zip(local, envs, kinds):
            self.env[i] = -1 if kind == SPARE else env
        # a reset done ahead (eager, after a restart) serves a reset that asks for no seed or options
        again = [p for p, (i, kind) in enumerate(zip(local, kinds)) if kind != OBSERVE and not (
            kind == RESULT and self.ready[i] and seeds[p] is None and not options[p])]
        self._reset([local[p] for p in again], [seeds[p] for p in again], [options[p] for p in again])
        m = len(local)
        d = Delivery(m)
        d.plain = False
        self.block[:m, :, :1] = 0.0
        for position, (i, kind) in enumerate(zip(local, kinds)):
            if kind == OBSERVE:  # the episode goes on as it was
                if self.over[i]:
                    d.flag(position, EPISODE_OVER)
                continue
            if kind == NOTICE:
                self._notify(d, self.block, position, i)
            elif dest[position] == HOLD or kind == SPARE:
                self.over[i], self.notice[i] = True, kind != SPARE  # the reset waits for the env's next command
                if isinstance(self.reset_infos[i], tuple):
                    d.error(position, self.reset_infos[i])
            else:
                if self.notice[i]:
                    self.notice[i] = False
                    d.flag(position, RESTARTED)
                self._take_reset(d, position, i)
        return self.out.deliver(d, route, self.out.place(page, route), 1, self.reset_s)

    def call(self, entries: np.ndarray, payload: tuple) -> Reply:
        name, args, kwargs, ends_episode = payload
        results: dict[int, Any] = {}
        flags = []
        for i, env in zip(entries["instance"].tolist(), entries["env"].tolist()):
            try:
                results[env] = {"result": self.group.call(i, name, args, kwargs)}
                flags.append(HAS_PAYLOAD)
            except Exception as error:
                results[env] = {"error": failure(error)}
                flags.append(HAS_PAYLOAD | ERROR)
            if ends_episode:  # the env resets at its next command (or ahead of it)
                self._end_episode(i)
        records = np.array([(env, -1, 0, flag, 0, 0, 0, 0) for env, flag in zip(entries["env"].tolist(), flags)],
                           np.float64).reshape(-1, len(RECORD_FIELDS))
        return records, results, (0, CLAIM, 0.0, 0.0)

    # ------------------------------------------------------------------ video
    def _recorder(self, i: int):
        video, env = self.spec.video, self.env[i]
        if video is None or env < 0 or not video.records(env):
            return None
        recorder = self.recorders.get(env)
        if recorder is None:
            from .video import VideoRecorder  # imageio: only recording workers pay for it

            recorder = self.recorders[env] = VideoRecorder(video, env)
        return recorder

    def _start_video(self, i: int) -> None:
        recorder = self._recorder(i)
        if recorder is not None:
            recorder.start_episode()
            recorder.capture(lambda camera: self.group.render_rgb(i, camera))

    def _capture(self, local: list[int]) -> None:
        for i in local:
            recorder = self._recorder(i)
            if recorder is not None:
                recorder.capture(lambda camera, i=i: self.group.render_rgb(i, camera))

    def close(self) -> None:
        for recorder in self.recorders.values():
            recorder.close()
        self.group.close()
