"""Worker groups as the main process sees them: start, commands, polling, deadlines, restarts,
spare instances and recycling, and the state of every env in one table.

Instances are simulator instances, numbered globally; worker w runs a contiguous range of them.
Env e is served by instance `env_inst[e]` (at first e itself); spares and recycling move an env to
another instance at a next-step autoreset. Each env is IDLE, RUNNING (a command in flight) or DONE
(its result arrived and waits to be handed out). A worker may have several commands queued; its
replies come back in order, one per command.
"""

from __future__ import annotations

import collections
import glob
import logging
import math
import os
import secrets
import select
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .backends import backend_class
from .config import EnvConfig, VectorConfig
from .distributed import worker_cpus
from .errors import RestartBudgetExceeded, WorkerError, WorkerStartError
from .process import SPAWN, child_environment, death_reason, log_tail
from .protocol import (
    AUTORESET,
    CALL,
    CLAIM,
    CLOSE,
    COMMAND_NAMES,
    ENTRY,
    ENV,
    EPISODE_OVER,
    ERROR,
    EXEC_S,
    FAILED,
    FLAGS,
    HAS_PAYLOAD,
    HOLD,
    NOTICE,
    RESET,
    RESET_S,
    RESTARTED,
    RESULT,
    SLOT,
    SPARE,
    START,
    STEP,
    WRITE_S,
    dumps,
    reply_reader,
    send_command,
)
from .results import Batch
from .shm import SHM_DIR, SharedBuffers, segment_name
from .worker import WorkerSpec, worker_main

log = logging.getLogger("rlbench_vec")
IDLE, RUNNING, DONE = 0, 1, 2
CLOSE_TIMEOUT_S = 10.0
FLIP_RETRY_S = 0.0002
RSS_CHECK_S = 5.0
ACCOUNTS = ("exec_s", "write_s", "reset_s", "ipc_s", "steps", "resets", "restarts", "recycles", "errors")
A_EXEC, A_WRITE, A_RESET, A_IPC, A_STEPS, A_RESETS, A_RESTARTS, A_RECYCLES, A_ERRORS = range(len(ACCOUNTS))
BOOTSTRAP_HINT = (
    "Workers are spawned processes: each imports your main script. Your script creates the vector env at "
    "import time, so every worker tried to create its own. Put that code under `if __name__ == \"__main__\":`."
)


@dataclass(slots=True)
class Pending:
    command: int
    seq: int
    sent_at: float
    deadline: float
    entries: np.ndarray  # ENTRY: (local instance, env, dest)
    page: int = 0
    seeds: list | None = None  # RESET: the seed per entry
    restart: bool = False  # the reset that follows a worker's restart: its results report the restart


class Poller:
    """One persistent poll set over every worker's socket and process sentinel: a wait is one
    system call, however many workers there are."""

    def __init__(self) -> None:
        self._poll = select.poll()
        self._owners: dict[int, WorkerHandle] = {}

    def add(self, handle: WorkerHandle) -> None:
        for fd in (handle.fd, handle.process.sentinel):
            self._poll.register(fd, select.POLLIN)
            self._owners[fd] = handle

    def remove(self, handle: WorkerHandle) -> None:
        for fd in [fd for fd, owner in self._owners.items() if owner is handle]:
            self._poll.unregister(fd)
            del self._owners[fd]

    def wait(self, timeout_s: float) -> list[WorkerHandle]:
        timeout_ms = math.ceil(min(timeout_s, 3600.0) * 1000)
        ready = {id(self._owners[fd]): self._owners[fd] for fd, _ in self._poll.poll(timeout_ms)}
        return list(ready.values())


class WorkerHandle:
    """One worker process: its socket, its queue of commands in flight, its instances."""

    def __init__(self, spec: WorkerSpec, boot_prefix: str, poller: Poller, environ: dict[str, str]):
        self.poller = poller
        self.environ = environ  # the backend's variables for the spawned process
        self.spec = spec
        self.instances = np.asarray(spec.instances, np.int64)
        self.boot_prefix = boot_prefix
        self.process: Any = None
        self.conn: Any = None
        self.fd = -1
        self.reader: Any = None
        self.pending: collections.deque[Pending] = collections.deque()
        self.seq = 0
        self.restarts = 0
        self.ran = False  # reached its command loop at least once
        self.ready = False  # the current process has started
        self.facts: dict[str, Any] = {}
        self.boot_log = ""
        self.plan: dict[int, tuple[int, int, int, int | None]] = {}  # local -> (env, dest, kind, seed) after a restart
        self.plan_page: int | None = None  # the page of the planned deliveries with a fixed slot
        self.episodes = 0
        self.rss_checked = 0.0
        self.retiring = False
        self.replacement: WorkerHandle | None = None
        self.takes_over: WorkerHandle | None = None  # set on a replacement until its spares are ready
        self.reserve: collections.deque[int] = collections.deque()  # a replacement's instances for takeovers

    def start(self, timeout_s: float) -> None:
        parent_conn, child_conn = SPAWN.Pipe(duplex=True)
        self.boot_log = f"{self.boot_prefix}{self.spec.worker_index}-{self.restarts}"
        spec = replace(self.spec, parent_pid=os.getpid(),
                       parent_is_main_thread=threading.current_thread() is threading.main_thread())
        process = SPAWN.Process(target=worker_main, args=(spec, child_conn),
                                name=f"rlbench_vec-worker-{spec.worker_index}", daemon=True)
        with child_environment(self.boot_log, self.environ):
            process.start()
        child_conn.close()  # only the child holds its end: its death is EOF here
        self.process, self.conn, self.fd = process, parent_conn, parent_conn.fileno()
        self.reader = reply_reader(self.fd)
        self.poller.add(self)
        self.seq, self.ready = 0, False
        now = time.monotonic()
        self.pending = collections.deque([Pending(START, 0, now, now + timeout_s, np.zeros(0, ENTRY))])

    def send(self, command: int, entries: np.ndarray, budget_s: float, page: int = 0, k: int = 0,
             payload: bytes = b"", seeds: list | None = None, restart: bool = False) -> Pending:
        """Queue a command; its deadline counts from when the ones before it are due."""
        self.seq += 1
        now = time.monotonic()
        start = max(now, self.pending[-1].deadline) if self.pending else now
        pending = Pending(command, self.seq, now, start + budget_s, entries, page, seeds, restart)
        self.pending.append(pending)
        try:
            send_command(self.fd, command, self.seq, entries, page, k, payload)
        except OSError:
            pass  # the worker is dead: its sentinel reports it
        return pending

    def kill(self) -> None:
        """Stop the process for good (SIGKILL: a hung simulator ignores anything gentler)."""
        self.poller.remove(self)
        if self.process is not None:
            if self.process.is_alive():
                self.process.kill()
            self.process.join(timeout=5.0)
        if self.conn is not None:
            self.conn.close()
        self.conn, self.fd, self.ready = None, -1, False
        self.pending.clear()

    def stop(self, timeout_s: float) -> None:
        """Ask the worker to close its simulators; kill it if it takes longer than timeout_s."""
        if self.process is None:
            return
        if self.process.is_alive() and not self.pending:
            self.send(CLOSE, np.zeros(0, ENTRY), timeout_s)
        self.process.join(timeout=timeout_s)
        self.kill()
        self.process = None

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid


class Pool:
    """All workers of one vector env and the state of its envs."""

    def __init__(self, config: EnvConfig, vc: VectorConfig, buffers: SharedBuffers, envs_per_worker: int,
                 before_refill: Callable[[int], None], on_device_pages: Callable[[list], None] | None = None):
        n, self.num_envs = vc.num_envs, vc.num_envs
        self.config, self.vc, self.buffers = config, vc, buffers
        self.before_refill = before_refill  # called with a page before workers may write it again
        backend = backend_class(config.backend)
        self.steps_in_parallel = backend.steps_in_parallel
        self.spawn_environ = backend.spawn_environ(config)
        self.on_device_pages = on_device_pages  # called with a started worker's device pages, if it has some
        # start-up logs: /dev/shm files named like our segments, so a killed owner's are swept too
        self.boot_prefix = os.path.join(SHM_DIR, segment_name(secrets.token_hex(6)) + "-boot")
        self.poller = Poller()
        total = n + vc.spare_envs
        self.workers: list[WorkerHandle] = []
        self.retired: list[WorkerHandle] = []
        self.next_worker_index = 0  # never reused: a recycled worker's number must not collide with a live one
        self.inst_worker: list[WorkerHandle] = []
        self.inst_local = np.zeros(0, np.int64)
        self.inst_wid = np.zeros(0, np.int64)  # the worker's number, for grouping entries by worker
        self.inst_env = np.zeros(0, np.int64)
        cpus = worker_cpus(math.ceil(total / envs_per_worker)) if vc.cpu_affinity else None
        for first in range(0, total, envs_per_worker):
            self._add_worker(range(first, min(total, first + envs_per_worker)), cpus)
        self.inst_env[:n] = np.arange(n)
        self.env_inst = np.arange(n)
        self._full_entries: dict[WorkerHandle, np.ndarray] | None = None
        self.spares = collections.deque(range(n, total))
        self.phase = np.zeros(n, np.int8)
        self.command = np.zeros(n, np.int8)
        self.over = np.ones(n, bool)  # the env's next step autoresets (never reset yet, or its episode ended)
        self.width = np.zeros(n, np.int64)
        self.flags = np.zeros(n, np.uint8)
        self.extra: dict[int, dict[str, Any]] = {}
        self.restart_reason: dict[int, str] = {}
        self.recycled: set[int] = set()
        self.replied = [0, 0]
        self.page_done = [np.zeros(n, bool), np.zeros(n, bool)]
        self.draining: int | None = None  # a closed page whose last claimed slots are still coming
        self.last_options: list[dict | None] = [None] * n
        self.accounts = [[0.0] * len(ACCOUNTS) for _ in range(n)]  # per env; Python floats on the reply path
        self.restarts_total = 0
        self.episodes_total = 0
        self.closed = False

    # ------------------------------------------------------------------ workers
    def _add_worker(self, instances: Iterable[int], cpus: list | None) -> WorkerHandle:
        vc, index = self.vc, self.next_worker_index
        self.next_worker_index += 1
        instances = tuple(instances)
        display = vc.display[index % len(vc.display)] if isinstance(vc.display, (list, tuple)) else vc.display
        # a worker renders the video cameras only if one of its envs records (spares: if any may)
        video = vc.video
        records = video is not None and any(
            video.records(i) if i < vc.num_envs else video.env_ids is None for i in instances)
        config = replace(self.config, video_cameras=video.cameras) if video is not None and records else self.config
        spec = WorkerSpec(
            worker_index=index, instances=instances, config=config, shm_name=self.buffers.name,
            fields=self.buffers.fields, max_chunk=vc.max_chunk, chunk_obs=vc.chunk_obs, rows=vc.num_envs,
            autoreset_mode=vc.autoreset_mode, eager_reset=vc.eager_reset, display=display,
            cpu_affinity=None if cpus is None else cpus[index % len(cpus)], video=vc.video,
        )
        handle = WorkerHandle(spec, self.boot_prefix, self.poller, self.spawn_environ)
        self.workers.append(handle)
        self.inst_worker.extend([handle] * len(instances))
        self.inst_local = np.concatenate([self.inst_local, np.arange(len(instances))])
        self.inst_wid = np.concatenate([self.inst_wid, np.full(len(instances), index)])
        self.inst_env = np.concatenate([self.inst_env, np.full(len(instances), -1)])
        return handle

    def start(self, on_ready: Callable[[int, int], None] | None) -> None:
        """Start every worker; fail at once, with the worker's own words, if one cannot start."""
        for handle in self.workers:
            handle.start(self.vc.start_timeout_s)
        ready = 0
        while ready < len(self.workers):
            for _ in self.pump(None):
                ready += 1
                if on_ready is not None:
                    on_ready(ready, len(self.workers))
        for handle in self.workers:  # spares are reset ahead, ready to take over from the first episode end
            spares = [local for local, instance in enumerate(handle.instances.tolist()) if instance in self.spares]
            if spares:
                handle.plan = {local: (-1, HOLD, SPARE, None) for local in spares}
                self._send_plan(handle)

    def _start_failed(self, handle: WorkerHandle, message: str, worker_traceback: str = "") -> None:
        """A worker could not start. At first start that is fatal (a restart would fail the same way);
        a replacement that fails to start counts as one more restart."""
        if handle.ran:
            self._restart(handle, f"its replacement failed to start: {message}")
            return
        output = log_tail(handle.boot_log)
        if "bootstrapping phase" in output or "while a worker process was importing" in output:
            message = f"{message}. {BOOTSTRAP_HINT}"
        if output and not worker_traceback:
            message += f"\n--- the worker's output while starting ---\n{output}"
        raise WorkerStartError(int(handle.instances[0]), f"worker failed to start: {message}", worker_traceback)

    # ------------------------------------------------------------------ commands
    def _entries_by_worker(self, envs: np.ndarray, dest: np.ndarray) -> dict[WorkerHandle, np.ndarray]:
        """Each worker's entries for these envs. A full batch's are kept until an env changes worker."""
        full = len(envs) == self.num_envs and dest is envs
        if full and self._full_entries is not None:
            return self._full_entries
        groups = self._group_entries(envs, dest)
        if full:
            self._full_entries = groups
        return groups

    def _group_entries(self, envs: np.ndarray, dest: np.ndarray) -> dict[WorkerHandle, np.ndarray]:
        instances = self.env_inst[envs]
        entries = np.zeros(len(envs), ENTRY)
        entries["instance"], entries["env"], entries["dest"] = self.inst_local[instances], envs, dest
        owners = self.inst_wid[instances]
        order = np.argsort(owners, kind="stable")
        owners, entries = owners[order], entries[order]
        cuts = np.flatnonzero(np.diff(owners)) + 1
        return {self.inst_worker[int(instances[order[start]])]: part
                for start, part in zip(np.concatenate([[0], cuts]).tolist(), np.split(entries, cuts))}

    def step(self, envs: np.ndarray, k: int, ordered: bool) -> None:
        """Start k actions (already in the actions buffer) for these envs. ordered: each env's result
        goes to its own slot (a full batch); else to the next free slot (a partial batch)."""
        page = self.buffers.filling
        dest = envs if ordered else np.full(len(envs), CLAIM)
        full = len(envs) == self.num_envs
        for handle, entries in self._entries_by_worker(envs, dest).items():
            # in a full batch every env of the worker is in the command, the rest of its instances spares
            resets = (int(self.over[entries["env"]].sum()) + len(handle.instances) - len(entries) if full
                      else self._resets_before_answer(handle))
            steps = 1 if self.steps_in_parallel else len(entries)
            handle.send(STEP, entries, self.vc.step_timeout_s * k * steps + self.vc.reset_timeout_s * resets, page, k)
        self._mark(envs, STEP, k)

    def reset(self, envs: np.ndarray, seeds: list, options: list, kinds: list) -> None:
        """Reset these envs (a full batch, each to its own slot): seeds, options and kinds per env."""
        page = self.buffers.filling
        for env, opts in zip(envs.tolist(), options):
            self.last_options[env] = opts
        for handle, entries in self._entries_by_worker(envs, envs).items():
            rows = entries["env"]
            picked = [seeds[e] for e in rows.tolist()]
            payload = dumps((picked, [options[e] for e in rows.tolist()], [kinds[e] for e in rows.tolist()]))
            handle.send(RESET, entries, self.vc.reset_timeout_s * len(entries), page, 1, payload, picked)
        self._mark(envs, RESET, 1)

    def call(self, envs: np.ndarray, payload: bytes, timeout_s: float) -> None:
        for handle, entries in self._entries_by_worker(envs, np.full(len(envs), HOLD)).items():
            handle.send(CALL, entries, timeout_s * len(entries), payload=payload)
        self._mark(envs, CALL, 0)

    def _resets_before_answer(self, handle: WorkerHandle) -> int:
        """Resets a worker may run before it answers a step: one per env of it whose episode is over
        (reset now or ahead) and per spare it holds (reset ahead after an episode ended)."""
        served = self.inst_env[handle.instances]
        return int(np.count_nonzero(served < 0) + np.count_nonzero(self.over[served[served >= 0]]))

    def _mark(self, envs: np.ndarray, command: int, k: int) -> None:
        self.phase[envs], self.command[envs], self.width[envs] = RUNNING, command, k

    # ------------------------------------------------------------------ events
    def pump(self, timeout_s: float | None) -> list[WorkerHandle]:
        """Wait once for worker messages (or the earliest deadline), handle them, enforce deadlines.
        Returns the workers that finished starting."""
        now = time.monotonic()
        deadline = min((h.pending[0].deadline for h in self.workers if h.pending), default=math.inf)
        wait = max(0.0, deadline - now)
        if timeout_s is not None:
            wait = min(wait, timeout_s)
        started = []
        readable = self._wait(wait)
        for handle in readable:
            started.extend(self._read(handle))
        now = time.monotonic()
        for handle in list(self.workers):
            if handle.pending and now > handle.pending[0].deadline and handle.process is not None:
                pending = handle.pending[0]
                self._restart(handle, f"no reply to {COMMAND_NAMES[pending.command]} within "
                                      f"{pending.deadline - pending.sent_at:.1f} s")
        self._reap_retired()
        return started

    def _wait(self, timeout_s: float) -> list[WorkerHandle]:
        """The workers with something to read (or dead); [] on timeout. Buffered frames count."""
        buffered = [h for h in self.workers if h.reader is not None and h.reader.pending()]
        return buffered or self.poller.wait(timeout_s)

    def _read(self, handle: WorkerHandle) -> list[WorkerHandle]:
        started: list[WorkerHandle] = []
        while handle.process is not None:
            try:
                (seq, status), records, payload = handle.reader.read()
            except (EOFError, OSError):
                command = handle.pending[0].command if handle.pending else None
                doing = "while idle" if command is None else f"during {COMMAND_NAMES[command]}"
                reason = f"{death_reason(self._exitcode(handle))} {doing}"
                if command == START:
                    self._start_failed(handle, reason)
                else:
                    self._restart(handle, reason)
                return started
            pending = handle.pending.popleft()
            if pending.seq != seq:
                raise RuntimeError(f"reply {seq} from worker {handle.spec.worker_index} answers no command in flight")
            if pending.command == START:
                if status == FAILED:
                    self._start_failed(handle, *payload)
                    return started
                handle.ready, handle.ran = True, True
                handle.facts = {key: value for key, value in payload.items() if key != "pages"}
                if "pages" in payload and self.on_device_pages is not None:
                    self.on_device_pages(payload["pages"])
                os.unlink(handle.boot_log)
                started.append(handle)
            elif status == FAILED:
                self._restart(handle, f"the worker failed: {payload[0]}\n{payload[1]}")
                return started
            else:
                self._settle(handle, pending, records, payload)
                if handle.takes_over is not None and pending.command == RESET:
                    self._spares_ready(handle)
            if handle.process is None or not handle.reader.pending():
                break
        return started

    @staticmethod
    def _exitcode(handle: WorkerHandle) -> int | None:
        handle.process.join(timeout=1.0)
        return handle.process.exitcode

    def _settle(self, handle: WorkerHandle, pending: Pending, records: np.ndarray, payload: dict | None) -> None:
        """Take in one reply: each answered env becomes DONE, with its result's place and reports.
        A plain loop over the records: a reply answers a few envs, and numpy's per-call cost on
        arrays this small is larger than the work."""
        round_trip = time.monotonic() - pending.sent_at
        rows = records.tolist()  # (env, slot, page, flags, executed, exec_s, write_s, reset_s)
        if pending.command == RESET and any(row[SLOT] < 0 and int(row[FLAGS]) & ERROR for row in rows):
            self._restart(handle, "reset after restart failed: " + self._first_error(rows, payload))
            return
        ipc = max(0.0, round_trip - sum(row[EXEC_S] + row[WRITE_S] + row[RESET_S] for row in rows)) / max(1, len(rows))
        answers_step, delivers = pending.command == STEP, pending.command != CALL
        for env, slot, page, flags, executed, exec_s, write_s, reset_s in rows:
            env, slot, page, flags = int(env), int(slot), int(page), int(flags)
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
                self.replied[page] += 1
                self.page_done[page][slot] = True
                if answers_step:
                    account[A_STEPS] += executed
            if flags & HAS_PAYLOAD and payload is not None:
                self.extra[env] = payload[env]

    @staticmethod
    def _first_error(rows: list, payload: dict | None) -> str:
        for row in rows:
            if int(row[FLAGS]) & ERROR:
                return (payload or {}).get(int(row[ENV]), {}).get("error", ("unknown error",))[0]
        return "unknown error"

    # ------------------------------------------------------------------ restarts
    def _restart(self, handle: WorkerHandle, reason: str) -> None:
        """Replace a dead or hung worker. Its envs lose their episodes: each one's next result says
        so (truncated, info["restarted"]); the other workers' envs are untouched."""
        self._forget_display(handle)
        in_flight = list(handle.pending)
        handle.kill()
        handle.restarts += 1
        self.restarts_total += 1
        envs = self.inst_env[handle.instances]
        mine = envs[envs >= 0]
        for env in mine.tolist():
            self.accounts[env][A_RESTARTS] += 1
        vc = self.vc
        worst = int(max((self.accounts[env][A_RESTARTS] for env in mine.tolist()), default=0))
        if worst > vc.max_restarts_per_env or self.restarts_total > vc.max_restarts_total:
            self.close()
            raise RestartBudgetExceeded(
                f"worker {handle.spec.worker_index} (envs {mine.tolist()}): {reason}; restarts so far: {worst} of an "
                f"env, {self.restarts_total} in total (limits max_restarts_per_env={vc.max_restarts_per_env}, "
                f"max_restarts_total={vc.max_restarts_total}). The simulator keeps failing: check the worker's "
                "stderr above, or raise the limits. This vector env is closed."
            )
        log.warning("worker %d (envs %s): %s; restarting it (restart %d)", handle.spec.worker_index, mine.tolist(),
                    reason, handle.restarts)
        self._plan_restart(handle, in_flight, reason)
        handle.start(vc.start_timeout_s)
        self._send_plan(handle)

    def _plan_restart(self, handle: WorkerHandle, in_flight: list[Pending], reason: str) -> None:
        """After the new process starts, every instance is reset: envs in flight get their answer now
        (a step's notice, a reset's result) in the place it was due; calls in flight fail; the other
        envs report the restart with their next command; spares become spares again."""
        for local, instance in enumerate(handle.instances.tolist()):
            env = int(self.inst_env[instance])
            if local not in handle.plan:
                handle.plan[local] = (env, HOLD, SPARE if env < 0 else RESULT, None)
            if env >= 0:
                self.restart_reason.setdefault(env, reason)
        for pending in in_flight:
            for entry, seed in zip(pending.entries.tolist(), pending.seeds or [None] * len(pending.entries)):
                local, env, dest = entry
                if pending.command == CALL:
                    self.extra[env] = {"error": (f"the worker was restarted during call(): {reason}", "")}
                    self.phase[env] = DONE
                    continue
                if dest == CLAIM:
                    dest = self._claimed_slot(handle, env)
                elif dest >= 0:
                    handle.plan_page = pending.page
                kind = NOTICE if pending.command == STEP else RESULT
                handle.plan[local] = (env, dest, kind, seed if pending.command == RESET else None)

    def _claimed_slot(self, handle: WorkerHandle, env: int) -> int:
        """The slot a dead worker claimed for env and never filled (the restart fills it), else CLAIM."""
        for page in {self.buffers.filling} | ({self.draining} if self.draining is not None else set()):
            claimed = self.buffers.claimed(page)
            hole = np.flatnonzero((self.buffers.arrays[f"page{page}/env"][:claimed] == env)
                                  & ~self.page_done[page][:claimed])
            if len(hole):
                handle.plan_page = page
                return int(hole[0])
        return CLAIM

    def _send_plan(self, handle: WorkerHandle) -> None:
        """Queue the reset of a (re)started worker's instances, as planned, right behind its start: the
        worker reads it before any command sent to it later."""
        plan, handle.plan = handle.plan, {}
        locals_ = sorted(plan)
        entries = np.zeros(len(locals_), ENTRY)
        entries["instance"] = locals_
        entries["env"] = [plan[i][0] for i in locals_]
        entries["dest"] = [plan[i][1] for i in locals_]
        seeds = [plan[i][3] if plan[i][3] is not None else self._restart_seed(handle, i) for i in locals_]
        options = [self.last_options[plan[i][0]] if plan[i][0] >= 0 else None for i in locals_]
        kinds = [plan[i][2] for i in locals_]
        page = self.buffers.filling if handle.plan_page is None else handle.plan_page
        handle.plan_page = None
        handle.send(RESET, entries, self.vc.reset_timeout_s * len(locals_), page, 1, dumps((seeds, options, kinds)),
                    seeds, restart=True)

    def _restart_seed(self, handle: WorkerHandle, local: int) -> int | None:
        if self.vc.seed is None:
            return None
        entropy = [self.vc.seed, int(handle.instances[local]), handle.restarts]
        return int(np.random.SeedSequence(entropy).generate_state(1)[0])

    def _forget_display(self, handle: WorkerHandle, wait_s: float | None = None) -> bool:
        """A worker that dies by SIGKILL takes its Xvfb along, which cannot remove its socket: do it.
        False while its Xvfb still runs after wait_s (default: the display module's grace period)."""
        if not handle.facts.get("display"):
            return True
        from .display import GONE_WAIT_S, remove_stale_display_files

        return remove_stale_display_files(handle.facts, GONE_WAIT_S if wait_s is None else wait_s)

    # ------------------------------------------------------------------ batches
    def in_flight(self) -> np.ndarray:
        return np.flatnonzero(self.phase == RUNNING)

    def done(self) -> np.ndarray:
        return np.flatnonzero(self.phase == DONE)

    def wait_until(self, ready: Callable[[], bool], timeout_s: float | None = None) -> bool:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while not ready():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            self.pump(left)
        return True

    def _flip(self) -> tuple[int, int]:
        """Close the filling page (claimed slots) and let the workers fill the other one."""
        upcoming = 1 - self.buffers.filling
        self.before_refill(upcoming)
        while (flipped := self.buffers.try_flip()) is None:
            self.pump(FLIP_RETRY_S)  # a worker holds the lock for a few microseconds
        self.replied[upcoming] = 0
        self.page_done[upcoming][:] = False
        return flipped

    def collect(self, ordered: bool, min_envs: int, timeout_s: float | None) -> Batch | None:
        """The next batch: all envs in flight (ordered) or at least min_envs of them in completion
        order. None if the timeout passed first."""
        page = self.buffers.filling
        if not self.wait_until(lambda: self.replied[page] >= min_envs, timeout_s):
            return None
        if ordered:  # a full batch: slot = env
            self._flip()
            envs, rows = np.arange(self.num_envs), self.num_envs
        else:
            closed, rows = self._flip()
            self.draining = closed
            self.wait_until(lambda: self.replied[closed] >= rows)
            self.draining = None
            envs = self.buffers.arrays[f"page{closed}/env"][:rows].astype(np.int64)
        return self._batch(page, rows, envs)

    def _batch(self, page: int, rows: int, envs: np.ndarray) -> Batch:
        flags = self.flags[envs]
        infos: list[dict | None] = [None] * rows
        errors = []
        reported = np.flatnonzero(flags & (HAS_PAYLOAD | RESTARTED | AUTORESET))  # the rest have no info
        for row, env in zip(reported.tolist(), envs[reported].tolist()):
            extra = self.extra.pop(env, None) or {}
            info = extra.get("info")
            if self.flags[env] & RESTARTED:
                info = {**(info or {}), "restarted": True, "restart_reason": self.restart_reason.pop(env, "")}
            if env in self.recycled and self.flags[env] & AUTORESET:
                self.recycled.discard(env)
                info = {**(info or {}), "recycled": True}
            if "error" in extra:
                message, trace = extra["error"]
                errors.append(WorkerError(env, message, trace))
            infos[row] = info
        widths = np.where((flags & ERROR) != 0, 0, self.width[envs])
        batch = Batch(page, rows, envs, widths, flags, infos, errors)
        self.phase[envs] = IDLE
        if self.vc.autoreset_mode == "next_step":
            self._after_episodes(np.sort(envs[self.over[envs]]))
        return batch

    def take_calls(self, envs: np.ndarray) -> dict[int, Any]:
        """Results of finished calls: value, or a WorkerError for a call that raised."""
        out: dict[int, Any] = {}
        for env in envs.tolist():
            extra = self.extra.pop(env, {})
            if "error" in extra:
                out[env] = WorkerError(env, *extra["error"])
            else:
                out[env] = extra.get("result")
        self.phase[envs] = IDLE
        return out

    def drain(self) -> None:
        """Finish everything in flight and discard the results (after an interrupted call)."""
        self.wait_until(lambda: not self.in_flight().size)
        if self.replied[self.buffers.filling]:
            closed, rows = self._flip()
            self.draining = closed
            self.wait_until(lambda: self.replied[closed] >= rows)
            self.draining = None
        for env in self.done().tolist():
            self.extra.pop(env, None)
        self.phase[:] = IDLE

    # ------------------------------------------------------------------ spares and recycling
    def _after_episodes(self, ended: np.ndarray) -> None:
        """Envs whose episode ended (in env order, so runs with one seed stay alike): move each to a
        spare instance, or to its recycled worker's replacement; count episodes per worker."""
        freed = []  # spares again once reset: queued after this batch, so no env gets one still resetting
        for env in ended.tolist():
            instance = int(self.env_inst[env])
            handle = self.inst_worker[instance]
            handle.episodes += 1
            self.episodes_total += 1
            target = self._takeover_instance(handle) if handle.retiring else None
            if target is None and self.spares:
                target = self.spares.popleft()
                if not handle.retiring:  # a retiring worker's instances serve no one again
                    freed.append(instance)
            elif target is not None:
                self.recycled.add(env)
                self.accounts[env][A_RECYCLES] += 1
            if target is not None:
                self.inst_env[instance], self.inst_env[target], self.env_inst[env] = -1, env, target
                self._full_entries = None
            if not handle.retiring:
                self._check_recycle(handle)
        self.spares.extend(freed)
        for handle in [h for h in self.workers if h.retiring and not (self.inst_env[h.instances] >= 0).any()]:
            self._retire(handle)

    @staticmethod
    def _takeover_instance(handle: WorkerHandle) -> int | None:
        new = handle.replacement
        if new is None or new.takes_over is not None or not new.reserve:  # not ready yet
            return None
        return new.reserve.popleft()

    def _check_recycle(self, handle: WorkerHandle) -> None:
        vc = self.vc
        episodes = vc.recycle_after_episodes
        due = episodes is not None and handle.episodes >= episodes * len(handle.instances)
        now = time.monotonic()
        if not due and vc.max_worker_rss_mb is not None and now - handle.rss_checked > RSS_CHECK_S:
            import psutil

            handle.rss_checked = now
            try:
                due = psutil.Process(handle.pid).memory_info().rss > vc.max_worker_rss_mb * (1 << 20)
            except psutil.Error:
                due = False
        if due:
            self._recycle(handle)

    def _recycle(self, handle: WorkerHandle) -> None:
        """Start a replacement beside the worker; its envs move over one by one at their next episode."""
        first = len(self.inst_env)
        new = self._add_worker(range(first, first + len(handle.instances)), None)
        new.spec = replace(new.spec, cpu_affinity=handle.spec.cpu_affinity, display=handle.spec.display)
        handle.retiring, handle.replacement, new.takes_over = True, new, handle
        log.info("recycling worker %d (%d episodes): starting worker %d", handle.spec.worker_index, handle.episodes,
                 new.spec.worker_index)
        new.plan = {local: (-1, HOLD, SPARE, None) for local in range(len(new.instances))}
        new.start(self.vc.start_timeout_s)
        self._send_plan(new)

    def _spares_ready(self, handle: WorkerHandle) -> None:
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
        self.workers.remove(handle)
        self.retired.append(handle)
        if handle.process is not None and handle.process.is_alive():
            handle.send(CLOSE, np.zeros(0, ENTRY), CLOSE_TIMEOUT_S)
        self.poller.remove(handle)  # its exit is expected: _reap_retired joins it, nothing restarts it

    def _reap_retired(self) -> None:
        """Join retired workers that have exited and clean up after their Xvfb, never waiting: the
        envs of other workers are being served meanwhile."""
        for handle in list(self.retired):
            if handle.process is not None and handle.process.is_alive():
                if handle.pending and time.monotonic() > handle.pending[0].deadline:
                    handle.kill()
                continue
            if handle.process is not None:
                handle.kill()
                handle.process = None
            if self._forget_display(handle, wait_s=0.0):  # its Xvfb may outlive it by a moment
                self.retired.remove(handle)

    # ------------------------------------------------------------------ shutdown
    def close(self) -> None:
        """Stop every worker (and its Xvfb): kill those with work in flight (their results would be
        discarded), ask the others to close. Bounded in time; idempotent."""
        if self.closed:
            return
        self.closed = True
        handles = self.workers + self.retired
        for handle in handles:
            if handle.pending and handle.process is not None:
                handle.kill()
            elif handle.process is not None and handle.process.is_alive():
                handle.send(CLOSE, np.zeros(0, ENTRY), CLOSE_TIMEOUT_S)
        deadline = time.monotonic() + CLOSE_TIMEOUT_S
        for handle in handles:
            if handle.process is not None:
                handle.process.join(max(0.0, deadline - time.monotonic()))
            handle.kill()
            handle.process = None
            self._forget_display(handle)
        for path in glob.glob(glob.escape(self.boot_prefix) + "*"):
            os.unlink(path)

    def totals(self) -> dict[str, np.ndarray]:
        """Per-env accounts as arrays, one per name of ACCOUNTS."""
        return dict(zip(ACCOUNTS, np.array(self.accounts, dtype=float).T))

    @property
    def worker_pids(self) -> list[int]:
        return [h.pid for h in self.workers if h.pid is not None]

    def worker_of(self, env: int) -> WorkerHandle:
        return self.inst_worker[int(self.env_inst[env])]
