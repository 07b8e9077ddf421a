"""What every command line shares (rlbench_vec.cli), through the real commands: bad input said in one line
with exit status 2 (its traceback only with --debug), counts that must be positive refused by the parser,
and SIGTERM ending a command as Ctrl-C does."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import communicate_or_explain

ROOT = Path(__file__).resolve().parents[1]
BENCH = [sys.executable, "-m", "rlbench_vec.bench", "--quiet", "--steps", "2"]
COLLECT = [sys.executable, "-m", "rlbench_vec.collect", "--episodes_per_task", "1", "--backend", "mujoco"]


def run(command: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("flags, message", [
    (["--task", "open_jar", "--backend", "mujoco"], "'open_jar' is an RLBench task that the mujoco backend does not"),
    (["--num_envs", "0"], "argument --num_envs: must be an integer >= 1, got 0"),
    (["--num_envs", "-3"], "argument --num_envs: must be an integer >= 1, got -3"),
    (["--image_size", "0", "0"], "argument --image_size: must be an integer >= 1, got 0"),
    (["--min_envs", "0"], "argument --min_envs: must be an integer >= 1, got 0"),
    (["--steps", "two"], "argument --steps: 'two' is not an integer"),
    (["--spare_envs", "-1"], "argument --spare_envs: must be an integer >= 0, got -1"),
    (["--backend_options", "{bad"], "argument --backend_options: '{bad' is not JSON (Expecting property name"),
    (["--backend_options", "[1]"], "argument --backend_options: '[1]' is JSON but not an object: give an object"),
])
def test_the_bench_says_bad_input_in_one_line(flags, message):
    done = run([*BENCH, "--backend", "synthetic", *flags])
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("python -m rlbench_vec.bench: error: "), done.stderr
    assert message in done.stderr
    assert done.stdout == ""


def test_a_misspelt_task_is_the_bench_s_only_line_even_with_its_progress_bar():
    """No progress bar drawn before the error, no notice of the default backend: the error alone."""
    done = run([sys.executable, "-m", "rlbench_vec.bench", "--steps", "2", "--task", "opn_drawer"])
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("python -m rlbench_vec.bench: error: unknown task 'opn_drawer'"), done.stderr
    assert "Closest tasks here: 'open_drawer'" in done.stderr and done.stderr.count("\n") == 1, done.stderr


@pytest.mark.parametrize("flags, message", [
    (["--tasks", "open_jar"], "'open_jar' is an RLBench task"),
    (["--tasks", "reach_target", "--num_envs", "0"], "argument --num_envs: must be an integer >= 1, got 0"),
    (["--tasks", "reach_target", "--variations", "0"], "argument --variations: must be an integer >= 1, got 0"),
    (["--tasks", "reach_target", "--max_attempts", "0"], "argument --max_attempts: must be an integer >= 1"),
])
def test_collect_says_bad_input_in_one_line_and_writes_nothing(flags, message, tmp_path):
    out = tmp_path / "dataset"
    done = run([*COLLECT, *flags, "--out", str(out)])
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("python -m rlbench_vec.collect: error: ")
    assert message in done.stderr
    assert not out.exists()


def test_debug_shows_the_traceback():
    done = run([*BENCH, "--task", "open_jar", "--backend", "mujoco", "--debug"])
    assert done.returncode == 1
    assert "Traceback" in done.stderr and "ConfigError" in done.stderr


def test_an_interrupt_inside_a_string_exec_still_exits_with_130_under_python_m():
    environ = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "interrupt_in_exec"], cwd=ROOT / "tests" / "programs",
                          capture_output=True, text=True, timeout=60, env=environ)
    assert (done.returncode, done.stderr) == (130, "python -m interrupt_in_exec: interrupted.\n")


@pytest.mark.parametrize("signum, when, status, word", [
    (signal.SIGINT, "before_env", 130, "interrupted"), (signal.SIGINT, "between_steps", 130, "interrupted"),
    (signal.SIGTERM, "between_steps", 143, "terminated")])
def test_a_signal_inside_a_finalizer_still_ends_the_command_with_one_line(signum, when, status, word):
    # CPython swallows an exception raised in a finalizer; before the hook that re-arms it, the command ran on
    environ = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen([sys.executable, "-m", "interrupt_in_finalizer", signum.name, when],
                               cwd=ROOT / "tests" / "programs", env=environ, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    _, stderr = communicate_or_explain(process, 60, [])
    assert (process.returncode, stderr) == (status, f"python -m interrupt_in_finalizer: {word}.\n")


def test_the_package_loads_its_heavy_modules_on_first_use():
    """`import rlbench_vec` (what `python -m rlbench_vec.COMMAND` runs before the command's own module) loads
    neither numpy nor the engine, so the command holds the signals before anything heavy loads."""
    code = ("import sys, rlbench_vec; before = {'numpy', 'rlbench_vec.vector_env'} & set(sys.modules); "
            "rlbench_vec.RLBenchVectorEnv; print(sorted(before), 'rlbench_vec.vector_env' in sys.modules)")
    done = run([sys.executable, "-c", code])
    assert done.stdout.split() == ["[]", "True"], done.stderr


@pytest.mark.parametrize("signum, status, word", [(signal.SIGINT, 130, "interrupted"),
                                                  (signal.SIGTERM, 143, "terminated")])
def test_a_signal_while_a_command_loads_ends_it_with_one_line(signum, status, word):
    environ = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen([sys.executable, "-m", "slow_start"], cwd=ROOT / "tests" / "programs", env=environ,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stdout.readline() == "loading\n"
    process.send_signal(signum)
    _, stderr = communicate_or_explain(process, 30, [])
    assert (process.returncode, stderr) == (status, f"python -m slow_start: {word}.\n")


def holds_sigterm(pid: int) -> bool:
    """Whether the process has its own SIGTERM handler yet (/proc's caught-signals mask)."""
    with open(f"/proc/{pid}/status") as status:
        caught = next(line for line in status if line.startswith("SigCgt:")).split()[1]
    return bool(int(caught, 16) & 1 << (signal.SIGTERM - 1))


@pytest.mark.parametrize("signum, status, word", [(signal.SIGINT, 130, "interrupted"),
                                                  (signal.SIGTERM, 143, "terminated")])
def test_a_signal_as_the_bench_starts_ends_it_with_one_line(signum, status, word):
    """Signalled as soon as it holds SIGTERM (while its modules load), the bench says its one line."""
    process = subprocess.Popen([*BENCH, "--backend", "synthetic", "--steps", "100000"], cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not holds_sigterm(process.pid) and time.monotonic() < deadline:
        time.sleep(0.002)
    process.send_signal(signum)
    _, stderr = communicate_or_explain(process, 60, [])
    assert (process.returncode, stderr) == (status, f"python -m rlbench_vec.bench: {word}.\n")


def test_sigterm_stops_collect_with_one_line_that_says_how_to_resume(tmp_path):
    out = tmp_path / "dataset"
    command = [*COLLECT, "--tasks", "reach_target", "--episodes_per_task", "200", "--num_envs", "1",
               "--image_size", "16", "16", "--out", str(out)]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (out / "reach_target" / "variation0" / "episodes").is_dir() and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    _, stderr = communicate_or_explain(process, 60, [])
    assert process.returncode == 143
    assert "Traceback" not in stderr and "leaked" not in stderr
    assert stderr.strip().splitlines()[-1] == (
        f"terminated: run the same command again to resume ({out / 'collect_summary.json'}).")
