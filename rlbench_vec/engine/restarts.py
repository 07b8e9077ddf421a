"""Replacing a dead or hung worker: its envs lose their episodes and each one's next result says so
(truncated, info["restarted"]); the other workers' envs are untouched. Also: what a worker that
cannot start at all raises, and the restart budget that turns a crash loop into an error.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np

from ..display.xvfb import GONE_WAIT_S, remove_stale_display_files
from ..errors import RestartBudgetExceeded, WorkerStartError
from ..wire.process import log_tail
from ..wire.protocol import CALL, CLAIM, HOLD, NOTICE, RESET, RESULT, SPARE, STEP, dumps
from ..wire.shm import SharedBuffers
from .envtable import A_RESTARTS, DONE, EnvTable
from .handles import Pending, WorkerHandle, Workers

log = logging.getLogger("rlbench_vec")
BOOTSTRAP_HINT = (
    "Workers are spawned processes: each imports your main script. Your script creates the vector env at "
    "import time, so every worker tried to create its own. Put that code under `if __name__ == \"__main__\":`."
)


def forget_display(handle: WorkerHandle, wait_s: float = GONE_WAIT_S) -> bool:
    """A worker that dies by SIGKILL takes its Xvfb along, which cannot remove its socket: do it.
    False while its Xvfb still runs after wait_s."""
    return not handle.facts.get("display") or remove_stale_display_files(handle.facts, wait_s)


class Restarts:
    def __init__(self, workers: Workers, table: EnvTable, buffers: SharedBuffers, close: Callable[[], None]):
        self.workers, self.table, self.buffers, self.vc = workers, table, buffers, workers.vc
        self.close = close  # the pool's: a spent budget closes the vector env
        self.total = 0

    def start_failed(self, handle: WorkerHandle, message: str, worker_traceback: str = "") -> None:
        """A worker could not start. At first start that is fatal (a restart would fail the same way);
        a replacement that fails to start counts as one more restart."""
        if handle.ran:
            self.restart(handle, f"its replacement failed to start: {message}")
            return
        output = log_tail(handle.boot_log)
        if "bootstrapping phase" in output or "while a worker process was importing" in output:
            message = f"{message}. {BOOTSTRAP_HINT}"
        if output and not worker_traceback:
            message += f"\n--- the worker's output while starting ---\n{output}"
        raise WorkerStartError(int(handle.instances[0]), f"worker failed to start: {message}", worker_traceback)

    def restart(self, handle: WorkerHandle, reason: str) -> None:
        """Replace a dead or hung worker; its envs' next results report the restart."""
        forget_display(handle)
        in_flight = list(handle.pending)
        handle.kill()
        handle.restarts += 1
        self.total += 1
        table, vc = self.table, self.vc
        envs = table.inst_env[handle.instances]
        mine = envs[envs >= 0].tolist()
        for env in mine:
            table.accounts[env][A_RESTARTS] += 1
        worst = int(max((table.accounts[env][A_RESTARTS] for env in mine), default=0))
        if worst > vc.max_restarts_per_env or self.total > vc.max_restarts_total:
            self.close()
            raise RestartBudgetExceeded(
                f"worker {handle.spec.worker_index} (envs {mine}): {reason}; restarts so far: {worst} of an "
                f"env, {self.total} in total (limits max_restarts_per_env={vc.max_restarts_per_env}, "
                f"max_restarts_total={vc.max_restarts_total}). The simulator keeps failing: check the worker's "
                "stderr above, or raise the limits. This vector env is closed."
            )
        log.warning("worker %d (envs %s): %s; restarting it (restart %d)", handle.spec.worker_index, mine,
                    reason, handle.restarts)
        self._plan(handle, in_flight, reason)
        handle.start(vc.start_timeout_s)
        self.send_plan(handle)

    def _plan(self, handle: WorkerHandle, in_flight: list[Pending], reason: str) -> None:
        """After the new process starts, every instance is reset: envs in flight get their answer now
        (a step's notice, a reset's result) in the place it was due; calls in flight fail; the other
        envs report the restart with their next command; spares become spares again."""
        table = self.table
        for local, instance in enumerate(handle.instances.tolist()):
            env = int(table.inst_env[instance])
            if local not in handle.plan:
                handle.plan[local] = (env, HOLD, SPARE if env < 0 else RESULT, None)
            if env >= 0:
                table.restart_reason.setdefault(env, reason)
        for pending in in_flight:
            for entry, seed in zip(pending.entries, pending.seeds or [None] * len(pending.entries)):
                local, env, dest = entry
                if env in pending.answered:
                    continue  # its result came already (a batched group's partial reply)
                if pending.command == CALL:
                    table.extra[env] = {"error": (f"the worker was restarted during call(): {reason}", "")}
                    table.phase[env] = DONE
                    continue
                if dest == CLAIM:
                    dest = self._claimed_slot(handle, env)
                elif dest >= 0:
                    handle.plan_page = pending.page
                kind = NOTICE if pending.command == STEP else RESULT
                handle.plan[local] = (env, dest, kind, seed if pending.command == RESET else None)

    def _claimed_slot(self, handle: WorkerHandle, env: int) -> int:
        """The slot a dead worker claimed for env and never filled (the restart fills it), else CLAIM.
        An env claims at most once per page between two flips, and its slot is a hole while the env
        is still running."""
        filling, draining = self.buffers.filling, self.table.draining
        pages = {filling} | ({draining} if draining is not None else set()) | (
            {1 - filling} if self.buffers.limited else set())  # claims past a waiting recv's limit
        for page in pages:
            claimed = self.buffers.claimed(page)
            hole = np.flatnonzero(self.buffers.arrays[f"page{page}/env"][:claimed] == env)
            if len(hole) and self.table.phase[env] != DONE:
                handle.plan_page = page
                return int(hole[0])
        return CLAIM

    def send_plan(self, handle: WorkerHandle) -> None:
        """Queue the reset of a (re)started worker's instances, as planned, right behind its start: the
        worker reads it before any command sent to it later."""
        plan, handle.plan = handle.plan, {}
        locals_ = sorted(plan)
        entries = [(i, plan[i][0], plan[i][1]) for i in locals_]
        seeds = [plan[i][3] if plan[i][3] is not None else self._seed(handle, i) for i in locals_]
        options = [self.table.last_options[plan[i][0]] if plan[i][0] >= 0 else None for i in locals_]
        kinds = [plan[i][2] for i in locals_]
        page = self.buffers.filling if handle.plan_page is None else handle.plan_page
        handle.plan_page = None
        handle.send(RESET, entries, self.vc.reset_timeout_s * len(locals_), page, 1, dumps((seeds, options, kinds)),
                    seeds, restart=True)

    def _seed(self, handle: WorkerHandle, local: int) -> int | None:
        if self.vc.seed is None:
            return None
        entropy = [self.vc.seed, int(handle.instances[local]), handle.restarts]
        return int(np.random.SeedSequence(entropy).generate_state(1)[0])
