"""Ctrl-C inside the vector env's calls, through the public API: wherever it lands, the env goes on
with every env's episode whole, and SIGINT's handler is Python's again once the last env is closed."""

from __future__ import annotations

import random
import signal
import sys
import threading
import weakref

import numpy as np
import pytest
from test_pool import step_counts, zeros

from rlbench_vec import ConfigError


def interrupt_main_thread_after(seconds: float) -> threading.Timer:
    """SIGINT to the main thread itself, so a wait there is cut at once (os.kill lets the kernel pick a
    thread, and the main thread may then notice only after its wait ends)."""
    return threading.Timer(seconds, signal.pthread_kill, (threading.main_thread().ident, signal.SIGINT))


def test_ctrl_c_at_random_moments_of_send_and_recv_loses_no_reply(make_env):
    # Before interrupts were held back, some of these landed between reading replies from the pipe and
    # taking them in: the envs waited for replies already read, until their deadline restarted them.
    env = make_env(num_envs=8, envs_per_worker=1, cameras=("front",), max_episode_steps=100_000, step_timeout_s=5.0,
                   backend_options={"step_cost_s": 0.001, "step_cost_dist": "pareto"})
    env.reset(seed=0)
    rng = random.Random(0)
    last, interrupted = np.zeros(8, int), 0
    for _ in range(300):
        timer = interrupt_main_thread_after(rng.uniform(0.0, 0.004))
        try:
            env.send(zeros(8))
            timer.start()
            env.recv(min_envs=4)
            timer.join()
        except KeyboardInterrupt:
            interrupted += 1
        while True:  # the interrupt may land after recv returned, once
            try:
                timer.join()
                try:
                    env.recv()
                except ConfigError:
                    pass  # nothing in flight: all returned, or dropped after an interrupt
                obs, *_ = env.step(zeros(8))
                break
            except KeyboardInterrupt:
                interrupted += 1
        counts = np.array(step_counts(obs))
        assert (counts > last).all(), (last, counts)  # every env stepped; no episode restarted
        last = counts
    assert interrupted > 100
    assert env.stats()["restarts"].sum() == 0


def test_sigint_is_pythons_again_once_the_last_env_is_closed(make_env):
    first, second = make_env(num_envs=1, cameras=()), make_env(num_envs=1, cameras=())
    assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    first.close()
    assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    second.close()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_sigint_handler_of_your_own_is_left_alone(make_env):
    calls: list[int] = []

    def own(signum: int, frame: object) -> None:
        calls.append(signum)

    previous = signal.signal(signal.SIGINT, own)
    try:
        env = make_env(num_envs=1, cameras=())
        assert signal.getsignal(signal.SIGINT) is own
        signal.raise_signal(signal.SIGINT)
        assert calls == [signal.SIGINT]
        env.close()
        assert signal.getsignal(signal.SIGINT) is own
    finally:
        signal.signal(signal.SIGINT, previous)


def test_an_env_made_under_your_handler_does_not_give_sigint_back_for_the_others(make_env):
    previous = signal.signal(signal.SIGINT, lambda signum, frame: None)
    try:
        mine = make_env(num_envs=1, cameras=())  # made under your handler: it leaves SIGINT alone
        signal.signal(signal.SIGINT, signal.default_int_handler)
        other = make_env(num_envs=1, cameras=())
        mine.close()
        assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler  # still held for `other`
        other.close()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, previous)


def test_ctrl_c_outside_any_call_raises_at_once(make_env):
    make_env(num_envs=1, cameras=())
    with pytest.raises(KeyboardInterrupt):
        signal.raise_signal(signal.SIGINT)


def test_a_ctrl_c_that_lands_inside_a_finalizer_is_raised_again_and_the_hook_goes_with_the_last_env(make_env):
    # CPython swallows an exception raised in a finalizer (a weakref callback here; importlib runs one after each
    # import): before the vector env's unraisable hook, the steps below ran on and nothing was raised
    hook_before = sys.unraisablehook
    env = make_env(num_envs=2, cameras=())
    env.reset(seed=0)
    collected = set()
    weakref.finalize(collected, signal.raise_signal, signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        del collected  # its finalizer runs here, outside any call: the Ctrl-C is raised, not lost
        for _ in range(50):
            env.step(zeros(2))
    env.close()
    assert sys.unraisablehook is hook_before
