"""`evaluate --video N`: every env records its episodes (front camera) into a scratch folder, and the first N
episodes of each task are kept as DIR/videos/{task}_ep{k:03d}.mp4 (the others deleted): an env's files, in
their numbers' order, are the episodes it started, in order."""

from __future__ import annotations

import collections
import shutil
from pathlib import Path
from typing import Any

from ..worker.video import video_prefix


class Videos:
    def __init__(self, out: Path, count: int):
        self.count = count
        self.folder = out / "videos"
        self.raw = self.folder / "scratch"
        self.order: dict[int, list[Any]] = collections.defaultdict(list)  # per env, the episodes it started
        if self.wanted:
            shutil.rmtree(self.raw, ignore_errors=True)  # what a stopped run left
            self.raw.mkdir(parents=True)

    @property
    def wanted(self) -> bool:
        return self.count > 0

    def started(self, env_id: int, planned: Any) -> None:
        if self.wanted:
            self.order[env_id].append(planned)

    def keep(self) -> None:
        """After the vector env closed (its files are complete): keep the wanted episodes, delete the rest."""
        if not self.wanted:
            return
        for env_id, episodes in self.order.items():
            files = sorted(self.raw.glob(f"{video_prefix(env_id)}_ep*_front.mp4"))
            for path, planned in zip(files, episodes):
                if planned.episode < self.count:
                    path.replace(self.folder / f"{planned.task}_ep{planned.episode:03d}.mp4")
        self.order.clear()
        shutil.rmtree(self.raw, ignore_errors=True)  # the next vector env's workers make it again
