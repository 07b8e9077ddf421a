"""Fault tolerance with real processes: crashes, hangs, backend errors, a killed main process."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import psutil
import pytest
from conftest import communicate_or_explain, file_identity, live_children, own_segments, with_faulthandler

from rlbench_vec import BackendUnavailableError, ClosedError, RestartBudgetExceeded, RLBenchVectorEnv, WorkerError
from rlbench_vec.wire.shm import SHM_DIR, pid_namespace

PROGRAM = Path(__file__).parent / "programs" / "own_env.py"


def zeros(n: int, k: int | None = None) -> np.ndarray:
    return np.zeros((n, 8) if k is None else (n, k, 8), np.float32)


def kill(env: RLBenchVectorEnv, i: int) -> None:
    os.kill(env.worker_pid(i), signal.SIGKILL)


def step_counts(obs) -> list[int]:
    return obs["task_low_dim_state"][:, 0].astype(int).tolist()


def test_killed_worker_during_step_is_replaced_and_others_continue(make_env):
    # steps cost 0.2 s so that the kill lands while the worker is busy with the step
    env = make_env(num_envs=3, envs_per_worker=1, cameras=("front",), backend_options={"step_cost_s": 0.2})
    env.reset(seed=0)
    for _ in range(3):
        env.step(zeros(3))
    old_pid = env.worker_pid(1)
    env.step_async(zeros(3))
    kill(env, 1)
    obs, reward, terminated, truncated, info = env.step_wait()
    assert truncated.tolist() == [False, True, False]
    assert info["restarted"].tolist() == [False, True, False]
    assert "SIGKILL" in info["restart_reason"][1]
    assert step_counts(obs) == [4, 0, 4]  # env 1 starts over; the others keep their episodes
    assert env.worker_pid(1) != old_pid
    obs, reward, terminated, truncated, info = env.step(zeros(3))
    assert info["autoreset"].tolist() == [False, True, False] and not truncated.any()
    assert step_counts(obs) == [5, 0, 5]
    obs, *_ = env.step(zeros(3))
    assert step_counts(obs) == [6, 1, 6]
    assert env.stats()["restarts"].tolist() == [0, 1, 0]


def test_many_random_kills_during_step_chunk_reset_and_recv(make_env):
    rng = random.Random(0)
    env = make_env(num_envs=4, envs_per_worker=1, cameras=(), max_chunk=4, max_restarts_per_env=100,
                   max_restarts_total=100,
                   backend_options={"step_cost_s": 0.05, "reset_cost_s": 0.2})  # kills land mid-command
    env.reset(seed=0)
    expected = [0] * 4
    kills = 0
    for round_ in range(8):  # each mode twice
        victim = rng.randrange(4)
        mode = ("step", "chunk", "reset", "recv")[round_ % 4]
        if mode == "reset":
            kill(env, victim)
            obs, info = env.reset()
            assert info["restarted"][victim]
            expected = [0] * 4
        elif mode == "recv":
            env.send(zeros(4))
            kill(env, victim)
            done = []
            while len(done) < 4:
                obs, reward, terminated, truncated, info = env.recv(min_envs=1)
                for row, i in enumerate(info["env_id"].tolist()):
                    assert truncated[row] == (i == victim)
                    expected[i] = 0 if i == victim else expected[i] + 1
                    assert int(obs["task_low_dim_state"][row, 0]) == expected[i]
                    done.append(i)
            # the victim's next step is its free autoreset
            obs, *_ = env.step(zeros(4))
            expected = [e + (i != victim) for i, e in enumerate(expected)]
        else:
            actions = zeros(4, 3) if mode == "chunk" else zeros(4)
            env.step_async(actions)
            kill(env, victim)
            obs, reward, terminated, truncated, info = env.step_wait()
            first = truncated[:, 0] if mode == "chunk" else truncated
            assert first.tolist() == [i == victim for i in range(4)]
            width = 3 if mode == "chunk" else 1
            expected = [0 if i == victim else e + width for i, e in enumerate(expected)]
            obs, *_ = env.step(zeros(4))
            expected = [e + (i != victim) for i, e in enumerate(expected)]
        kills += 1
        assert step_counts(obs) == expected, (round_, mode, victim)
    assert env.stats()["restarts"].sum() == kills


def test_worker_dead_while_idle_is_detected_and_reported_on_its_next_step(make_env):
    env = make_env(num_envs=2, envs_per_worker=1, cameras=())
    env.reset(seed=0)
    kill(env, 0)
    time.sleep(0.5)
    obs, reward, terminated, truncated, info = env.step(zeros(2))
    assert truncated.tolist() == [True, False] and info["restarted"][0]


def open_files() -> list[str]:
    return sorted(os.listdir("/proc/self/fd"))


def test_restarts_keep_the_main_process_files_level_and_close_gives_them_back(make_env):
    make_env(num_envs=1, cameras=()).close()  # once-per-process files (multiprocessing's tracker) open first
    before = open_files()
    env = make_env(num_envs=2, envs_per_worker=1, cameras=())
    env.reset(seed=0)
    running = len(open_files())
    for restarts in range(1, 4):
        kill(env, 0)
        time.sleep(0.2)
        env.step(zeros(2))  # sees the death and replaces the worker
        assert env.stats()["restarts"].tolist() == [restarts, 0]
        assert len(open_files()) == running, "a replaced worker's pipes and sentinel are closed"
    env.close()
    assert open_files() == before


def test_hanging_step_is_killed_at_the_deadline(make_env):
    env = make_env(num_envs=2, envs_per_worker=1, cameras=(), step_timeout_s=1.0)
    env.reset(seed=0)
    env.set_attr("hang_at_step", [None, 1])
    env.step(zeros(2))
    obs, reward, terminated, truncated, info = env.step(zeros(2))
    assert truncated.tolist() == [False, True]
    assert "no reply to step within 1.0 s" in info["restart_reason"][1]
    for _ in range(3):  # no desync: replies keep matching their commands
        obs, *_ = env.step(zeros(2))
    assert step_counts(obs) == [5, 2]


def test_hanging_reset_is_killed_at_the_deadline(make_env):
    env = make_env(num_envs=2, envs_per_worker=1, cameras=(), reset_timeout_s=1.0)
    env.reset(seed=0)
    env.set_attr("hang_on_reset", [True, False])
    obs, info = env.reset(seed=1)
    assert info["restarted"].tolist() == [True, False]
    obs, *_ = env.step(zeros(2))
    assert step_counts(obs) == [1, 1]


def test_backend_exception_reaches_the_user_with_traceback_and_env_index(make_env):
    env = make_env(num_envs=2, cameras=())
    env.reset(seed=0)
    env.set_attr("raise_at_step", [None, 0])
    with pytest.raises(WorkerError, match="env 1: RuntimeError: synthetic failure at step 0") as caught:
        env.step(zeros(2))
    assert caught.value.env_index == 1 and "synthetic.py" in caught.value.worker_traceback
    obs, reward, terminated, truncated, info = env.step(zeros(2))  # env 1 resets; nothing hangs
    assert info["autoreset"].tolist() == [False, True]


@pytest.mark.parametrize("envs_per_worker", [1, 2])
@pytest.mark.parametrize("partial", [False, True])
def test_observation_that_fails_to_write_reaches_the_user_and_ends_the_episode(make_env, envs_per_worker, partial):
    env = make_env(num_envs=2, envs_per_worker=envs_per_worker, cameras=())
    env.reset(seed=0)
    env.set_attr("raise_writing_at_step", [None, 2])
    env.step(zeros(2))
    if partial:
        env.send(zeros(2))
        with pytest.raises(WorkerError, match="env 1: RuntimeError: synthetic write failure after step 2") as caught:
            env.recv()
        # the error carries the whole batch, so a caller goes on with the other env
        assert sorted(caught.value.result[4]["env_id"].tolist()) == [0, 1]
        assert [error.env_index for error in caught.value.errors] == [1]
        env.send(zeros(2))
        obs, reward, terminated, truncated, info = env.recv()
        order = info["env_id"].argsort()
        obs, info = {key: value[order] for key, value in obs.items()}, {"autoreset": info["autoreset"][order]}
    else:
        with pytest.raises(WorkerError, match="env 1: RuntimeError: synthetic write failure after step 2"):
            env.step(zeros(2))
        obs, reward, terminated, truncated, info = env.step(zeros(2))
    assert info["autoreset"].tolist() == [False, True]  # env 1's episode ended with the failed write
    assert step_counts(obs) == [3, 0]


def test_crash_loop_turns_into_a_clear_error(make_env):
    env = make_env(num_envs=2, cameras=(), backend_options={"crash_at_step": 0}, max_restarts_per_env=2)
    env.reset(seed=0)
    with pytest.raises(RestartBudgetExceeded, match="max_restarts_per_env=2"):
        for _ in range(5):
            env.step(zeros(2))
    with pytest.raises(ClosedError):  # closed, not half-dead: nothing later can hang on it
        env.reset()


def test_worker_that_fails_to_start_raises_with_its_reason_and_leaves_nothing():
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with pytest.raises(
        WorkerError, match=r"env \d: worker failed to start: RuntimeError: synthetic simulator \d failed"
    ) as caught:
        RLBenchVectorEnv(num_envs=2, backend="synthetic", backend_options={"raise_on_start": True})
    assert "synthetic.py" in caught.value.worker_traceback
    assert not own_segments()
    time.sleep(0.5)
    assert {p.pid for p in live_children()} <= before


def test_missing_xvfb_is_named_before_any_worker_starts(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(BackendUnavailableError, match="xvfb"):
        RLBenchVectorEnv(num_envs=1, backend="synthetic", backend_options={"needs_display": True})


def start_program(kwargs: dict) -> tuple[subprocess.Popen, dict]:
    process = subprocess.Popen([sys.executable, str(PROGRAM), json.dumps(kwargs)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=with_faulthandler())
    line = process.stdout.readline()
    assert line, process.stderr.read()
    return process, json.loads(line)


def gone_within(pids: list[int], shm: str, seconds: float) -> tuple[list[int], bool]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        alive = [pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
        exists = os.path.exists(os.path.join(SHM_DIR, shm))
        if not alive and not exists:
            break
        time.sleep(0.1)
    return alive, exists


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGINT])
def test_main_process_death_or_ctrl_c_leaves_nothing(how):
    kwargs = {"num_envs": 2, "backend": "synthetic", "cameras": ["front"],
              "backend_options": {"needs_display": True, "step_cost_s": 0.001}}
    process, info = start_program(kwargs)
    assert len(info["xvfb"]) == 2, "each worker owns an Xvfb"
    descendants = [psutil.Process(pid) for pid in info["workers"] + info["xvfb"]]
    os.kill(info["pid"], how)
    _, stderr = communicate_or_explain(process, 30, descendants)
    alive, shm_exists = gone_within(info["workers"] + info["xvfb"], info["shm"], seconds=10)
    assert not alive, f"processes outlived the main process: {alive}"
    assert not shm_exists, "the shared-memory segment outlived the main process"
    if how == signal.SIGINT:
        assert "KeyboardInterrupt" in stderr and "leaked" not in stderr


def test_segments_of_dead_owners_are_swept_at_start(make_env):
    dead_pid = 2 ** 22 + os.getpid()  # above the largest pid_max: no such process; ours alone (a suite beside us)
    stale = os.path.join(SHM_DIR, f"rlbv_{dead_pid}_{pid_namespace()}_feedfacecafe")
    foreign = os.path.join(SHM_DIR, f"rlbv_{dead_pid}_{pid_namespace() + 1}_feedfacecafe")  # another container's
    for path in (stale, foreign):
        Path(path).write_bytes(b"\0" * 64)
    try:
        make_env(num_envs=1, cameras=())
        assert not os.path.exists(stale)
        assert os.path.exists(foreign), "a segment of another PID namespace is not ours to sweep"
    finally:
        Path(foreign).unlink(missing_ok=True)


def test_close_does_not_wait_for_a_step_in_flight(make_env):
    env = make_env(num_envs=2, cameras=(), backend_options={"step_cost_s": 60.0})
    env.reset(seed=0)
    env.send(zeros(2))
    started = time.monotonic()
    env.close()
    assert time.monotonic() - started < 30.0, "close() must not wait out a 60 s step"



@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 cores to leave one spare")
def test_workers_run_as_sched_batch_only_where_they_fill_this_ranks_cores(make_env, monkeypatch):
    """SCHED_BATCH keeps a woken worker from preempting the main process mid-batch, where the workers fill the
    cores; with cores to spare it only delays each wake-up (an evaluation at 1 env was 20% slower with it)."""
    spare = make_env(num_envs=1, cameras=())
    assert os.sched_getscheduler(spare.worker_pids[0]) == os.SCHED_OTHER
    monkeypatch.setenv("LOCAL_WORLD_SIZE", str(len(os.sched_getaffinity(0))))  # this rank's share: one core
    full = make_env(num_envs=1, cameras=())
    assert os.sched_getscheduler(full.worker_pids[0]) == os.SCHED_BATCH


# ---------------------------------------------------------------- groups, fail-fast start, issue 17


def test_a_crash_restarts_only_its_group_and_flags_each_of_its_envs(make_env):
    env = make_env(num_envs=4, envs_per_worker=2, cameras=(), backend_options={"step_cost_s": 0.1})
    env.reset(seed=0)
    assert len(env.worker_pids) == 2 and env.worker_pid(0) == env.worker_pid(1) != env.worker_pid(2)
    env.step(zeros(4))
    env.step_async(zeros(4))
    kill(env, 1)  # the worker of envs 0 and 1
    obs, reward, terminated, truncated, info = env.step_wait()
    assert truncated.tolist() == [True, True, False, False]
    assert info["restarted"].tolist() == [True, True, False, False]
    assert step_counts(obs) == [0, 0, 2, 2]
    obs, *_ = env.step(zeros(4))
    assert step_counts(obs) == [0, 0, 3, 3]  # the restarted envs' free autoreset, the others go on
    assert env.stats()["restarts"].tolist() == [1, 1, 0, 0]


NO_MAIN_GUARD = """
import numpy as np
from rlbench_vec import RLBenchVectorEnv

env = RLBenchVectorEnv(num_envs=2, backend="synthetic", cameras=())  # no `if __name__ == "__main__":`
env.reset(seed=0)
"""


def test_a_script_without_main_guard_fails_at_once_naming_the_fix(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(NO_MAIN_GUARD)
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "WorkerStartError" in result.stderr and 'if __name__ == "__main__":' in result.stderr
    assert "restarting" not in result.stderr, "a worker that never started is not restarted"


def test_a_restart_during_a_call_is_reported_with_the_envs_next_step(make_env):
    env = make_env(num_envs=2, envs_per_worker=1, cameras=(), step_timeout_s=1.0)
    env.reset(seed=0)
    env.step(zeros(2))
    os.kill(env.worker_pid(1), signal.SIGSTOP)  # hung: the call misses its deadline
    with pytest.raises(WorkerError, match="restarted during call"):
        env.get_attr("steps")
    obs, reward, terminated, truncated, info = env.step(zeros(2))
    assert truncated.tolist() == [False, True] and info["restarted"].tolist() == [False, True]
    assert "no reply to call" in info["restart_reason"][1]
    assert step_counts(obs) == [2, 0]


def test_a_restart_during_a_seeded_reset_reuses_that_seed(make_env):
    env = make_env(num_envs=2, envs_per_worker=1, cameras=(), backend_options={"reset_cost_s": 0.3})
    reference = make_env(num_envs=2, envs_per_worker=1, cameras=())
    expected, _ = reference.reset(seed=11)
    env.reset(seed=3)
    victim = env.worker_pid(1)
    killer = threading.Timer(0.1, os.kill, (victim, signal.SIGKILL))
    killer.start()
    obs, info = env.reset(seed=11)
    killer.join()
    assert info["restarted"].tolist() == [False, True]
    np.testing.assert_array_equal(obs["joint_positions"], expected["joint_positions"])


def test_ctrl_c_inside_step_leaves_the_env_usable(make_env):
    env = make_env(num_envs=2, envs_per_worker=1, cameras=(), backend_options={"step_cost_s": 0.5})
    env.reset(seed=0)
    interrupt = threading.Timer(0.1, os.kill, (os.getpid(), signal.SIGINT))
    interrupt.start()
    with pytest.raises(KeyboardInterrupt):
        env.step(zeros(2))
    interrupt.join()
    env.set_attr("step_cost_s", 0.0)
    obs, *_ = env.step(zeros(2))  # the interrupted step is finished and dropped first
    assert step_counts(obs) == [2, 2]


def x_socket(display: str) -> str:
    return f"/tmp/.X11-unix/X{display.lstrip(':')}"


def test_a_dead_display_is_a_worker_fault_seen_while_stepping(make_env):
    env = make_env(num_envs=2, envs_per_worker=1, cameras=(), backend_options={"needs_display": True})
    env.reset(seed=0)
    facts = env.worker_facts[0]
    dead_socket = file_identity(x_socket(facts["display"]))
    os.kill(facts["xvfb_pid"], signal.SIGKILL)
    time.sleep(1.5)  # the worker's watchdog looks every 0.5 s
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        *_, truncated, info = env.step(zeros(2))
        if truncated[0]:
            break
    assert info["restarted"][0] and "X display" in info["restart_reason"][0]
    sockets = {x_socket(f["display"]): file_identity(x_socket(f["display"])) for f in env.worker_facts}
    env.close()
    sockets[x_socket(facts["display"])] = dead_socket
    assert None not in sockets.values()
    # the same files, not merely the paths: another program's Xvfb may take a number ours freed
    left = [path for path, identity in sockets.items() if file_identity(path) == identity]
    assert not left, f"X sockets outlived their Xvfb: {left}"


# ---------------------------------------------------------------- eager resets, spares, recycling


@pytest.mark.parametrize("eager", [True, False])
def test_an_ended_episode_is_reset_before_the_next_command_when_eager(make_env, eager):
    env = make_env(num_envs=1, cameras=(), eager_reset=eager, backend_options={"episode_length": 2})
    env.reset(seed=0)
    env.step(zeros(1))
    *_, terminated, _, _ = env.step(zeros(1))
    assert terminated[0]
    time.sleep(0.3)  # an idle worker resets ahead; a command waiting would go first
    assert env.get_attr("steps") == ((0,) if eager else (2,))  # reset ahead, or left for the next step
    obs, _, _, _, info = env.step(zeros(1))
    assert info["autoreset"][0] and step_counts(obs) == [0]


def test_a_spare_takes_over_an_env_whose_episode_ended(make_env):
    env = make_env(num_envs=2, envs_per_worker=1, spare_envs=2, cameras=(), backend_options={"episode_length": 2})
    assert len(env.worker_pids) == 4
    env.reset(seed=0)
    first = [env.worker_pid(i) for i in range(2)]
    env.step(zeros(2))
    *_, terminated, _, _ = env.step(zeros(2))
    assert terminated.all()
    assert not {env.worker_pid(i) for i in range(2)} & set(first), "both envs moved to the spares"
    obs, _, _, _, info = env.step(zeros(2))
    assert info["autoreset"].all() and step_counts(obs) == [0, 0]
    obs, *_ = env.step(zeros(2))
    assert step_counts(obs) == [1, 1]


def test_recycled_workers_hand_their_envs_over_between_episodes(make_env):
    env = make_env(num_envs=2, envs_per_worker=1, cameras=(), recycle_after_episodes=1,
                   backend_options={"episode_length": 3, "step_cost_s": 0.02})
    env.reset(seed=0)
    old = set(env.worker_pids)
    expected, recycled = [0, 0], [False, False]
    for _ in range(120):
        obs, _, terminated, _, info = env.step(zeros(2))
        autoreset = info.get("autoreset", np.zeros(2, bool))
        expected = [0 if a else e + 1 for e, a in zip(expected, autoreset)]
        assert step_counts(obs) == expected, "no episode is cut short"
        recycled = [r or bool(x) for r, x in zip(recycled, info.get("recycled", [False, False]))]
        if all(recycled):
            break
    assert all(recycled)
    assert not old & set(env.worker_pids), "the old workers are gone"
    assert env.stats()["recycles"].tolist() == [1, 1] and env.stats()["restarts"].sum() == 0


def live_workers(parent) -> list:
    import psutil

    live = []
    for child in parent.children():
        try:
            if child.status() != psutil.STATUS_ZOMBIE and "spawn_main" in " ".join(child.cmdline()):
                live.append(child)
        except psutil.Error:
            pass  # exited meanwhile
    return live


def test_recycling_runs_for_many_generations_without_restarts_or_leftover_processes(make_env):
    import psutil

    env = make_env(num_envs=2, envs_per_worker=1, cameras=(), recycle_after_episodes=1,
                   backend_options={"episode_length": 2, "step_cost_s": 0.01})
    env.reset(seed=0)
    me, expected, deadline = psutil.Process(), [0, 0], time.monotonic() + 120
    while env.stats()["recycles"].min() < 3 and time.monotonic() < deadline:
        obs, _, _, _, info = env.step(zeros(2))
        expected = [0 if a else e + 1 for e, a in zip(expected, info.get("autoreset", np.zeros(2, bool)))]
        assert step_counts(obs) == expected, "each env's episode runs on, step by step, across generations"
        # per env: the serving worker, its replacement starting, and a retired one still closing
        assert len(live_workers(me)) <= 2 * 3, "retired workers are reaped"
    stats = env.stats()
    assert stats["recycles"].min() >= 3, stats["recycles"]  # 8 worker processes started in all
    assert stats["restarts"].sum() == 0, "a retired worker's exit is not a crash"
    env.close()
    assert not live_workers(me)


def test_recycling_workers_with_their_own_xvfb_never_stalls_a_step_and_removes_their_displays(make_env):
    """Retiring a worker must not wait for its Xvfb to stop (that took 2 s per retiring worker, in
    the step that moved its last env): the other envs are being served. Its Xvfb and files go."""
    env = make_env(num_envs=2, envs_per_worker=1, cameras=(), recycle_after_episodes=1,
                   backend_options={"episode_length": 3, "step_cost_s": 0.01, "needs_display": True})
    env.reset(seed=0)
    first = [dict(facts) for facts in env.worker_facts]
    assert all(facts.get("xvfb_pid") for facts in first)
    slowest, deadline = 0.0, time.monotonic() + 120
    while env.stats()["recycles"].min() < 2 and time.monotonic() < deadline:
        started = time.monotonic()
        env.step(zeros(2))
        slowest = max(slowest, time.monotonic() - started)
    assert env.stats()["recycles"].min() >= 2 and env.stats()["restarts"].sum() == 0
    assert slowest < 2.0, f"a step waited {slowest:.1f} s for retiring workers"  # both retire together
    for facts in first:
        assert not psutil.pid_exists(facts["xvfb_pid"]) or psutil.Process(facts["xvfb_pid"]).status() == "zombie"
        assert not os.path.exists(facts["display_dir"])


@pytest.mark.timeout(60)
def test_large_calls_to_one_worker_in_both_directions_at_once_do_not_deadlock(make_env):
    # The worker writes call 0's 4 MB result while the main process writes call 1's 4 MB argument: each
    # is many times a pipe's buffer, so each side waits for the other to read unless the main side reads
    # replies while it waits to write.
    env = make_env(num_envs=2, envs_per_worker=2, cameras=("front",))
    env.reset(seed=0)
    blobs = [np.full(1 << 22, value, np.uint8) for value in (3, 7)]
    env.call_async("noise", blobs[0], env_ids=[0])
    env.call_async("noise", blobs[1], env_ids=[1])
    results = dict(env.call_wait())
    assert sorted(results) == [0, 1]
    assert all(result.shape == blob.shape for result, blob in zip((results[0], results[1]), blobs))
    obs, *_ = env.step(zeros(2))
    assert step_counts(obs) == [1, 1]


@pytest.mark.timeout(60)
def test_a_hung_worker_with_a_large_command_still_to_write_is_restarted_at_its_deadline(make_env):
    env = make_env(num_envs=2, envs_per_worker=2, cameras=("front",))
    env.reset(seed=0)
    env.set_attr("hang_on_reset", [True, False])
    env.call_async("reset", None, None, env_ids=[0], timeout=1.0)  # hangs: the worker reads no more commands
    env.call_async("noise", np.zeros(1 << 22, np.uint8), env_ids=[1], timeout=30.0)  # waits for room in its pipe
    results = dict(env.call_wait())
    assert sorted(results) == [0, 1] and all(isinstance(result, WorkerError) for result in results.values())
    obs, reward, terminated, truncated, info = env.step(zeros(2))
    assert truncated.tolist() == [True, True] and info["restarted"].tolist() == [True, True]
    assert "no reply to call within 1.0 s" in info["restart_reason"][0]
    obs, reward, terminated, truncated, info = env.step(zeros(2))  # next-step autoreset after the cut episode
    assert info["autoreset"].tolist() == [True, True]
    obs, *_ = env.step(zeros(2))  # the replacement reads whole commands from the start of its own pipe
    assert step_counts(obs) == [1, 1]
