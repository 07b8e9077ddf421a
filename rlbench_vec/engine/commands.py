"""Commands to the workers and their replies: one command per worker for the envs it serves, each
with a deadline; one wait for all workers (a poll over their reply pipes and process sentinels), whose
replies are taken into the env table as they come.

The work per command and per reply is a few microseconds of Python, and a wait costs a system call
plus the replies it brings: deadlines are kept as their earliest (checked when it passes), and no
call scans every worker or every env. A worker that dies or misses its deadline is restarted.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ..wire.process import death_reason
from ..wire.protocol import (
    CALL,
    CLAIM,
    COMMAND_NAMES,
    ENV,
    ERROR,
    FAILED,
    FLAGS,
    HOLD,
    PARTIAL,
    RESET,
    SLOT,
    START,
    STEP,
    dumps,
    read_plain,
    reply,
)
from ..wire.shm import SharedBuffers
from .envtable import EnvTable
from .handles import Entry, Pending, WorkerHandle, Workers, encode
from .recycling import Recycler
from .restarts import Restarts

Batch = list[tuple[WorkerHandle, list[Entry], tuple[list[int], bytes]]]


PagesShared = Callable[[list, bytes | None], None]  # a worker's device pages, and the handle of their event


class Commands:
    def __init__(self, workers: Workers, table: EnvTable, restarts: Restarts, recycler: Recycler,
                 buffers: SharedBuffers, batched_steps: int, on_device_pages: PagesShared | None):
        self.workers, self.table, self.restarts, self.recycler = workers, table, restarts, recycler
        self.buffers, self.vc = buffers, workers.vc
        # a group that steps its envs at once takes this many batched steps per command (one per simulator):
        # deadlines do not add up per env; 0: its envs step in turn
        self.batched_steps = batched_steps
        self.on_device_pages = on_device_pages  # called with a started worker's device pages (and their event)
        self.earliest = math.inf  # no deadline is earlier than this (it may be an answered command's)
        self._full: Batch | None = None  # each worker's entries of a full batch, kept until an env moves
        self._full_moves = -1
        self._routes: list[tuple[WorkerHandle, Entry, bytes]] = []  # per env, kept until an env moves
        self._routes_moves = -1

    # ------------------------------------------------------------------ sending
    def _group(self, envs: list[int], dests: list[int]) -> dict[WorkerHandle, list[Entry]]:
        """Each worker's entries for these envs, in the order given."""
        env_inst, of_instance, local = self.table.env_inst, self.workers.of_instance, self.workers.local
        groups: dict[WorkerHandle, list[Entry]] = {}
        for env, dest in zip(envs, dests):
            instance = env_inst[env]
            groups.setdefault(of_instance[instance], []).append((int(local[instance]), env, dest))
        return groups

    def _full_batch(self) -> Batch:
        if self._full is None or self._full_moves != self.table.moves:
            everyone = list(range(self.table.num_envs))
            self._full = [(handle, entries, ([e[1] for e in entries], encode(entries)))
                          for handle, entries in self._group(everyone, everyone).items()]
            self._full_moves = self.table.moves
        return self._full

    def _claims(self, envs: list[int]) -> Batch:
        """Each worker's entries for these envs (in the order given), each result to a claimed slot:
        made from every env's worker, entry and entry bytes, kept until an env moves."""
        if self._routes_moves != self.table.moves:
            everyone = list(range(self.table.num_envs))
            self._routes = [(handle, entry, encode([entry])) for handle, entries
                            in self._group(everyone, [CLAIM] * len(everyone)).items() for entry in entries]
            self._routes.sort(key=lambda route: route[1][1])
            self._routes_moves = self.table.moves
        groups: dict[WorkerHandle, tuple[list[Entry], list[int], list[bytes]]] = {}
        for env in envs:
            handle, entry, data = self._routes[env]
            if (group := groups.get(handle)) is None:
                groups[handle] = ([entry], [env], [data])
            else:
                group[0].append(entry)
                group[1].append(env)
                group[2].append(data)
        return [(handle, entries, (ids, b"".join(parts))) for handle, (entries, ids, parts) in groups.items()]

    def _send(self, handle: WorkerHandle, command: int, entries: list[Entry], budget_s: float, page: int = 0,
              k: int = 0, payload: bytes = b"", seeds: list | None = None) -> None:
        pending = handle.send(command, entries, budget_s, page, k, payload, seeds)
        self.earliest = min(self.earliest, pending.deadline)

    def step(self, envs: np.ndarray, k: int, ordered: bool) -> None:
        """Start k actions (already in the actions buffer) for these envs. ordered: each env's result
        goes to its own slot (a full batch of every env); else to the next free slot (a partial batch)."""
        page, vc = self.buffers.filling, self.vc
        batch = self._full_batch() if ordered else self._claims(envs.tolist())
        # every worker gets its command before any bookkeeping: the last one starts sooner
        seqs = [handle.write(STEP, len(entries), data, page, k) for handle, entries, (_, data) in batch]
        resets = self._resets_due()
        earliest = self.earliest
        for (handle, entries, (ids, _)), seq in zip(batch, seqs):
            steps = self.batched_steps or len(entries)
            budget = vc.step_timeout_s * k * steps + vc.reset_timeout_s * resets.get(handle, 0)
            earliest = min(earliest, handle.track(STEP, seq, entries, ids, budget, page, k).deadline)
        self.earliest = earliest

    def _resets_due(self) -> dict[WorkerHandle, int]:
        """Per worker, the resets it may run before it answers a step: one per env of it whose episode
        is over (reset now or ahead) and per spare it holds (reset ahead after an episode ended)."""
        table, of_instance = self.table, self.workers.of_instance
        spares = len(table.inst_env) > table.num_envs  # each env has one instance: the rest are spares
        if not spares and not np.count_nonzero(table.over):  # count_nonzero: cheaper than any() on few envs
            return {}  # the usual step
        due = table.env_inst[table.over].tolist()
        if spares:
            due.extend(np.flatnonzero(table.inst_env < 0).tolist())
        resets: dict[WorkerHandle, int] = {}
        for instance in due:
            resets[of_instance[instance]] = resets.get(of_instance[instance], 0) + 1
        return resets

    def reset(self, envs: list[int], seeds: list, options: list, kinds: list, ordered: bool = True) -> None:
        """Reset these envs: seeds, options and kinds indexed by env; each result to its own slot (ordered, a
        full batch) or to the next free slot (a partial batch)."""
        page = self.buffers.filling
        for env in envs:
            self.table.last_options[env] = options[env]
        for handle, entries in self._group(envs, envs if ordered else [CLAIM] * len(envs)).items():
            rows = [entry[1] for entry in entries]
            picked = [seeds[e] for e in rows]
            payload = dumps((picked, [options[e] for e in rows], [kinds[e] for e in rows]))
            self._send(handle, RESET, entries, self.vc.reset_timeout_s * len(entries), page, 1, payload, picked)

    def call(self, envs: list[int], payload: bytes, timeout_s: float) -> None:
        for handle, entries in self._group(envs, [HOLD] * len(envs)).items():
            self._send(handle, CALL, entries, timeout_s * len(entries), payload=payload)

    # ------------------------------------------------------------------ waiting
    def wait_until(self, ready: Callable[[], bool], timeout_s: float | None = None) -> bool:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while not ready():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            self.pump(left)
        return True

    def pump(self, timeout_s: float | None) -> list[WorkerHandle]:
        """Wait once for worker messages (or the earliest deadline), take them in, enforce deadlines.
        Returns the workers that finished starting."""
        wait = max(0.0, self.earliest - time.monotonic())
        if timeout_s is not None:
            wait = min(wait, timeout_s)
        started = []
        ready = self.workers.poller.wait(wait)
        if ready:  # the shared pipe first: a worker's plain replies there came before anything on its own
            self._read_plain()
        for handle in ready:
            if handle is not None:
                started.extend(self._read(handle))
        if time.monotonic() >= self.earliest:
            self._enforce_deadlines()
        if self.workers.retired:
            self.recycler.reap()
        return started

    def _enforce_deadlines(self) -> None:
        """Restart the workers past their deadline; find the next earliest one."""
        now, earliest = time.monotonic(), math.inf
        for handle in list(self.workers.serving):
            if not handle.pending or handle.process is None:
                continue
            pending = handle.pending[0]
            if now > pending.deadline:
                self.restarts.restart(handle, f"no reply to {COMMAND_NAMES[pending.command]} within "
                                              f"{pending.deadline - pending.sent_at:.1f} s")
            if handle.pending:
                earliest = min(earliest, handle.pending[0].deadline)
        self.earliest = earliest

    def _read_plain(self) -> None:
        """Take in the plain replies on the shared pipe; those of a process since replaced are dropped
        (its restart answered their envs)."""
        now, by_number, settle = time.monotonic(), self.workers.by_number, self.table.settle_plain
        for number, generation, seq, page, _first, exec_s, write_s in read_plain(self.workers.plain_fd):
            handle = by_number.get(number)
            if handle is None or handle.restarts != generation or not handle.pending:
                continue
            queue = handle.pending
            pending = queue.popleft() if queue[0].seq == seq else _take_in_flight(handle, seq)
            settle(pending, page, exec_s, write_s, now - pending.sent_at)

    def _read(self, handle: WorkerHandle) -> list[WorkerHandle]:
        """Take in the replies that arrived from this worker, or its death."""
        started: list[WorkerHandle] = []
        reader = handle.reader
        if reader is None:
            return started
        try:
            frames = reader.read_available()
        except (EOFError, OSError):
            command = handle.pending[0].command if handle.pending else None
            doing = "while idle" if command is None else f"during {COMMAND_NAMES[command]}"
            handle.process.join(timeout=1.0)
            reason = f"{death_reason(handle.process.exitcode)} {doing}"
            if command == START:
                self.restarts.start_failed(handle, reason)
            else:
                self.restarts.restart(handle, reason)
            return started
        for frame in frames:
            answer = reply(frame)
            pending = _in_flight(handle, answer.seq)
            if answer.status == PARTIAL:
                self.table.settle_records(pending, answer.records, answer.payload, time.monotonic() - pending.sent_at)
                pending.answered.update(int(env) for env in answer.records[:, ENV].tolist())
                continue
            handle.pending.remove(pending)
            if pending.command == START:
                if answer.status == FAILED:
                    self.restarts.start_failed(handle, *answer.payload)
                    return started
                self._started(handle, answer.payload)
                started.append(handle)
            elif answer.status == FAILED:
                self.restarts.restart(handle, f"the worker failed: {answer.payload[0]}\n{answer.payload[1]}")
                return started
            else:
                records = answer.records
                if pending.command == RESET and any(row[SLOT] < 0 and int(row[FLAGS]) & ERROR for row in records):
                    self.restarts.restart(handle, "reset after restart failed: " + _first_error(records,
                                                                                            answer.payload))
                    return started
                self.table.settle_records(pending, records, answer.payload, time.monotonic() - pending.sent_at)
                if handle.takes_over is not None and pending.command == RESET:
                    self.recycler.spares_ready(handle)
            if handle.reader is not reader:  # restarted meanwhile: the rest came from the old process
                break
        return started

    def _started(self, handle: WorkerHandle, facts: dict[str, Any]) -> None:
        handle.ready, handle.ran = True, True
        handle.facts = {key: value for key, value in facts.items() if key not in ("pages", "pages_written")}
        if "pages" in facts and self.on_device_pages is not None:
            self.on_device_pages(facts["pages"], facts.get("pages_written"))
        os.unlink(handle.boot_log)


def _take_in_flight(handle: WorkerHandle, seq: int) -> Pending:
    pending = _in_flight(handle, seq)
    handle.pending.remove(pending)
    return pending


def _in_flight(handle: WorkerHandle, seq: int) -> Pending:
    """The command a reply answers: the oldest in flight, except where a batched group's worlds finish
    a later command first."""
    for pending in handle.pending:
        if pending.seq == seq:
            return pending
    raise RuntimeError(f"reply {seq} from worker {handle.spec.worker_index} answers no command in flight")


def _first_error(records: Any, payload: dict | None) -> str:
    for row in records.tolist():
        if int(row[FLAGS]) & ERROR:
            return (payload or {}).get(int(row[0]), {}).get("error", ("unknown error",))[0]
    return "unknown error"
