"""Where a worker's results go and how they are reported: the slots of a command's entries (fixed,
or claimed in completion order), one copy of their outcomes into the page, their observations
written by the group, and the reply's records, unless the reply is plain (see protocol).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..backends.base import EnvGroup
from ..wire.protocol import (
    CLAIM,
    ENV,
    EPISODE_OVER,
    ERROR,
    EXEC_S,
    EXECUTED_ACTIONS,
    FLAGS,
    HAS_PAYLOAD,
    MANY_RECORDS,
    NO_RECORDS,
    PAGE,
    RECORD_FIELDS,
    RESET_S,
    SLOT,
    WRITE_S,
)
from ..wire.shm import SharedBuffers

REWARD, TERMINATED, TRUNCATED, EXECUTED = range(4)  # rows of a slot's `outcome` block (4, max_chunk)
MAX_ROUTES = 1024
# a reply: its records (none: plain), its payload, and a plain reply's (page, first claimed slot, exec s, write s)
Reply = tuple[np.ndarray, dict | None, tuple]


class Delivery:
    """What one command delivers for m entries: flags, executed actions and seconds per entry, and
    payload pieces (info, error, final observation) for the entries that have any. `plain` stays
    True while there is nothing to report."""

    __slots__ = ("flags", "executed", "exec_s", "write_s", "blind", "extra", "plain")

    def __init__(self, m: int):
        self.flags = [0] * m
        self.executed = [0] * m
        self.exec_s = [0.0] * m
        self.write_s = 0.0  # observation writes of the whole command, shared by its entries
        self.blind: set[int] = set()  # its reset failed: nothing to observe
        self.extra: dict[int, dict[str, Any]] = {}
        self.plain = True

    def flag(self, position: int, flag: int) -> None:
        self.flags[position] |= flag
        self.plain = False

    def info(self, position: int) -> dict[str, Any]:
        self.plain = False
        return self.extra.setdefault(position, {}).setdefault("info", {})

    def error(self, position: int, error: tuple[str, str]) -> None:
        self.extra.setdefault(position, {})["error"] = error
        self.flag(position, ERROR)


class Route:
    """A command's entries as the worker uses them, parsed once: a full batch sends the same entries
    with every step, and a partial batch the same ones with every send to the same envs."""

    __slots__ = ("entries", "local", "envs", "instances", "env_rows", "positions", "claims", "claim_envs", "fixed",
                 "fixed_slots", "whole", "placements")

    def __init__(self, entries: np.ndarray):
        self.entries = entries.copy()  # the received frame's bytes are reused
        self.local: list[int] = entries["instance"].tolist()
        self.envs: list[int] = entries["env"].tolist()
        self.instances = np.array(self.local, np.int64)
        self.env_rows = _rows(self.envs)  # the actions' rows: a slice where the envs are consecutive
        self.positions = list(range(len(self.local)))
        dest = entries["dest"].tolist()
        self.claims = [p for p, slot in enumerate(dest) if slot == CLAIM]
        self.claim_envs = [self.envs[p] for p in self.claims]
        self.fixed = [p for p, slot in enumerate(dest) if slot >= 0]  # HOLD entries go nowhere
        self.fixed_slots = [dest[p] for p in self.fixed]
        self.whole = len(self.local) in (len(self.claims), len(self.fixed))  # one placement holds every entry
        self.placements: list[Placement | None] = [None, None]  # the fixed destinations' per page, made once

    def placement(self, page: int) -> Placement:
        placement = self.placements[page]
        if placement is None:
            placement = self.placements[page] = Placement(page, self.fixed, self.fixed_slots, False, self.instances)
        return placement


class Placement:
    """Where some of a command's results go: the positions written to one page, their instances and
    slots, and the rows to copy them to (a slice when the slots are consecutive, the usual case)."""

    __slots__ = ("page", "positions", "slots", "rows", "claimed", "instances", "slot_array")

    def __init__(self, page: int, positions: list[int], slots: list[int], claimed: bool, instances: np.ndarray):
        """instances: the local instance of every entry of the command."""
        self.page, self.positions, self.slots, self.claimed = page, positions, slots, claimed
        self.rows: Any = _rows(slots)
        self.instances = instances if len(positions) == len(instances) else instances[positions]
        self.slot_array = np.array(slots, np.int64)


def _plain_reply(place: Placement, exec_s: float, write_s: float) -> Reply:
    return NO_RECORDS, None, (place.page, place.slots[0] if place.claimed else CLAIM, exec_s, write_s)


def _rows(indices: list[int]) -> Any:
    """indices as an index: a slice where they are consecutive (cheaper to read and assign through)."""
    first = indices[0] if indices else 0
    if indices == list(range(first, first + len(indices))):
        return slice(first, first + len(indices))
    return np.array(indices, np.int64)


class Writer:
    """A worker's view of the result pages: observations (the shared block's, or the group's device
    pages), outcomes and env ids; and `block`, a command's outcomes by entry position before they
    are copied into the page."""

    def __init__(self, group: EnvGroup, buffers: SharedBuffers, max_chunk: int, every_step: bool,
                 device_pages: Sequence[Mapping[str, Mapping[str, Any]]] | None, lost: Callable[[int], None]):
        """every_step: chunk_obs="all". lost(instance): its final observation failed, its episode is over."""
        self.group, self.buffers, self.lost = group, buffers, lost
        self.block = np.zeros((group.size, 4, max_chunk))
        observations = device_pages or [
            {"obs": buffers.group(f"page{p}/obs"), "chunk": buffers.group(f"page{p}/chunk")} for p in (0, 1)]
        self.obs = [observations[p]["obs"] for p in (0, 1)]
        self.outcome = [buffers.arrays[f"page{p}/outcome"] for p in (0, 1)]
        # the observation after sub-step t of a chunk: one views dict per page and t, made once
        self.chunk_views = [
            [{key: view[:, t] for key, view in observations[p].get("chunk", {}).items()} for t in range(max_chunk)]
            for p in (0, 1)
        ] if every_step else None
        self.routes: dict[bytes, Route] = {}
        self.plain_block = np.zeros((group.size, 4))  # a plain step's outcomes: its rewards, executed, no episode end
        self.plain_block[:, EXECUTED] = 1.0

    def route(self, entries: np.ndarray) -> Route:
        """The parsed form of these entries, from the cache when the same entries came before."""
        key = entries.tobytes()
        route = self.routes.get(key)
        if route is None:
            if len(self.routes) >= MAX_ROUTES:  # partial batches of changing subsets: keep the cache small
                self.routes.clear()
            route = self.routes[key] = Route(entries)
        return route

    def place(self, page: int, route: Route) -> list[Placement]:
        """Each entry's slot: its fixed destination on `page`, or the next free slots of the filling
        page (claimed together, so consecutive). Entries held (HOLD) go nowhere."""
        placed = [route.placement(page)] if route.fixed else []
        if route.claims:
            claimed_page, first = self.buffers.claim(route.claim_envs)
            slots = list(range(first, first + len(route.claims)))
            placed.append(Placement(claimed_page, route.claims, slots, True, route.instances))
        return placed

    def observe(self, d: Delivery, placed: list[Placement], wanted: set[int] | None, t: int | None = None) -> None:
        """Observations of the entries at `wanted` (None: all) into their slots: the result's, or (t)
        a chunk's sub-step t. A failure is reported as the entry's error."""
        start = time.perf_counter()
        for place in placed:
            positions, instances, slots = place.positions, place.instances, place.slot_array
            if wanted is not None:
                keep = [j for j, p in enumerate(positions) if p in wanted]
                positions, instances, slots = [positions[j] for j in keep], instances[keep], slots[keep]
            if not positions:
                continue
            views = self.obs[place.page] if t is None or self.chunk_views is None else self.chunk_views[place.page][t]
            self._failed(d, positions, instances, self.group.observe(instances, views, slots), t)
        d.write_s += time.perf_counter() - start

    def _failed(self, d: Delivery, positions: list[int], instances: np.ndarray, errors: dict[int, tuple[str, str]],
                t: int | None) -> None:
        """Observations that could not be written: each is its entry's error, and a result's (t None)
        ends the episode."""
        for j, error in errors.items():
            d.error(positions[j], error)
            if t is None:
                d.flag(positions[j], EPISODE_OVER)
                self.lost(int(instances[j]))

    def deliver(self, d: Delivery, route: Route, placed: list[Placement], k: int, reset_s: list[float]) -> Reply:
        """Write outcomes and observations of the entries with a destination; the reply."""
        m = len(route.local)
        for place in placed:
            block = self.block[:m] if len(place.positions) == m else self.block[place.positions]
            self.outcome[place.page][place.rows, :, :k] = block[:, :, :k]
        self.observe(d, placed, set(range(m)) - d.blind if d.blind else None)
        return self.report(d, route, placed, reset_s)

    def deliver_plain(self, page: int, route: Route, reward: np.ndarray, exec_s: float, reset_s: list[float]) -> Reply:
        """deliver() for the usual step: one action per entry, all to one placement (route.whole), none
        with anything to report. Only an observation that fails to write makes the reply one with records."""
        (place,) = self.place(page, route)
        block = self.plain_block[:len(reward)]
        block[:, REWARD] = reward
        self.outcome[place.page][place.rows, :, 0] = block
        start = time.perf_counter()
        errors = self.group.observe(place.instances, self.obs[place.page], place.slot_array)
        write_s = time.perf_counter() - start
        if not errors:
            return _plain_reply(place, exec_s, write_s)
        m = len(route.local)
        d = Delivery(m)
        d.executed, d.exec_s, d.write_s = [1] * m, [exec_s / m] * m, write_s
        self._failed(d, place.positions, place.instances, errors, None)
        return self.report(d, route, [place], reset_s)

    def report(self, d: Delivery, route: Route, placed: list[Placement], reset_s: list[float]) -> Reply:
        """The reply for results already written: plain when nothing is to report, else a record per entry."""
        local, envs = route.local, route.envs
        m = len(local)
        if d.plain and len(placed) == 1 and len(placed[0].positions) == m:
            return _plain_reply(placed[0], sum(d.exec_s), d.write_s)
        if m >= MANY_RECORDS:
            records = self._records_of_many(d, route, placed, reset_s)
        else:
            where = {p: (slot, place.page) for place in placed for p, slot in zip(place.positions, place.slots)}
            write_share = d.write_s / max(1, len(where))
            rows = []
            for p, i in enumerate(local):
                slot, page = where.get(p, (-1, 0))
                flags = d.flags[p] | (HAS_PAYLOAD if p in d.extra else 0)
                rows.append((envs[p], slot, page, flags, d.executed[p], d.exec_s[p],
                             write_share if p in where else 0.0, reset_s[i]))
                reset_s[i] = 0.0
            records = np.array(rows, np.float64).reshape(-1, len(RECORD_FIELDS))
        return records, {envs[p]: extra for p, extra in d.extra.items()} or None, (0, CLAIM, 0.0, 0.0)

    @staticmethod
    def _records_of_many(d: Delivery, route: Route, placed: list[Placement], reset_s: list[float]) -> np.ndarray:
        """report()'s records for a command of many entries (a batched group's), by numpy."""
        records = np.zeros((len(route.local), len(RECORD_FIELDS)))
        records[:, ENV], records[:, SLOT] = route.envs, -1
        for place in placed:
            records[place.positions, SLOT], records[place.positions, PAGE] = place.slots, place.page
        flags = np.array(d.flags, np.int64)
        flags[list(d.extra)] |= HAS_PAYLOAD
        records[:, FLAGS], records[:, EXECUTED_ACTIONS], records[:, EXEC_S] = flags, d.executed, d.exec_s
        has_slot = records[:, SLOT] >= 0
        records[has_slot, WRITE_S] = d.write_s / max(1, int(np.count_nonzero(has_slot)))
        records[:, RESET_S] = [reset_s[i] for i in route.local]
        for i in route.local:
            reset_s[i] = 0.0
        return records
