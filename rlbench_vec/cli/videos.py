"""`evaluate --video N`: every env records its episodes (front camera) into a scratch folder, and the first N
episodes of each task are kept as DIR/videos/{task}_ep{k:03d}.mp4 (the others deleted): an env's files, in
their numbers' order, are the episodes it started, in order. Only an episode the log recorded keeps its video,
and only a whole mp4 (a full disk leaves none cut short, nor empty, under a final name)."""

from __future__ import annotations

import collections
import errno
import os
import shutil
import struct
from pathlib import Path
from typing import Any

from ..distributed import RankInfo
from ..worker.video import video_prefix
from .runs import stop_if_disk_full


def whole_mp4(path: Path) -> bool:
    """Whether the file is an mp4 written to its end: its top-level boxes fill it exactly and hold the index
    (moov), which the encoder writes last."""
    size, offset, boxes = path.stat().st_size, 0, set()
    with path.open("rb") as file:
        while offset < size:
            file.seek(offset)
            header = file.read(16)
            if len(header) < 8:
                return False
            length, kind = struct.unpack(">I4s", header[:8])
            if length == 1 and len(header) == 16:  # a 64-bit size follows
                length = struct.unpack(">Q", header[8:])[0]
            if length < 8:
                return False
            boxes.add(kind)
            offset += length
    return offset == size and b"moov" in boxes


class Videos:
    def __init__(self, out: Path, count: int):
        self.count = count
        self.folder = out / "videos"
        rank = RankInfo.from_env().rank
        self.raw = self.folder / ("scratch" if rank == 0 else f"scratch.rank{rank}")  # each rank's own, under torchrun
        self.order: dict[int, list[Any]] = collections.defaultdict(list)  # per env, the episodes it started
        self.recorded: set[Any] = set()
        if self.wanted:
            shutil.rmtree(self.raw, ignore_errors=True)  # what a stopped run left
            self.raw.mkdir(parents=True)

    @property
    def wanted(self) -> bool:
        return self.count > 0

    def started(self, env_id: int, planned: Any) -> None:
        if self.wanted:
            self.order[env_id].append(planned)

    def finished(self, planned: Any) -> None:
        """The episode is in the log: its video may be kept. The workers' encoders write beside the log and stop
        quietly on a full disk, so a full disk stops the run here, as a failed write of the log would."""
        if self.wanted and planned.episode < self.count:
            self.recorded.add(planned)
        if self.wanted and os.statvfs(self.folder).f_bavail == 0:
            stop_if_disk_full(f"[Errno {errno.ENOSPC}] {os.strerror(errno.ENOSPC)}: {self.folder}", self.folder.parent)

    def keep(self) -> None:
        """After the vector env closed (its files are complete): keep the wanted episodes, delete the rest."""
        if not self.wanted:
            return
        for env_id, episodes in self.order.items():
            files = sorted(self.raw.glob(f"{video_prefix(env_id)}_ep*_front.mp4"))
            for path, planned in zip(files, episodes):
                if planned in self.recorded and whole_mp4(path):
                    path.replace(self.folder / f"{planned.task}_ep{planned.episode:03d}.mp4")
        self.order.clear()
        self.recorded.clear()
        shutil.rmtree(self.raw, ignore_errors=True)  # the next vector env's workers make it again
