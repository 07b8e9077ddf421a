"""Shared fixtures: every vector env a test makes is closed, and must leave nothing behind."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys

import psutil
import pytest

from rlbench_vec import RLBenchVectorEnv
from rlbench_vec.backends.mujoco.backend import renderer_environ
from rlbench_vec.config import EnvConfig
from rlbench_vec.wire.shm import PREFIX, SHM_DIR

# Some test modules import libraries that import MuJoCo (torchrl.envs does) at collection; the tests
# that render in this process need it to load the headless renderer the backend would pick.
os.environ.update(renderer_environ(EnvConfig(backend="mujoco")))
# The Ctrl-C tests need SIGINT as Python sets it up in a foreground process: a shell starts a background
# job (`pytest &`, a CI runner's) with SIGINT ignored, which its children would inherit.
signal.signal(signal.SIGINT, signal.default_int_handler)


def needs(extra: str, *modules: str) -> pytest.MarkDecorator:
    """Skip unless `modules` import; the reason names the extra of README's table that brings them."""
    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    return pytest.mark.skipif(bool(missing), reason=extra_reason(extra, missing))


# two ranks on this machine (gloo on the CPU); the job's module or script and its flags follow
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]


def extra_reason(extra: str, missing: list[str]) -> str:
    how = "install it as docs/collect.md says" if extra == "lerobot" else f"pip install -e '.[{extra}]'"
    return f"needs {', '.join(missing)}: the {extra!r} extra ({how})"


def own_segments() -> set[str]:
    """Shared-memory segments created by this test process."""
    return {name for name in os.listdir(SHM_DIR) if name.startswith(f"{PREFIX}_{os.getpid()}_")}


def file_identity(path: str) -> tuple[int, int] | None:
    """Inode and change time of a file, or None: a file another program makes later at the same path differs."""
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return None
    return stat.st_ino, stat.st_ctime_ns


def live_children() -> list[psutil.Process]:
    return [
        p for p in psutil.Process().children(recursive=True) if p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    ]


def with_faulthandler() -> dict[str, str]:
    """An environment for a child Python (and its workers) that dumps every thread's stack on SIGABRT."""
    return {**os.environ, "PYTHONFAULTHANDLER": "1"}


def communicate_or_explain(process: subprocess.Popen, timeout: float, descendants: list[psutil.Process]) -> tuple:
    """process.communicate(timeout), or else a failure that says which of the process and its descendants were still
    running and where (SIGABRT makes a child started with `with_faulthandler()` print its stacks); all of them are
    killed first, so one hang fails one test and leaves nothing to trip the tests after it."""
    try:
        return process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        pass
    alive = [p for p in [psutil.Process(process.pid), *descendants] if p.is_running()]
    described = []
    for p in alive:
        try:
            described.append(f"{p.pid} {p.status()}: {' '.join(p.cmdline())}")
            p.send_signal(signal.SIGABRT)
        except psutil.Error:
            pass
    psutil.wait_procs(alive, timeout=5)
    for p in alive:
        try:
            p.kill()
        except psutil.Error:
            pass
    _, stderr = process.communicate()
    pytest.fail(f"still running {timeout} s on:\n" + "\n".join(described) + f"\nstderr's end:\n{stderr[-12000:]}")


@pytest.fixture
def make_env():
    """Build RLBenchVectorEnvs (synthetic backend unless told otherwise); close them after the test
    and check that no worker process and no shared-memory segment outlived them."""
    envs: list[RLBenchVectorEnv] = []
    segments_before = own_segments()  # a module's shared env may be open

    def factory(**kwargs) -> RLBenchVectorEnv:
        kwargs.setdefault("backend", "synthetic")
        env = RLBenchVectorEnv(**kwargs)
        envs.append(env)
        return env

    yield factory
    close_and_check(envs, segments_before)


def close_and_check(envs: list[RLBenchVectorEnv], segments_before: set[str]) -> None:
    """Close the envs; no worker process and no shared-memory segment made since `segments_before` (this
    process's segments before they were built) may outlive them."""
    pids = {pid for env in envs for pid in env.worker_pids}
    for env in envs:
        env.close()
    assert not own_segments() - segments_before, "shared memory outlived close()"
    leftover = [p.pid for p in live_children() if p.pid in pids]
    assert not leftover, f"worker processes outlived close(): {leftover}"


@pytest.fixture
def small_disk(tmp_path):
    """A 512 KiB tmpfs: a disk that fills after a few episodes."""
    mount = tmp_path / "small_disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mount)], capture_output=True,
                          text=True)
    if done.returncode:
        pytest.skip(f"cannot mount a small tmpfs here (mounting needs root): {done.stderr.strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=True)


@pytest.fixture(scope="session")
def stored_dataset(tmp_path_factory):
    """Test episodes as PerAct's are laid out: 3 episodes each of reach_target and push_button in their
    all_variations folders (variations 0, 1, 0), collected on mujoco at 16x16 (python -m rlbench_vec.collect
    --all_variations 1). Read only: a test that changes it works on a copy."""
    from rlbench_vec.collect import CollectConfig, collect

    root = tmp_path_factory.mktemp("stored") / "test"
    config = CollectConfig(tasks=("reach_target", "push_button"), episodes_per_task=3, variations=2,
                           all_variations=True, backend="mujoco", num_envs=2, image_size=(16, 16), out=str(root),
                           progress=False)
    assert collect(config)["episodes"]["written"] == 6
    assert collect(config)["episodes"]["skipped"] == 6  # a rerun finds them (each one's variation_number.pkl)
    return root
