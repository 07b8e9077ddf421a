"""Partial completion for a batched group (EnvGroup.partial_steps: the worlds of one GPU simulator,
each finishing its action at its own control step): the worker answers a step's envs as their
actions finish, and takes new steps in between.

A step of a partial batch (send/recv: its entries claim their slots) becomes a *flight*: its worlds
are started (`EnvGroup.start`), and every `advance` runs one control step of every world in an action
and delivers those done, in a PARTIAL reply, or the last ones in the command's OK reply. A step
that arrives meanwhile starts its worlds at once: they join at the next control step. Full batches
(`step()`: fixed slots) and chunks still run whole, as in Runner: their caller waits for every env.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..backends.base import EnvGroup, GroupStep
from ..wire.protocol import CLAIM, OK, PARTIAL, WorkerSpec
from ..wire.shm import SharedBuffers
from .delivery import Delivery, Route
from .runner import Runner

MAX_PATIENCE_S = 0.05  # the longest a control step waits for new actions while most worlds are idle

Answer = tuple[int, int, np.ndarray, dict | None, tuple]  # seq, status, records, payload, plain reply's fields


@dataclass
class Flight:
    """A step command whose worlds finish at their own pace: its entries, outcomes and reports by
    position, and how many are still to be answered."""

    seq: int
    page: int
    route: Route
    d: Delivery
    block: np.ndarray  # (m, 4, 1) outcomes by position, copied into the writer's block when delivered
    left: int = 0


class BatchedRunner(Runner):
    """Runner with partial completion (see module docstring)."""

    def __init__(self, group: EnvGroup, buffers: SharedBuffers, spec: WorkerSpec,
                 device_pages: list[dict[str, dict[str, Any]]] | None = None):
        super().__init__(group, buffers, spec, device_pages)
        self.flights: dict[int, Flight] = {}
        self.flying: dict[int, tuple[Flight, int]] = {}  # instance -> its flight and position
        self._control_step_s = 0.0

    def takes_partial(self, k: int, entries: np.ndarray) -> bool:
        """One action per entry, to claimed slots (a partial batch), no sub-step observations."""
        return k == 1 and self.out.chunk_views is None and bool((entries["dest"] == CLAIM).all())

    def patience_s(self) -> float:
        """How long to wait for new actions before the next control step: none while most worlds are in
        an action, else about a control step (idle worlds whose actions are on the way join it)."""
        return 0.0 if 2 * len(self.flying) >= self.group.size else min(self._control_step_s, MAX_PATIENCE_S)

    def start_step(self, seq: int, page: int, entries: np.ndarray) -> list[Answer]:
        route = self.out.route(entries)
        local = route.local
        m = len(local)
        flight = Flight(seq, page, route, Delivery(m), np.zeros((m, 4, 1)), left=m)
        active = self._autoreset(flight.d, flight.block, local, route.envs)
        self.flights[seq] = flight
        if active:
            rows = entries if len(active) == m else entries[active]
            self.group.start(rows["instance"], self.actions[rows["env"], 0])
            for p in active:
                self.flying[local[p]] = (flight, p)
        now = sorted(set(range(m)) - set(active))
        return [self._deliver(flight, now)] if now else []

    def advance(self) -> list[Answer]:
        """One control step of every world in an action; answer those done."""
        done, result = self.group.advance(None, control_steps=1)
        self._control_step_s = result.seconds
        finished: dict[int, tuple[Flight, list[int], list[int]]] = {}  # seq -> flight, positions, rows of result
        for j, instance in enumerate(done.tolist()):
            flight, p = self.flying.pop(instance)
            _, positions, rows = finished.setdefault(flight.seq, (flight, [], []))
            positions.append(p)
            rows.append(j)
        answers = []
        for flight, positions, rows in finished.values():
            part = GroupStep(result.reward[rows], result.terminated[rows],
                             {i: result.infos[j] for i, j in enumerate(rows) if j in result.infos},
                             {i: result.errors[j] for i, j in enumerate(rows) if j in result.errors},
                             result.seconds * len(rows) / len(done),
                             None if result.truncated is None else result.truncated[rows])
            local = flight.route.local
            ended = self._outcomes(flight.d, flight.block, 0, positions, local, part)
            if self.spec.video is not None:
                self._capture([local[p] for p in positions])
            if ended:
                self._end(flight.d, ended, local)
            answers.append(self._deliver(flight, positions))
        return answers

    def _deliver(self, flight: Flight, positions: list[int]) -> Answer:
        """Write these positions' results and answer them: OK when they are the flight's last."""
        positions = sorted(positions)
        m, whole = len(positions), len(positions) == len(flight.route.local)
        source = flight.d
        d = source if whole else Delivery(m)
        if not whole:
            d.flags = [source.flags[p] for p in positions]
            d.executed = [source.executed[p] for p in positions]
            d.exec_s = [source.exec_s[p] for p in positions]
            d.extra = {i: source.extra[p] for i, p in enumerate(positions) if p in source.extra}
            d.blind = {i for i, p in enumerate(positions) if p in source.blind}
            d.plain = False  # only a reply that answers the whole command may be plain
        self.block[:m, :, :1] = flight.block[positions]
        route = flight.route if whole else self.out.route(flight.route.entries[positions])
        records, payload, plain = self.out.deliver(d, route, self.out.place(flight.page, route), 1, self.reset_s)
        flight.left -= m
        if flight.left:
            return flight.seq, PARTIAL, records, payload, plain
        del self.flights[flight.seq]
        return flight.seq, OK, records, payload, plain
