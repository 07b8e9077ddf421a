"""Spare instances and recycled workers: both hand an env to another instance at its next-step
autoreset, so no episode is cut short.

Spares (`spare_envs`) are extra instances kept reset: one takes over an env whose episode ended while
the env's own instance resets in the background and becomes a spare. Recycling
(`recycle_after_episodes`, `max_worker_rss_mb`) starts a replacement beside a worker that ran enough
episodes or grew too large; its envs move over one by one at their episode ends, and the old worker
stops once it serves none. Nothing here waits for a retiring worker.
"""

from __future__ import annotations

import collections
import logging
import time
from dataclasses import replace

import psutil

from ..wire.protocol import HOLD, SPARE
from .envtable import A_RECYCLES, EnvTable
from .handles import WorkerHandle, Workers
from .restarts import Restarts, forget_display

log = logging.getLogger("rlbench_vec")
RSS_CHECK_S = 5.0


class Recycler:
    def __init__(self, workers: Workers, table: EnvTable, restarts: Restarts):
        self.workers, self.table, self.restarts, self.vc = workers, table, restarts, workers.vc
        self.spares: collections.deque[int] = collections.deque(range(table.num_envs, workers.instances))
        self.retiring: list[WorkerHandle] = []

    def start_spares(self) -> None:
        """Spares are reset ahead, ready to take over from the first episode end."""
        spares = set(self.spares)
        for handle in self.workers.serving:
            mine = [local for local, instance in enumerate(handle.instances.tolist()) if instance in spares]
            if mine:
                handle.plan = {local: (-1, HOLD, SPARE, None) for local in mine}
                self.restarts.send_plan(handle)

    def after_episodes(self, ended: list[int]) -> None:
        """Envs whose episode ended (in env order, so runs with one seed stay alike): move each to a
        spare instance, or to its recycled worker's replacement; count episodes per worker."""
        table, of_instance = self.table, self.workers.of_instance
        freed = []  # spares again once reset: queued after this batch, so no env gets one still resetting
        for env in ended:
            instance = int(table.env_inst[env])
            handle = of_instance[instance]
            handle.episodes += 1
            target = self._takeover_instance(handle) if handle.retiring else None
            if target is None and self.spares:
                target = self.spares.popleft()
                if not handle.retiring:  # a retiring worker's instances serve no one again
                    freed.append(instance)
            elif target is not None:
                table.recycled.add(env)
                table.accounts[env][A_RECYCLES] += 1
            if target is not None:
                table.move(env, target)
            if not handle.retiring:
                self._check(handle)
        self.spares.extend(freed)
        for handle in [h for h in self.retiring if not (table.inst_env[h.instances] >= 0).any()]:
            self._retire(handle)

    @staticmethod
    def _takeover_instance(handle: WorkerHandle) -> int | None:
        new = handle.replacement
        if new is None or new.takes_over is not None or not new.reserve:  # not ready yet
            return None
        return new.reserve.popleft()

    def _check(self, handle: WorkerHandle) -> None:
        vc = self.vc
        episodes = vc.recycle_after_episodes
        due = episodes is not None and handle.episodes >= episodes * len(handle.instances)
        now = time.monotonic()
        if not due and vc.max_worker_rss_mb is not None and now - handle.rss_checked > RSS_CHECK_S:
            handle.rss_checked = now
            try:
                due = psutil.Process(handle.pid).memory_info().rss > vc.max_worker_rss_mb * (1 << 20)
            except psutil.Error:
                due = False
        if due:
            self._recycle(handle)

    def _recycle(self, handle: WorkerHandle) -> None:
        """Start a replacement beside the worker; its envs move over one by one at their next episode."""
        first = self.workers.instances
        new = self.workers.add(range(first, first + len(handle.instances)), None)
        self.table.add_instances(len(handle.instances))
        new.spec = replace(new.spec, cpu_affinity=handle.spec.cpu_affinity, display=handle.spec.display)
        handle.retiring, handle.replacement, new.takes_over = True, new, handle
        self.retiring.append(handle)
        log.info("recycling worker %d (%d episodes): starting worker %d", handle.spec.worker_index, handle.episodes,
                 new.spec.worker_index)
        new.plan = {local: (-1, HOLD, SPARE, None) for local in range(len(new.instances))}
        new.start(self.vc.start_timeout_s)
        self.restarts.send_plan(new)

    def spares_ready(self, handle: WorkerHandle) -> None:
        """A recycling replacement has reset its instances: they replace the retiring worker's spares,
        and the rest wait for its envs."""
        old, handle.takes_over = handle.takes_over, None
        mine = set(old.instances.tolist()) if old is not None else set()
        moved = [i for i in self.spares if i in mine]
        for instance in moved:
            self.spares.remove(instance)
        fresh = handle.instances.tolist()
        self.spares.extend(fresh[:len(moved)])
        handle.reserve.extend(fresh[len(moved):])

    def _retire(self, handle: WorkerHandle) -> None:
        if handle.pending:
            return
        self.retiring.remove(handle)
        self.workers.retire(handle)  # its exit is expected: reap() joins it, nothing restarts it

    def reap(self) -> None:
        """Join retired workers that have exited and clean up after their Xvfb, never waiting: the
        envs of other workers are being served meanwhile."""
        retired = self.workers.retired
        for handle in list(retired):
            if handle.process is not None and handle.process.is_alive():
                if handle.pending and time.monotonic() > handle.pending[0].deadline:
                    handle.kill()
                continue
            if handle.process is not None:
                handle.kill()
                handle.process = None
            if forget_display(handle, wait_s=0.0):  # its Xvfb may outlive it by a moment
                retired.remove(handle)
