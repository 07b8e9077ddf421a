"""What the bench measures besides throughput: CPU seconds, memory (RSS, shared block, GPU)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
import psutil

from ..vector_env import RLBenchVectorEnv

MB = 1 << 20


def gpu_used_mb(device: str | None) -> float | None:
    """Memory in use on a CUDA device by every process (torch's view of cudaMemGetInfo), else None."""
    if device is None or not device.startswith("cuda"):
        return None
    import torch

    free, total = torch.cuda.mem_get_info(torch.device(device))
    return (total - free) / MB


@dataclass
class CpuClock:
    """CPU seconds of the main process, the workers and their helpers (Xvfb, ffmpeg) over a window."""

    main: psutil.Process = field(default_factory=psutil.Process)
    start: dict[int, float] = field(default_factory=dict)

    @staticmethod
    def seconds(process: psutil.Process) -> float:
        t = process.cpu_times()
        return t.user + t.system + t.children_user + t.children_system

    def sample(self, worker_pids: list[int]) -> dict[int, float]:
        out = {}
        for pid in worker_pids:
            try:
                worker = psutil.Process(pid)
                for process in (worker, *worker.children(recursive=True)):
                    out[process.pid] = self.seconds(process)
            except psutil.NoSuchProcess:
                continue
        return out

    def begin(self, worker_pids: list[int]) -> None:
        psutil.cpu_percent()  # starts the machine-wide window
        self.start = {0: self.seconds(self.main), **self.sample(worker_pids)}

    def end(self, worker_pids: list[int], elapsed: float) -> dict[str, float]:
        main = self.seconds(self.main) - self.start[0]
        workers = sum(s - self.start.get(pid, 0.0) for pid, s in self.sample(worker_pids).items())
        return {
            "cpu_main_cores": main / elapsed,
            "cpu_workers_cores": workers / elapsed,
            "cpu_machine_percent": psutil.cpu_percent(),
        }


def memory(env: RLBenchVectorEnv) -> dict[str, float]:
    """RSS of the main process and of each worker (shared-memory pages a worker touched count in its
    RSS too), and the size of the shared block."""
    workers = []
    for pid in env.worker_pids:
        try:
            workers.append(psutil.Process(pid).memory_info().rss / MB)
        except psutil.NoSuchProcess:
            continue
    shm_path = os.path.join("/dev/shm", env.shm_name or "")
    return {
        "rss_main_mb": psutil.Process().memory_info().rss / MB,
        "rss_worker_mb_mean": float(np.mean(workers)) if workers else 0.0,
        "rss_worker_mb_max": float(np.max(workers)) if workers else 0.0,
        "shm_mb": os.stat(shm_path).st_size / MB if os.path.exists(shm_path) else 0.0,
    }
