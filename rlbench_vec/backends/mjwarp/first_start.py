"""A task's first start on a machine: MuJoCo Warp's and this backend's kernels compile (minutes on a fresh
host, then cached under warp's kernel cache), and the worker says so before it begins.

Warp does not tell ahead whether a module is cached, so a marker per task and kernel-shaping configuration
is kept beside warp's cache (`<kernel cache>/rlbench_vec/`), written once a simulator of that task started:
absent, the start is taken for a compiling one. Its name digests what the kernels depend on: the task (its
model), the cameras and modalities rendered, the device kind, the versions of mujoco_warp, warp and mujoco,
and this package's simulator sources (backends/mujoco and backends/mjwarp), so an update or an emptied cache
announces the compile again (warp compiles a module's kernels together: the action modes share theirs).
`python -m rlbench_vec.warmup` starts each task ahead.

Imported in the worker only: it imports warp.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import warp

from ...config import EnvConfig

SOURCES = Path(__file__).resolve().parents[1]  # rlbench_vec/backends
PACKAGES = ("mujoco-warp", "warp-lang", "mujoco")
WARMUP = "python -m rlbench_vec.warmup --backend mjwarp --tasks ..."


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return ""


def marker(config: EnvConfig, device: str) -> Path:
    """The marker of a simulator of config's task (a config of one task), started on `device` ("cpu", "cuda:N")."""
    digest = hashlib.sha256()
    for part in (config.one_task, config.cameras, config.modalities, device.split(":")[0], *map(_version, PACKAGES)):
        digest.update(repr(part).encode())
    for folder in ("mujoco", "mjwarp"):
        for path in sorted((SOURCES / folder).rglob("*.py")):
            digest.update(path.read_bytes())
    warp.init()  # sets the kernel cache's path
    return Path(str(warp.config.kernel_cache_dir)) / "rlbench_vec" / f"{config.one_task}-{digest.hexdigest()[:16]}"


@contextmanager
def announced(config: EnvConfig, device: str, envs: int) -> Iterator[None]:
    """Around the start of the simulators of the tasks of config's first `envs` envs: where one starts for the
    first time here, say on stderr that its kernels compile, and afterwards how long the start took."""
    tasks = sorted({config.task_of(env) for env in range(envs)})
    markers = {task: marker(config.for_task(task), device) for task in tasks}
    new = [task for task, path in markers.items() if not path.exists()]
    if not new:
        yield
        return
    started = time.perf_counter()
    print(f"rlbench_vec: compiling mjwarp kernels for {', '.join(new)} (first start on this machine; minutes per "
          f"task, then cached; {WARMUP} does it ahead)", file=sys.stderr, flush=True)
    yield
    for task in new:
        markers[task].parent.mkdir(parents=True, exist_ok=True)
        markers[task].touch()
    print(f"rlbench_vec: mjwarp kernels for {', '.join(new)} ready in {time.perf_counter() - started:.0f} s",
          file=sys.stderr, flush=True)
