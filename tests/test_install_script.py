"""scripts/install_coppeliasim.sh and the Docker image built with it. Nothing is downloaded here:
--dry_run prints the steps, and a run with stand-in commands exercises the real code path."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "install_coppeliasim.sh"
URL = "https://downloads.coppeliarobotics.com/V4_1_0/CoppeliaSim_Edu_V4_1_0_Ubuntu20_04.tar.xz"


def install(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **(env or {})})


def test_script_is_valid_bash():
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)
    if shutil.which("shellcheck"):
        subprocess.run(["shellcheck", str(SCRIPT)], check=True)


def test_dry_run_prints_every_step_and_changes_nothing(tmp_path):
    root = tmp_path / "CoppeliaSim"
    result = install("--dry_run", "--root", str(root), "--python", "/opt/venv/bin/python")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert not root.exists()
    steps = [
        r"\+ .*apt-get install -y --no-install-recommends .*\bxvfb\b.*\blibgl1-mesa-dri\b.*\blibxkbcommon-x11-0\b"
        r".*\blibraw1394-11 libmpfr6 libusb-1\.0-0 dbus-x11\b",
        rf"\+ curl -fL --retry 3 -o (\S+)/CoppeliaSim_Edu_V4_1_0_Ubuntu20_04\.tar\.xz {re.escape(URL)}",
        rf"\+ tar -xf \S+\.tar\.xz -C {re.escape(str(root))} --strip-components 1",
        rf"\+ write {re.escape(str(root))}/rlbench_env\.sh:\nexport COPPELIASIM_ROOT=\"{re.escape(str(root))}\"\n"
        r"export LD_LIBRARY_PATH=.*\$COPPELIASIM_ROOT:\$COPPELIASIM_ROOT/platforms\"\n"
        r"export QT_QPA_PLATFORM_PLUGIN_PATH=\"\$COPPELIASIM_ROOT\"\nexport QT_PLUGIN_PATH=\"\$COPPELIASIM_ROOT\"",
        r"\+ /opt/venv/bin/python -m pip install .*cffi",
        r"\+ git clone https://github\.com/stepjam/PyRep\.git (\S+)/PyRep",
        r"\+ git -C \S+/PyRep checkout --quiet [0-9a-f]{40}",
        r"\+ cd \S+/PyRep && env CC=gcc /opt/venv/bin/python -m pip install --no-build-isolation \.",
        r"\+ git clone https://github\.com/stepjam/RLBench\.git \S+/RLBench",
        r"\+ /opt/venv/bin/python -m pip install --no-deps \S+/RLBench",
        r"\+ /opt/venv/bin/python -m pip install .*pyquaternion.*gymnasium",
    ]
    position = 0
    for step in steps:  # each step present, in this order
        match = re.compile(step).search(out, position)
        assert match, f"missing (or out of order): {step}\n--- output ---\n{out}"
        position = match.end()
    assert "nothing was changed" in out


def test_without_system_packages_no_apt(tmp_path):
    result = install("--dry_run", "--skip_system_packages", "--root", str(tmp_path / "cs"))
    assert result.returncode == 0 and "apt-get" not in result.stdout and URL in result.stdout


def test_unknown_argument_is_refused():
    result = install("--frobnicate")
    assert result.returncode == 2 and "unknown argument" in result.stderr


def test_real_run_with_stand_in_commands(tmp_path):
    """curl, tar, git and python replaced by stubs that log: checks what --dry_run cannot (the env
    file written and usable, PyRep built from inside its checkout with gcc and the variables exported)."""
    bin_dir, log, root = tmp_path / "bin", tmp_path / "calls.log", tmp_path / "CoppeliaSim"
    bin_dir.mkdir()
    stubs = {
        "curl": 'while [ $# -gt 0 ]; do [ "$1" = -o ] && touch "$2"; shift; done',
        "tar": "true",
        "git": '[ "$1" = clone ] && mkdir -p "$3"; true',
        "python": 'echo "python cwd=$PWD root=$COPPELIASIM_ROOT qt=$QT_PLUGIN_PATH cc=$CC $*" >> "$LOG"',
    }
    for name, body in stubs.items():
        (bin_dir / name).write_text(f"#!/bin/sh\necho \"{name} $*\" >> \"$LOG\"\n{body}\n")
        (bin_dir / name).chmod(0o755)
    result = install("--skip_system_packages", "--root", str(root), "--python", str(bin_dir / "python"),
                     env={"PATH": f"{bin_dir}:{os.environ['PATH']}", "LOG": str(log)})
    assert result.returncode == 0, result.stderr
    assert f"source {root}/rlbench_env.sh" in result.stdout
    sourced = subprocess.run(
        ["bash", "-c", f'LD_LIBRARY_PATH=/x; source "{root}/rlbench_env.sh"; '
                       'echo "$COPPELIASIM_ROOT|$LD_LIBRARY_PATH|$QT_QPA_PLATFORM_PLUGIN_PATH|$QT_PLUGIN_PATH"'],
        capture_output=True, text=True, check=True).stdout.strip()
    assert sourced == f"{root}|/x:{root}:{root}/platforms|{root}|{root}"
    calls = log.read_text()
    assert re.search(rf"python cwd=\S+/PyRep root={re.escape(str(root))} qt={re.escape(str(root))} cc=gcc "
                     r"-m pip install --no-build-isolation \.", calls), calls
    assert "curl -fL --retry 3 -o" in calls and "tar -xf" in calls


def test_dockerfile_installs_with_the_script_and_runs_the_bench():
    dockerfile = (REPO / "docker" / "Dockerfile").read_text()
    assert re.search(r"^FROM ubuntu:20\.04$", dockerfile, re.M)
    assert re.search(r"RUN /tmp/install_coppeliasim\.sh --root \"\$COPPELIASIM_ROOT\"", dockerfile)
    for variable in ("COPPELIASIM_ROOT=/opt/CoppeliaSim", "LD_LIBRARY_PATH=/opt/CoppeliaSim:/opt/CoppeliaSim/platforms",
                     "QT_QPA_PLATFORM_PLUGIN_PATH=/opt/CoppeliaSim", "QT_PLUGIN_PATH=/opt/CoppeliaSim"):
        assert variable in dockerfile
    # uv's standalone Python names the compiler cc only from uv 0.5.10 on (uv#9916)
    uv = re.search(r"^COPY --from=ghcr\.io/astral-sh/uv:(\d+)\.(\d+)\.(\d+) ", dockerfile, re.M)
    assert uv and tuple(map(int, uv.groups())) >= (0, 5, 10)
    assert re.search(r"uv venv --seed --python 3\.11 ", dockerfile)
    cmd = re.search(r"^CMD (\[.*\])$", dockerfile, re.M).group(1)
    assert '"-m", "rlbench_vec.bench", "--num_envs", "64", "--backend", "rlbench"' in cmd
    for copied in re.findall(r"^COPY (?!--from)(.+) \S+$", dockerfile, re.M):
        for path in copied.split():
            assert (REPO / path).exists(), f"the Dockerfile copies {path}, which the repository lacks"

