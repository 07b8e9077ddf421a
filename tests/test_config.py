"""Options: routing by name, validation with errors that name the fix, and limits checked before
anything starts (issue 17: inputs that disabled the guards)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from rlbench_vec import ConfigError, RLBenchVectorEnv
from rlbench_vec.config import EnvConfig, VectorConfig, split_options


@pytest.mark.parametrize("options, message", [
    ({"step_timeout_s": float("nan")}, "step_timeout_s must be a finite number of seconds"),
    ({"reset_timeout_s": float("inf")}, "reset_timeout_s must be a finite"),
    ({"start_timeout_s": 0}, "start_timeout_s must be a finite number of seconds > 0"),
    ({"max_worker_rss_mb": float("nan")}, "max_worker_rss_mb must be a finite number of MB"),
    ({"max_episode_steps": "a"}, "max_episode_steps must be an integer"),
    ({"num_envs": 2.5}, "num_envs must be an integer"),
    ({"num_envs": True}, "num_envs must be an integer"),
    ({"image_size": (100000, 64)}, r"image_size=\(100000, 64\) is \(width, height\): width must be in \[8, 4096\], "
                                    r"got 100000\.$"),
    ({"image_size": (-1, 5)}, r"width must be in \[8, 4096\], got -1; height must be in \[8, 4096\], got 5\."),
    ({"image_size": (64, 2.5)}, r"\(width, height\): height must be an integer, got 2\.5"),
    ({"autoreset_mode": "same-step"}, "Did you mean 'same_step'"),
    ({"spare_envs": 1, "autoreset_mode": "same_step"}, "next_step"),
    ({"recycle_after_episodes": 3, "autoreset_mode": "disabled"}, "recycle_after_episodes .*='next_step'"),
    ({"max_worker_rss_mb": 500, "autoreset_mode": "same_step"}, "max_worker_rss_mb .* autoreset_mode='next_step'"),
    ({"seed": -1}, "seed must be >= 0"),
    ({"step_timout_s": 1.0}, "Did you mean 'step_timeout_s'"),
    ({"record": "yes"}, "record must be True, False or a VideoConfig"),
])
def test_bad_options_are_refused_before_anything_starts(options, message):
    with pytest.raises(ConfigError, match=message):
        RLBenchVectorEnv(backend="synthetic", **options)


def test_integral_types_of_numpy_are_accepted(make_env):
    env = make_env(num_envs=np.int64(2), max_episode_steps=np.int32(5), seed=np.uint8(3))
    assert env.num_envs == 2 and env.env_config.max_episode_steps == 5 and env.vector_config.seed == 3


def test_options_route_to_their_config_by_name():
    env_options, vector_options = split_options({"task": "x", "cameras": ["front"], "spare_envs": 2})
    assert env_options == {"task": "x", "cameras": ("front",)} and vector_options == {"spare_envs": 2}
    assert EnvConfig(**env_options).cameras == ("front",)
    assert VectorConfig(**vector_options).spare_envs == 2


def test_a_request_beyond_the_file_descriptor_limit_is_refused(monkeypatch):
    import resource

    monkeypatch.setattr(resource, "getrlimit", lambda which: (256, 256))
    with pytest.raises(ConfigError, match=r"ulimit -n \d+"):
        RLBenchVectorEnv(num_envs=200, envs_per_worker=1, backend="synthetic", cameras=())


def test_a_block_larger_than_free_shared_memory_is_refused(monkeypatch):
    real = os.statvfs

    class Tiny:
        f_bavail, f_frsize = 1, 4096  # 4 KiB free

    monkeypatch.setattr(os, "statvfs", lambda path: Tiny() if path == "/dev/shm" else real(path))
    with pytest.raises(ConfigError, match=r"Docker: --shm-size=\d+g, or --ipc=host\)\.$"):
        RLBenchVectorEnv(num_envs=2, backend="synthetic")


def test_action_timing_is_checked_and_rlbench_runs_its_own_only():
    with pytest.raises(ConfigError, match="unknown action_timing 'fast'.*rlbench, fixed"):
        EnvConfig(backend="mujoco", action_timing="fast").validated()
    with pytest.raises(ConfigError, match="rlbench backend runs action_timing='rlbench' only"):
        EnvConfig(backend="rlbench", action_timing="fixed").validated()
    assert EnvConfig(backend="mujoco", action_timing="fixed").validated().action_timing == "fixed"
    assert EnvConfig().action_timing == "rlbench"
