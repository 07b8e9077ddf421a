"""Where a worker's results go and how they are reported: the slots of a command's entries (fixed,
or claimed in completion order), one copy of their outcomes into the page, their observations
written by the group, and the reply's records, unless the reply is plain (see protocol).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from .backends.base import EnvGroup
from .protocol import CLAIM, EPISODE_OVER, ERROR, HAS_PAYLOAD, NO_RECORDS, RECORD_FIELDS
from .shm import SharedBuffers

REWARD, TERMINATED, TRUNCATED, EXECUTED = range(4)  # rows of a slot's `outcome` block (4, max_chunk)


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


class Placement:
    """Where some of a command's results go: the positions written to one page and their slots, and
    the rows to copy them to (a slice when the slots are consecutive, the usual case)."""

    __slots__ = ("page", "positions", "slots", "rows", "claimed")

    def __init__(self, page: int, positions: list[int], slots: list[int], claimed: bool):
        self.page, self.positions, self.slots, self.claimed = page, positions, slots, claimed
        first = slots[0]
        consecutive = slots == list(range(first, first + len(slots)))
        self.rows: Any = slice(first, first + len(slots)) if consecutive else np.array(slots)


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

    def place(self, page: int, entries: np.ndarray) -> list[Placement]:
        """Each entry's slot: its fixed destination on `page`, or the next free slots of the filling
        page (claimed together, so consecutive). Entries held (HOLD) go nowhere."""
        dest = entries["dest"].tolist()
        claims = [p for p, slot in enumerate(dest) if slot == CLAIM]
        placed = []
        if len(claims) < len(dest):
            fixed = [p for p, slot in enumerate(dest) if slot >= 0]
            if fixed:
                placed.append(Placement(page, fixed, [dest[p] for p in fixed], False))
        if claims:
            envs = entries["env"].tolist()
            claimed_page, first = self.buffers.claim(envs if len(claims) == len(dest) else [envs[p] for p in claims])
            placed.append(Placement(claimed_page, claims, list(range(first, first + len(claims))), True))
        return placed

    def observe(self, d: Delivery, entries: np.ndarray, placed: list[Placement], wanted: set[int] | None,
                 t: int | None = None) -> None:
        """Observations of the entries at `wanted` (None: all) into their slots: the result's, or (t)
        a chunk's sub-step t. A failure is reported as the entry's error."""
        start = time.perf_counter()
        for place in placed:
            positions, slots = place.positions, place.slots
            if wanted is not None:
                keep = [j for j, p in enumerate(positions) if p in wanted]
                positions, slots = [positions[j] for j in keep], [slots[j] for j in keep]
            if not positions:
                continue
            chosen = entries["instance"] if len(positions) == len(entries) else entries["instance"][positions]
            views = self.obs[place.page] if t is None or self.chunk_views is None else self.chunk_views[place.page][t]
            for j, error in self.group.observe(chosen, views, np.array(slots)).items():
                d.error(positions[j], error)
                if t is None:
                    d.flag(positions[j], EPISODE_OVER)
                    self.lost(int(chosen[j]))
        d.write_s += time.perf_counter() - start

    def deliver(self, d: Delivery, entries: np.ndarray, local: list[int], envs: list[int],
                placed: list[Placement], k: int, reset_s: list[float]) -> tuple[np.ndarray, dict | None, tuple]:
        """Write outcomes and observations of the entries with a destination. Returns the reply's
        records (none when plain), payload, and a plain reply's (page, first claimed slot, exec
        seconds, write seconds)."""
        m = len(local)
        for place in placed:
            block = self.block[:m] if len(place.positions) == m else self.block[place.positions]
            self.outcome[place.page][place.rows, :, :k] = block[:, :, :k]
        self.observe(d, entries, placed, set(range(m)) - d.blind if d.blind else None)
        if d.plain and len(placed) == 1 and len(placed[0].positions) == m:
            place = placed[0]
            return NO_RECORDS, None, (place.page, place.slots[0] if place.claimed else CLAIM, sum(d.exec_s),
                                      d.write_s)
        where = {p: (slot, place.page) for place in placed for p, slot in zip(place.positions, place.slots)}
        write_share = d.write_s / max(1, len(where))
        rows = []
        for p, i in enumerate(local):
            slot, page = where.get(p, (-1, 0))
            flags = d.flags[p] | (HAS_PAYLOAD if p in d.extra else 0)
            rows.append((envs[p], slot, page, flags, d.executed[p], d.exec_s[p], write_share if p in where else 0.0,
                         reset_s[i]))
            reset_s[i] = 0.0
        records = np.array(rows, np.float64).reshape(-1, len(RECORD_FIELDS))
        return records, {envs[p]: extra for p, extra in d.extra.items()} or None, (0, CLAIM, 0.0, 0.0)
