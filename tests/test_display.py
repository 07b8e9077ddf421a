"""Per-worker X displays with a real Xvfb: MIT cookies, the OpenGL self-test, the GPU request that
cannot be met, and the files a killed Xvfb leaves behind."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import psutil
import pytest
from conftest import file_identity

from rlbench_vec import display as display_module
from rlbench_vec.display import PER_PROCESS_ENV, check_display, open_display
from rlbench_vec.display.glcheck import NvidiaGpu
from rlbench_vec.display.xvfb import remove_stale_display_files, start_xvfb, sweep_stale_displays, x_connection_accepted
from rlbench_vec.errors import BackendUnavailableError, ConfigError

REPO = Path(__file__).resolve().parents[1]
FBO_PROGRAM = REPO / "tests" / "programs" / "glx_fbo_readback.py"
needs_xvfb = pytest.mark.skipif(shutil.which("Xvfb") is None, reason="Xvfb is not installed (apt-get install xvfb)")
needs_xdpyinfo = pytest.mark.skipif(shutil.which("xdpyinfo") is None, reason="apt-get install x11-utils")

# A process that owns one display, like a worker: prints its facts, closes it when stdin closes.
OWNER = textwrap.dedent(
    """
    import json, sys
    from rlbench_vec.display import open_display
    display = open_display(None, True, 0)
    print(json.dumps(display.facts()), flush=True)
    sys.stdin.read()
    display.close()
    """
)


@pytest.fixture(autouse=True)
def restore_environ():
    """open_display exports DISPLAY, XAUTHORITY and the GLX vendor into this process: undo it."""
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


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


def leftovers(facts: dict) -> list[str]:
    """The files of an own display that exist: its socket (the very file it had when `own_facts` read it:
    another program's Xvfb may take the number once ours is gone), its Xauthority directory, and a lock
    file (none: with -displayfd, Xvfb takes none)."""
    number = facts["display"][1:]
    socket = f"/tmp/.X11-unix/X{number}"
    left = [path for path in (facts["display_dir"], f"/tmp/.X{number}-lock") if os.path.exists(path)]
    return ([socket] if file_identity(socket) == facts["socket_identity"] else []) + left


def own_facts(facts: dict) -> dict:
    """A display's facts with its socket's identity, read while its Xvfb runs."""
    return {**facts, "socket_identity": file_identity(f"/tmp/.X11-unix/X{facts['display'][1:]}")}


def xdpyinfo(name: str, xauthority: str) -> subprocess.CompletedProcess:
    """The independent check: xdpyinfo connects with that Xauthority file and lists the extensions."""
    return subprocess.run(["xdpyinfo", "-display", name, "-queryExtensions"], check=False,
                          capture_output=True, text=True, env={**os.environ, "XAUTHORITY": xauthority})


def start_owners(count: int) -> list[tuple[subprocess.Popen, dict]]:
    """Start `count` owners at once (so their Xvfbs race for display numbers), then read each."""
    owners = [
        subprocess.Popen(
            [sys.executable, "-c", OWNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        for _ in range(count)
    ]
    return [(owner, own_facts(json.loads(owner.stdout.readline()))) for owner in owners]


def window_depth(eye_z: float) -> float:
    """The FBO program's own projection formula (its module is loaded without running it)."""
    spec = importlib.util.spec_from_file_location("glx_fbo_readback", FBO_PROGRAM)
    program = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(program)
    return program.window_depth(eye_z)


def mesa_vendor_library() -> str | None:
    """Mesa's GLX vendor library of libglvnd, where installed."""
    cache = subprocess.run(["ldconfig", "-p"], check=False, capture_output=True, text=True).stdout
    return next((line.rsplit("=> ", 1)[1] for line in cache.splitlines() if "libGLX_mesa.so.0 " in line), None)


@needs_xvfb
@needs_xdpyinfo
def test_display_accepts_only_clients_with_its_cookie_and_leaves_nothing(monkeypatch, tmp_path):
    monkeypatch.delenv(PER_PROCESS_ENV, raising=False)
    display = open_display(None, True, 0)
    facts = own_facts(display.facts())
    try:
        assert display.name.startswith(":") and display.alive()
        for key, value in display.environ.items():
            assert os.environ[key] == value  # exported for the simulator the worker imports next
        xauthority = os.environ["XAUTHORITY"]
        assert (os.stat(xauthority).st_mode & 0o777) == 0o600
        granted = xdpyinfo(display.name, xauthority)
        assert granted.returncode == 0 and "GLX" in granted.stdout, granted.stderr
        stranger = tmp_path / "Xauthority"
        stranger.write_bytes(b"")
        refused = xdpyinfo(display.name, str(stranger))
        assert refused.returncode != 0 and "Authorization required" in refused.stderr
        number = int(display.name[1:])
        assert not x_connection_accepted(number, None)
        assert not x_connection_accepted(number, b"\0" * 16)
        command = Path(f"/proc/{display.process.pid}/cmdline").read_text().split("\0")
        assert command[command.index("-auth") + 1] == xauthority
        for option in ("-displayfd", "-nolisten tcp", "-screen 0 1280x1024x24", "+extension GLX +render -noreset"):
            assert option in " ".join(command)
        assert len(leftovers(facts)) == 2
    finally:
        display.close()
    assert not alive(facts["xvfb_pid"])
    assert leftovers(facts) == [], "Xvfb's socket or Xauthority outlived close()"
    display.close()  # idempotent


@needs_xvfb
def test_cpu_self_test_reports_llvmpipe_and_the_fallback_says_why(monkeypatch):
    cpu = open_display("xvfb-cpu", True, 0)
    try:
        facts = cpu.facts()
        assert facts["gl_mode"] == "mesa" and "llvmpipe" in facts["gl_renderer"] and facts["gl_direct"]
        assert os.environ["__GLX_VENDOR_LIBRARY_NAME"] == "mesa"
    finally:
        cpu.close()
    monkeypatch.setattr(display_module, "nvidia_gpus", list)  # as on this machine: no NVIDIA GPU
    auto = open_display(None, True, 0)
    try:
        facts = auto.facts()
        assert facts["gl_mode"] == "mesa" and "llvmpipe" in facts["gl_renderer"]
        assert "no NVIDIA GPU is visible" in facts["gl_fallback"]
    finally:
        auto.close()


def test_gpu_asked_where_there_is_none_fails_before_any_xvfb_saying_what_is_missing(monkeypatch):
    monkeypatch.setattr(display_module, "nvidia_gpus", list)
    monkeypatch.setattr(display_module, "nvidia_glx_library", lambda: None)
    for attempt in (lambda: check_display("xvfb-gpu", True), lambda: open_display("xvfb-gpu", True, 0)):
        with pytest.raises(BackendUnavailableError, match=r"(?s)/dev/nvidia0.*--gpus all.*libGLX_nvidia\.so\.0.*"
                                                          r"NVIDIA_DRIVER_CAPABILITIES"):
            attempt()
    check_display(["xvfb", "xvfb-cpu"], True)  # the other modes need Xvfb only


@needs_xvfb
def test_gpu_asked_but_llvmpipe_obtained_fails_at_start_and_auto_falls_back(monkeypatch, tmp_path):
    """A machine whose 'NVIDIA' GLX library is Mesa's: the self-test must see llvmpipe, not trust the name."""
    mesa = mesa_vendor_library()
    if mesa is None:
        pytest.skip("Mesa's GLX vendor library (libglx-mesa0) is not installed")
    (tmp_path / "libGLX_nvidia.so.0").symlink_to(mesa)
    monkeypatch.setenv("LD_LIBRARY_PATH", f"{tmp_path}:{os.environ.get('LD_LIBRARY_PATH', '')}")
    monkeypatch.setattr(display_module, "nvidia_gpus", lambda: [NvidiaGpu(0, "GPU-0", 0, "stand-in")])
    assert display_module.nvidia_glx_library() == str(tmp_path / "libGLX_nvidia.so.0")
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with pytest.raises(BackendUnavailableError, match=r"__GLX_VENDOR_LIBRARY_NAME=nvidia a GLX client got 'llvmpipe"):
        open_display("xvfb-gpu", True, 0)
    assert {p.pid for p in psutil.Process().children(recursive=True) if alive(p.pid)} <= before, "Xvfb left running"
    auto = open_display("xvfb", True, 0)
    try:
        facts = auto.facts()
        assert facts["gl_mode"] == "mesa" and "llvmpipe" in facts["gl_renderer"]
        assert "got 'llvmpipe" in facts["gl_fallback"]
        assert os.environ["__GLX_VENDOR_LIBRARY_NAME"] == "mesa"
    finally:
        auto.close()


@needs_xvfb
def test_displays_started_at_once_by_several_processes_get_distinct_numbers():
    owners = start_owners(4)
    names = [facts["display"] for _, facts in owners]
    try:
        assert len(set(names)) == len(names), names
    finally:
        for owner, _ in owners:
            owner.communicate("")
    for owner, facts in owners:
        assert owner.returncode == 0
        assert wait_dead(facts["xvfb_pid"])
        assert leftovers(facts) == []


@needs_xvfb
def test_sigkilled_owner_takes_its_xvfb_along_and_its_files_are_removed_after():
    [(owner, facts)] = start_owners(1)
    try:
        assert not remove_stale_display_files(facts, wait_s=0.0), "must not touch a running Xvfb's files"
        assert len(leftovers(facts)) == 2
    finally:
        owner.kill()
        owner.wait()
    assert wait_dead(facts["xvfb_pid"]), "Xvfb outlived its SIGKILLed owner"
    assert len(leftovers(facts)) == 2, "a SIGKILLed Xvfb leaves its socket (else this test proves nothing)"
    assert remove_stale_display_files(facts)
    assert leftovers(facts) == []


@needs_xvfb
def test_sweep_removes_what_owners_killed_before_reporting_left():
    [(owner, facts)] = start_owners(1)
    assert facts["display_dir"] not in sweep_stale_displays(), "the owner still runs"
    owner.kill()
    owner.wait()
    assert wait_dead(facts["xvfb_pid"])
    assert facts["display_dir"] in sweep_stale_displays()
    assert leftovers(facts) == []


@needs_xvfb
def test_alive_turns_false_when_the_xvfb_dies_and_close_still_cleans_up():
    display = start_xvfb()
    facts = own_facts(display.facts())
    os.kill(display.process.pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while display.alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not display.alive()
    assert len(leftovers(facts)) == 2
    display.close()
    assert leftovers(facts) == []


@needs_xvfb
def test_fbo_render_and_readback_program_draws_the_expected_image(tmp_path):
    """The GLX client scripts/glx_gpu_check.sh compares between Mesa and NVIDIA: colours and depths
    where the scene's geometry puts them (see its docstring), with Mesa here."""
    display = open_display("xvfb-cpu", True, 0)
    try:
        result = subprocess.run([sys.executable, str(FBO_PROGRAM), str(tmp_path), "--size", "256", "--frames", "2"],
                                check=False, capture_output=True, text=True, cwd=REPO,
                                env={**os.environ, "PYTHONPATH": str(REPO)})
    finally:
        display.close()
    assert result.returncode == 0, result.stderr
    info = json.loads(result.stdout)
    assert "llvmpipe" in info["renderer"] and info["frames_per_s"] > 0
    rgb, depth = np.load(tmp_path / "rgb.npy"), np.load(tmp_path / "depth.npy")
    assert rgb.shape == (256, 256, 3) and depth.shape == (256, 256)

    def pixel(x_ndc: float, y_ndc: float) -> tuple[int, int]:  # (row, column), rows top-down
        return round((1 - y_ndc) / 2 * 256 - 0.5), round((x_ndc + 1) / 2 * 256 - 0.5)

    corner, triangle, square, centre = (0, 0), pixel(-0.53, -0.53), pixel(0.55, 0.55), (128, 128)
    assert tuple(rgb[corner]) == (51, 102, 153) and depth[corner] == 1.0
    assert tuple(rgb[triangle]) == (255, 0, 0) and abs(depth[triangle] - window_depth(-2.5)) < 1e-4
    assert tuple(rgb[square]) == (0, 255, 0) and abs(depth[square] - window_depth(-4.5)) < 1e-4
    lit = rgb[centre].astype(int)
    assert lit[0] > lit[1] > lit[2] > 0 and abs(depth[centre] - window_depth(-2.0)) < 1e-3  # the sphere's front


def test_missing_xvfb_gives_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv(PER_PROCESS_ENV, raising=False)
    for attempt in (lambda: check_display(None, True), lambda: open_display(None, True, 0),
                    lambda: check_display("xvfb-cpu", False)):
        with pytest.raises(BackendUnavailableError, match="apt-get install xvfb"):
            attempt()
    check_display(None, False)  # a backend that needs no display needs no Xvfb


def test_xvfb_that_fails_to_start_is_reported_with_its_output(monkeypatch, tmp_path):
    fake = tmp_path / "Xvfb"
    fake.write_text("#!/bin/sh\necho 'Fatal server error: no screens found' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    own = set(Path("/tmp").glob("rlbench_vec-x11-*"))
    with pytest.raises(BackendUnavailableError, match="(?s)exited with code 1.*no screens found"):
        start_xvfb(timeout_s=10)
    assert set(Path("/tmp").glob("rlbench_vec-x11-*")) <= own, "its Xauthority directory was left behind"


def test_existing_display_settings(monkeypatch):
    monkeypatch.setenv("DISPLAY", ":42")  # no such server: the self-test reports it, the worker's simulator fails
    shared = open_display("shared", True, 3)
    assert shared.name == ":42" and shared.process is None and shared.alive()
    assert shared.facts()["gl_mode"] == "unchanged" and "no OpenGL context" in shared.facts()["gl_error"]
    shared.close()
    monkeypatch.setenv(PER_PROCESS_ENV, "0")
    assert open_display(None, True, 0).name == ":42"
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
    with pytest.raises(ConfigError, match="not an X display name or mode"):
        check_display(["0.1"], True)
    with pytest.raises(ConfigError, match="not an X display name or mode"):
        check_display("xvfb-gpus", True)
    with pytest.raises(ConfigError, match="none for worker 2"):
        open_display([":0", ":1"], True, 2)
