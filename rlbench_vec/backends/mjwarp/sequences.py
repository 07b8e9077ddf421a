"""The batched simulator's launch sequences, replayed as captured graphs (CUDA graphs on a GPU,
warp's recorded launches on the CPU).

A sequence is a list of pieces, each a profile phase and the launches it makes. Normally a sequence
is one graph; when profiling, each piece is a graph of its own, timed by the PhaseTimer around its
replay (a few more graph launches per step, and no timing code inside the graphs).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import warp as wp

from .profile import PhaseTimer

Pieces = list[tuple[str, Callable[[], None]]]  # (profile phase, launches), in order


class Sequences:
    """Named sequences on one device and stream (None: warp's CPU device), optionally profiled."""

    def __init__(self, sequences: dict[str, Pieces], device: wp.Device, stream: wp.Stream | None,
                 profile: PhaseTimer | None):
        self.sequences, self.device, self.stream, self.profile = sequences, device, stream, profile
        self.graphs: dict[str, list[Any]] = {}

    def run_uncaptured(self, names: Iterable[str]) -> None:
        """Launch these sequences from Python (compiles and loads their kernels before capture)."""
        for name in names:
            self._run(self.sequences[name])

    def _run(self, pieces: Pieces) -> None:
        with wp.ScopedDevice(self.device):
            for _, launches in pieces:
                launches()

    def capture(self) -> None:
        self.graphs = {name: self._capture_pieces(pieces) for name, pieces in self.sequences.items()}

    def _capture_pieces(self, pieces: Pieces) -> list[Any]:
        if self.profile is not None:
            return [self._capture([piece]) for piece in pieces]
        return [self._capture(pieces)]

    def _capture(self, pieces: Pieces) -> Any:
        with wp.ScopedCapture(device=self.device, stream=self.stream, force_module_load=False) as capture:
            for _, launches in pieces:
                launches()
        return capture.graph

    def launch(self, name: str) -> None:
        """Queue sequence `name`: its graphs (or its launches, when not captured), each piece timed
        when profiling."""
        pieces, graphs = self.sequences[name], self.graphs.get(name)
        if self.profile is None:
            self._replay(pieces, graphs)
            return
        for i, piece in enumerate(pieces):
            with self.profile.on_stream(piece[0], self.stream):
                self._replay([piece], None if graphs is None else graphs[i:i + 1])

    def _replay(self, pieces: Pieces, graphs: list[Any] | None) -> None:
        if graphs is None:
            self._run(pieces)
        else:
            for graph in graphs:
                wp.capture_launch(graph, stream=self.stream)

    def drop(self) -> None:
        self.graphs = {}
