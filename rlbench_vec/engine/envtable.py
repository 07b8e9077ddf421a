"""The state of every env as the main process sees it, and the taking in of a worker's reply.

Env e is served by instance `env_inst[e]` (at first e itself); spares and recycling move an env to
another instance at a next-step autoreset. Each env is IDLE, RUNNING (a command in flight) or DONE
(its result arrived and waits to be handed out). `busy` counts the envs not IDLE and `replied[page]`
the results written to a page, so no call has to scan every env to know them.

A reply of a few envs (one CPU simulator's, a worker's handful) is taken in by a plain loop: numpy's
cost per call on arrays that small is larger than the work. A reply of many (a batched group's
thousands of worlds) is taken in by numpy, into accounts of its own (`bulk`), which `totals()` adds.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..wire.protocol import (
    CALL,
    ENV,
    EPISODE_OVER,
    ERROR,
    EXEC_S,
    EXECUTED_ACTIONS,
    FLAGS,
    HAS_PAYLOAD,
    MANY_RECORDS,
    PAGE,
    RESET_S,
    RESTARTED,
    SLOT,
    STEP,
    WRITE_S,
)
from .handles import Pending

IDLE, RUNNING, DONE = 0, 1, 2
ACCOUNTS = ("exec_s", "write_s", "reset_s", "ipc_s", "steps", "resets", "restarts", "recycles", "errors")
A_EXEC, A_WRITE, A_RESET, A_IPC, A_STEPS, A_RESETS, A_RESTARTS, A_RECYCLES, A_ERRORS = range(len(ACCOUNTS))


class EnvTable:
    """Per env: phase, the command in flight and its width (K), the worker's flags and reports of
    its last result, whether its episode is over, its accounts; and the env <-> instance map."""

    def __init__(self, num_envs: int, instances: int):
        n = self.num_envs = num_envs
        self.env_inst = np.arange(n)
        self.moves = 0  # counts changes of the map, so what is derived from it knows when to renew
        self.inst_env = np.full(instances, -1)
        self.inst_env[:n] = np.arange(n)
        self.phase = np.zeros(n, np.int8)
        self.command = np.zeros(n, np.int8)
        self.over = np.ones(n, bool)  # the env's next step autoresets (never reset yet, or its episode ended)
        self.width = np.zeros(n, np.int64)
        self.flags = np.zeros(n, np.uint8)
        self.busy = 0  # envs not IDLE
        self.replied = [0, 0]  # results written to each page since it opened
        self.draining: int | None = None  # a closed page whose last claimed slots are still coming
        self.extra: dict[int, dict[str, Any]] = {}
        self.restart_reason: dict[int, str] = {}
        self.recycled: set[int] = set()
        self.last_options: list[dict | None] = [None] * n
        self.accounts = [[0.0] * len(ACCOUNTS) for _ in range(n)]  # per env; Python floats on the reply path
        self.bulk = np.zeros((n, len(ACCOUNTS)))  # the same accounts, from replies of MANY_RECORDS envs or more

    def add_instances(self, count: int) -> None:
        self.inst_env = np.concatenate([self.inst_env, np.full(count, -1)])

    def move(self, env: int, target: int) -> None:
        """Env now served by instance `target`; its old instance serves no one."""
        self.inst_env[self.env_inst[env]], self.inst_env[target], self.env_inst[env] = -1, env, target
        self.moves += 1

    def _rows(self, envs: np.ndarray) -> np.ndarray | slice:
        """Distinct env ids as an index: all of them as a slice (cheaper to assign through)."""
        return slice(None) if len(envs) == self.num_envs else envs

    def mark(self, envs: np.ndarray, command: int, k: int) -> None:
        rows = self._rows(envs)
        self.phase[rows], self.command[rows], self.width[rows] = RUNNING, command, k
        self.busy += len(envs)

    def release(self, envs: np.ndarray) -> None:
        """Handed out: these envs (all DONE) are idle again."""
        self.phase[self._rows(envs)] = IDLE
        self.busy -= len(envs)

    def release_all(self) -> None:
        self.phase[:] = IDLE
        self.busy = 0

    def in_flight(self) -> np.ndarray:
        return np.flatnonzero(self.phase == RUNNING)

    def done(self) -> np.ndarray:
        return np.flatnonzero(self.phase == DONE)

    # ------------------------------------------------------------------ replies
    def settle_plain(self, pending: Pending, page: int, exec_s: float, write_s: float, round_trip: float) -> None:
        """A plain reply: every env of the step ran its k actions, nothing to report; results at
        their destinations (or claimed slots) on the reply's page, the worker's seconds for them all."""
        envs = pending.envs
        m = len(envs)
        ipc = max(0.0, round_trip - exec_s - write_s) / m
        exec_s, write_s = exec_s / m, write_s / m
        if m >= MANY_RECORDS:
            rows = self._rows(np.asarray(envs))
            self.phase[rows], self.flags[rows], self.over[rows] = DONE, 0, False
            self.bulk[rows, A_EXEC] += exec_s
            self.bulk[rows, A_WRITE] += write_s
            self.bulk[rows, A_IPC] += ipc
            self.bulk[rows, A_STEPS] += pending.k
            self.replied[page] += m
            return
        phase, flags, over, accounts, k = self.phase, self.flags, self.over, self.accounts, pending.k
        for env in envs:
            phase[env] = DONE
            flags[env] = 0
            over[env] = False
            account = accounts[env]
            account[A_EXEC] += exec_s
            account[A_WRITE] += write_s
            account[A_IPC] += ipc
            account[A_STEPS] += k
        self.replied[page] += m

    def settle_records(self, pending: Pending, records: np.ndarray, payload: dict | None, round_trip: float) -> None:
        """A reply with records: each answered env becomes DONE, with its result's place and reports."""
        if len(records) >= MANY_RECORDS:
            self._settle_many(pending, records, payload, round_trip)
            return
        rows = records.tolist()  # (env, slot, page, flags, executed, exec_s, write_s, reset_s)
        ipc = max(0.0, round_trip - sum(row[5] + row[6] + row[7] for row in rows)) / max(1, len(rows))
        answers_step, delivers = pending.command == STEP, pending.command != CALL
        for env, slot, page, flags, executed, exec_s, write_s, reset_s in rows:
            env, flags = int(env), int(flags)
            if env < 0:
                continue  # a spare's reset belongs to no env
            account = self.accounts[env]
            account[A_EXEC] += exec_s
            account[A_WRITE] += write_s
            account[A_RESET] += reset_s
            account[A_IPC] += ipc
            account[A_RESETS] += reset_s > 0
            account[A_ERRORS] += bool(flags & ERROR)
            if delivers and slot < 0:
                continue  # reset after a restart, reported with the env's next command
            if pending.restart:
                flags |= RESTARTED
            self.phase[env], self.flags[env] = DONE, flags
            if delivers:
                self.over[env] = bool(flags & EPISODE_OVER)
                self.replied[int(page)] += 1
                if answers_step:
                    account[A_STEPS] += executed
            if flags & HAS_PAYLOAD and payload is not None:
                self.extra[env] = payload[env]

    def _settle_many(self, pending: Pending, records: np.ndarray, payload: dict | None, round_trip: float) -> None:
        """settle_records for a reply of many envs, by numpy (each env at most once in a reply)."""
        ipc = max(0.0, round_trip - float(records[:, EXEC_S:RESET_S + 1].sum())) / len(records)
        records = records[records[:, ENV] >= 0]  # a spare's reset belongs to no env
        env, flags = records[:, ENV].astype(np.int64), records[:, FLAGS].astype(np.int64)
        bulk = self.bulk
        bulk[env, A_EXEC] += records[:, EXEC_S]
        bulk[env, A_WRITE] += records[:, WRITE_S]
        bulk[env, A_RESET] += records[:, RESET_S]
        bulk[env, A_IPC] += ipc
        bulk[env, A_RESETS] += records[:, RESET_S] > 0
        bulk[env, A_ERRORS] += (flags & ERROR) != 0
        delivers = pending.command != CALL
        if delivers:  # a reset after a restart (no slot) is reported with the env's next command
            placed = records[:, SLOT] >= 0
            records, env, flags = records[placed], env[placed], flags[placed]
        if pending.restart:
            flags |= RESTARTED
        self.phase[env], self.flags[env] = DONE, flags
        if delivers:
            self.over[env] = (flags & EPISODE_OVER) != 0
            second = int(np.count_nonzero(records[:, PAGE]))
            self.replied[0] += len(env) - second
            self.replied[1] += second
            if pending.command == STEP:
                bulk[env, A_STEPS] += records[:, EXECUTED_ACTIONS]
        if payload is not None:
            self.extra.update({e: payload[e] for e in env[(flags & HAS_PAYLOAD) != 0].tolist()})

    def totals(self) -> dict[str, np.ndarray]:
        """Per-env accounts as arrays, one per name of ACCOUNTS."""
        return dict(zip(ACCOUNTS, (np.array(self.accounts, dtype=float) + self.bulk).T))
