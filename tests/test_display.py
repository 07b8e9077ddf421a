"""Per-worker X displays, with a real Xvfb."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from rlbench_vec.display import PER_PROCESS_ENV, check_display, open_display, start_xvfb
from rlbench_vec.errors import BackendUnavailableError, ConfigError

REPO = Path(__file__).resolve().parents[1]
needs_xvfb = pytest.mark.skipif(shutil.which("Xvfb") is None, reason="Xvfb is not installed (apt-get install xvfb)")

# A process that owns one display, like a worker: prints "<name> <xvfb pid>", closes it when stdin closes.
OWNER = textwrap.dedent(
    """
    import sys
    from rlbench_vec.display import open_display
    display = open_display(None, True, 0)
    print(display.name, display.process.pid, flush=True)
    sys.stdin.read()
    display.close()
    """
)


def alive(pid: int) -> bool:
    """Running, as opposed to gone or a zombie nobody reaped yet."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def wait_dead(pid: int, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def accepts_connections(name: str) -> bool:
    """The independent check: xdpyinfo connects and lists GLX, which CoppeliaSim needs."""
    result = subprocess.run(["xdpyinfo", "-display", name, "-queryExtensions"], capture_output=True, text=True)
    return result.returncode == 0 and "GLX" in result.stdout


def start_owners(count: int) -> list[tuple[subprocess.Popen, str, int]]:
    """Start `count` owners at once (so their Xvfbs race for display numbers), then read each."""
    owners = [
        subprocess.Popen(
            [sys.executable, "-c", OWNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        for _ in range(count)
    ]
    started = []
    for owner in owners:
        name, pid = owner.stdout.readline().split()
        started.append((owner, name, int(pid)))
    return started


@needs_xvfb
@pytest.mark.skipif(shutil.which("xdpyinfo") is None, reason="xdpyinfo is not installed (apt-get install x11-utils)")
def test_display_starts_accepts_connections_and_stops(monkeypatch):
    monkeypatch.delenv(PER_PROCESS_ENV, raising=False)
    display = open_display(None, True, 0)
    try:
        assert display.name.startswith(":")
        assert accepts_connections(display.name)
        pid = display.process.pid
        command = Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")
        for option in ("-displayfd", "-nolisten tcp", "-screen 0 1280x1024x24", "+extension GLX +render -noreset"):
            assert option in command
    finally:
        display.close()
    assert not alive(pid)
    assert not accepts_connections(display.name)
    display.close()  # idempotent


@needs_xvfb
def test_displays_started_at_once_by_several_processes_get_distinct_numbers():
    owners = start_owners(4)
    names = [name for _, name, _ in owners]
    try:
        assert len(set(names)) == len(names), names
    finally:
        for owner, _, _ in owners:
            owner.communicate("")
    for owner, _, pid in owners:
        assert owner.returncode == 0
        assert wait_dead(pid)


@needs_xvfb
def test_sigkilled_owner_takes_its_xvfb_with_it():
    [(owner, _, xvfb_pid)] = start_owners(1)
    assert alive(xvfb_pid)
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    assert wait_dead(xvfb_pid), "Xvfb outlived its SIGKILLed owner"


def test_missing_xvfb_gives_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv(PER_PROCESS_ENV, raising=False)
    for attempt in (lambda: check_display(None, True), lambda: open_display(None, True, 0)):
        with pytest.raises(BackendUnavailableError, match="apt-get install xvfb"):
            attempt()
    check_display(None, False)  # a backend that needs no display needs no Xvfb


def test_xvfb_that_fails_to_start_is_reported_with_its_output(monkeypatch, tmp_path):
    fake = tmp_path / "Xvfb"
    fake.write_text("#!/bin/sh\necho 'Fatal server error: no screens found' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    with pytest.raises(BackendUnavailableError, match="(?s)exited with code 1.*no screens found"):
        start_xvfb(timeout_s=10)


def test_existing_display_settings(monkeypatch):
    monkeypatch.setenv("DISPLAY", ":42")
    assert open_display("shared", True, 3).name == ":42"
    monkeypatch.setenv(PER_PROCESS_ENV, "0")
    shared = open_display(None, True, 0)
    assert shared.name == ":42" and shared.process is None
    shared.close()
    assert open_display([":0.0", ":0.1"], True, 1).name == ":0.1"  # e.g. one X screen per GPU
    assert open_display("gpuhost:1.2", True, 0).name == "gpuhost:1.2"
    assert open_display(None, False, 0) is None
    check_display([":0.0", "shared"], True)


def test_missing_display_variable_and_bad_names_fail_early(monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)
    with pytest.raises(BackendUnavailableError, match=r"\$DISPLAY is not set"):
        check_display("shared", True)
    monkeypatch.setenv(PER_PROCESS_ENV, "0")
    with pytest.raises(BackendUnavailableError, match=f"{PER_PROCESS_ENV}=0"):
        check_display(None, True)
    with pytest.raises(ConfigError, match="not an X display name"):
        check_display(["0.1"], True)
    with pytest.raises(ConfigError, match="none for env 2"):
        open_display([":0", ":1"], True, 2)
