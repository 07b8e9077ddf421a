"""Per-env video, written inside the worker and off the step's critical path.

`capture` renders each camera on the calling (simulator) thread, because the GL context belongs to
it, and hands the frames to a writer thread through a bounded queue; the thread encodes them to mp4
with imageio's ffmpeg plugin. The bound caps memory: when encoding falls behind, `capture` blocks
until the thread catches up, so no frame is ever dropped during a run.

File names (config.directory):
  per_episode=True   env{i:03d}_ep{n:05d}_{camera}.mp4   n counts this env's episodes
  per_episode=False  env{i:03d}_run{n:02d}_{camera}.mp4  one file per worker lifetime
Under torchrun (WORLD_SIZE > 1) names start with rank{r:03d}_, so ranks sharing a directory (one host,
or a shared file system across nodes) never collide. Files are never overwritten: n continues past
the files this env already has there, so a worker restarted after a crash, or a second run into the
same directory, appends new files.

A failing encoder (disk full, ffmpeg gone) stops this env's recording with a message on the worker's
stderr; it does not fail the step. `close` finishes the files within FLUSH_TIMEOUT_S (frames still
queued past that are dropped so the files stay valid) because the engine kills workers that take
longer to stop.
"""

from __future__ import annotations

import os
import queue
import re
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np

from ..config import VideoConfig
from ..distributed import RankInfo

FLUSH_TIMEOUT_S = 5.0  # well inside the engine's 10 s close deadline for a worker
QUALITY = 8  # imageio's 0..10 scale; 8 keeps rendered edges sharp at 128x128
_NEW_EPISODE, _STOP = object(), object()  # queue markers; frames travel as dicts


def video_prefix(env_index: int, info: RankInfo | None = None) -> str:
    """'env003', or 'rank001_env003' under a multi-rank launch."""
    info = info or RankInfo.from_env()
    prefix = f"env{env_index:03d}"
    return f"rank{info.rank:03d}_{prefix}" if info.world_size > 1 else prefix


def next_index(directory: str, prefix: str, tag: str) -> int:
    """The first file number after those already in `directory` for this prefix and tag."""
    pattern = re.compile(rf"^{re.escape(prefix)}_{tag}(\d+)_")
    taken = [int(m.group(1)) for m in map(pattern.match, os.listdir(directory)) if m]
    return max(taken, default=-1) + 1


class VideoRecorder:
    """Records config.cameras of one env. Built in the worker; the engine calls start_episode()
    and capture() after each reset, capture() after every executed action, close() at shutdown."""

    def __init__(self, config: VideoConfig, env_index: int):
        import imageio.v2 as imageio  # lazily: only recording workers pay for it
        import imageio_ffmpeg

        imageio_ffmpeg.get_ffmpeg_exe()  # fail at worker start, not at the first frame, if ffmpeg is missing
        self._imageio = imageio
        self.config = config
        self.env_index = env_index
        os.makedirs(config.directory, exist_ok=True)
        self.prefix = video_prefix(env_index)
        self.tag = "ep" if config.per_episode else "run"
        self.number = next_index(config.directory, self.prefix, self.tag)
        self.failed = False
        self._writers: dict[str, Any] = {}
        self._deadline = float("inf")  # set by close(): past it, queued frames are dropped
        self._queue: queue.Queue = queue.Queue(maxsize=config.queue_size)
        self._thread = threading.Thread(target=self._run, name=f"rlbench_vec-video-{env_index}", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ simulator thread
    def start_episode(self) -> None:
        if self.config.per_episode and not self.failed:
            self._queue.put(_NEW_EPISODE)

    def capture(self, render: Callable[[str], np.ndarray]) -> None:
        """Render every recorded camera now (render(camera) -> rgb) and queue the frames for encoding."""
        if self.failed:
            return
        frames = {camera: render(camera) for camera in self.config.cameras}
        self._queue.put(frames)

    def close(self) -> None:
        """Encode what is queued (within FLUSH_TIMEOUT_S), finish the files, stop the thread."""
        self._deadline = time.monotonic() + FLUSH_TIMEOUT_S
        try:
            self._queue.put(_STOP, timeout=FLUSH_TIMEOUT_S)
        except queue.Full:
            pass  # the thread is stuck inside ffmpeg; it is a daemon and dies with the worker
        self._thread.join(max(0.0, self._deadline - time.monotonic()) + 1.0)

    # ------------------------------------------------------------------ writer thread
    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                break
            if self.failed or (isinstance(item, dict) and time.monotonic() > self._deadline):
                continue  # keep draining so capture() never blocks on a dead writer
            try:
                if item is _NEW_EPISODE:
                    self._finish_files()
                else:
                    self._write(item)
            except Exception:
                self.failed = True
                print(f"rlbench_vec: video of env {self.env_index} stopped:\n{traceback.format_exc()}",
                      file=sys.stderr, flush=True)
        self._finish_files()

    def _write(self, frames: dict[str, np.ndarray]) -> None:
        for camera, frame in frames.items():
            writer = self._writers.get(camera)
            if writer is None:
                writer = self._writers[camera] = self._open(camera)
            writer.append_data(frame)

    def _open(self, camera: str):
        number = f"{self.number:05d}" if self.config.per_episode else f"{self.number:02d}"
        name = f"{self.prefix}_{self.tag}{number}_{camera}.mp4"
        return self._imageio.get_writer(
            os.path.join(self.config.directory, name),
            format="FFMPEG",
            mode="I",
            fps=self.config.fps,
            codec="libx264",
            quality=QUALITY,
            pixelformat="yuv420p",  # plays everywhere
            macro_block_size=2,  # yuv420p needs even sides; 16 would rescale 8..15-pixel multiples
            ffmpeg_log_level="error",
            output_params=["-threads", "1"],  # one encoder thread per file: many envs share the cores
        )

    def _finish_files(self) -> None:
        """Close the open files; the next episode (or run) gets the next number."""
        writers, self._writers = self._writers, {}
        if writers:
            self.number += 1
        for writer in writers.values():
            try:
                writer.close()
            except Exception:
                traceback.print_exc()
