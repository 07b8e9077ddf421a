"""scripts/install_coppeliasim.sh and the Docker images built with it and scripts/setup.sh. Nothing is downloaded
here: --dry_run prints the steps, and runs with stand-in commands exercise the real code paths. The images
themselves are built and run by scripts/docker_check.sh (minutes: not part of the suite)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

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


def test_system_packages_only_stops_before_the_downloads():
    result = install("--dry_run", "--system_packages_only")
    assert result.returncode == 0, result.stderr
    assert "apt-get install" in result.stdout
    assert not re.search(r"^\+ (curl|git|tar)\b|-m pip", result.stdout, re.M), result.stdout
    refused = install("--dry_run", "--system_packages_only", "--skip_system_packages")
    assert refused.returncode == 2 and "leave nothing to do" in refused.stderr


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


def dockerfile(name: str) -> str:
    return (REPO / "docker" / name).read_text()


def test_dockerfile_installs_with_the_script_and_runs_the_bench():
    text = dockerfile("Dockerfile")
    assert re.search(r"^FROM ubuntu:20\.04 AS system$", text, re.M)
    # the target that docker_check.sh builds: apt only, stopping before the first download
    system = text[:text.index("\nFROM system")]
    assert "install_coppeliasim.sh --system_packages_only" in system and "uv " not in system
    assert re.search(r"install_coppeliasim\.sh --skip_system_packages --root \"\$COPPELIASIM_ROOT\"", text)
    for variable in ("COPPELIASIM_ROOT=/opt/CoppeliaSim", "LD_LIBRARY_PATH=/opt/CoppeliaSim:/opt/CoppeliaSim/platforms",
                     "QT_QPA_PLATFORM_PLUGIN_PATH=/opt/CoppeliaSim", "QT_PLUGIN_PATH=/opt/CoppeliaSim"):
        assert variable in text
    # uv's standalone Python names the compiler cc only from uv 0.5.10 on (uv#9916)
    uv = re.search(r"^COPY --from=ghcr\.io/astral-sh/uv:(\d+)\.(\d+)\.(\d+) ", text, re.M)
    assert uv and tuple(map(int, uv.groups())) >= (0, 5, 10)
    assert re.search(r"uv venv --seed --python 3\.11 ", text)
    cmd = re.search(r"^CMD (\[.*\])$", text, re.M).group(1)
    assert '"-m", "rlbench_vec.bench", "--num_envs", "64", "--backend", "rlbench"' in cmd


def test_embedded_dockerfile_runs_the_bench_on_mujoco_with_extras_as_an_argument():
    text = dockerfile("embedded.Dockerfile")
    assert re.search(r"^FROM debian:bookworm$", text, re.M)
    assert re.search(r"^ARG EXTRAS=\"\"$", text, re.M) and '"/opt/rlbench_vec${EXTRAS:+[$EXTRAS]}"' in text
    cmd = re.search(r"^CMD (\[.*\])$", text, re.M).group(1)
    assert cmd == '["python", "-m", "rlbench_vec.bench", "--backend", "mujoco"]'


@pytest.mark.parametrize("name", ["Dockerfile", "embedded.Dockerfile"])
def test_both_images_share_the_base_steps_and_copy_what_the_build_context_lets_through(name):
    text = dockerfile(name)
    assert re.search(r"^RUN /opt/rlbench_vec/docker/install_base\.sh", text, re.M)
    assert re.search(r'^ENTRYPOINT \["/usr/bin/tini", "--"\]$', text, re.M)
    allowed = re.findall(r"^!(\S+)$", (REPO / ".dockerignore").read_text(), re.M)
    for copied in re.findall(r"^COPY (?!--from)(.+) \S+$", text, re.M):
        for path in copied.split():
            assert (REPO / path).exists(), f"{name} copies {path}, which the repository lacks"
            assert path in allowed, f"{name} copies {path}, which .dockerignore keeps out of the build context"


def test_setup_system_only_installs_the_system_packages_and_nothing_else(tmp_path):
    """The images' shared base step: apt-get (a stand-in here) and no virtual environment."""
    bin_dir, log = tmp_path / "bin", tmp_path / "calls.log"
    bin_dir.mkdir()
    for name in ("apt-get", "sudo", "python3"):
        body = '"$@"' if name == "sudo" else "true"
        (bin_dir / name).write_text(f"#!/bin/sh\necho \"{name} $*\" >> \"$LOG\"\n{body}\n")
        (bin_dir / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "LOG": str(log)}
    env.pop("VIRTUAL_ENV", None)
    setup = tmp_path / "scripts" / "setup.sh"  # a copy: it works in the folder above its own
    setup.parent.mkdir()
    shutil.copy(REPO / "scripts" / "setup.sh", setup)
    result = subprocess.run(["bash", str(setup), "--system_only"], capture_output=True, text=True, env=env,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    calls = log.read_text()
    assert re.search(r"apt-get install -y -qq --no-install-recommends xvfb .*libegl-mesa0 .*python3-venv", calls)
    assert "python3" not in calls.replace("python3-venv", "") and not (tmp_path / ".venv").exists()
    refused = subprocess.run(["bash", str(setup), "--frobnicate"], capture_output=True, text=True, env=env)
    assert refused.returncode == 2 and "unknown argument --frobnicate" in refused.stderr
