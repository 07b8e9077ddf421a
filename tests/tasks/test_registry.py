"""Task lookup: list_tasks, both spellings, and the errors for tasks these backends lack."""

from __future__ import annotations

import subprocess
import sys

import pytest
from task_checks import MJWARP

from rlbench_vec import ConfigError, EnvConfig, RLBenchVectorEnv, list_tasks
from rlbench_vec.backends import backend_class
from rlbench_vec.backends.mujoco.tasks.rlbench_names import RLBENCH_TASKS


def test_list_tasks_names_the_embedded_tasks_by_rlbench_names():
    names = list_tasks("mujoco")
    assert names == list_tasks("mjwarp") == sorted(names)
    assert {"reach_target", "pick_and_lift", "open_drawer", "push_buttons", "slide_block_to_color_target"} <= set(names)
    assert set(names) <= RLBENCH_TASKS


def test_the_synthetic_backend_lists_and_takes_rlbenchs_tasks_only():
    assert list_tasks("synthetic") == sorted(RLBENCH_TASKS)
    assert {"open_jar", "sweep_to_dustpan_of_size", "place_wine_at_rack_location"} <= set(list_tasks("synthetic"))
    with RLBenchVectorEnv(num_envs=1, task="OpenJar", backend="synthetic", cameras=()) as env:
        assert env.get_attr("config")[0].task == "open_jar"
    with pytest.raises(ConfigError, match=r"unknown task 'open_jarr'.*stands in for RLBench's tasks.*'open_jar'"):
        RLBenchVectorEnv(num_envs=1, task="open_jarr", backend="synthetic")


@pytest.mark.parametrize("backend", ["mujoco", "mjwarp"])
def test_a_task_rlbench_has_but_this_backend_lacks_points_to_rlbench(backend):
    if backend == "mjwarp" and not MJWARP:
        pytest.skip("needs warp, mujoco_warp, torch: the 'gpu' extra (pip install -e '.[gpu]')")
    config = EnvConfig(task="OpenJar", backend=backend, backend_options={"device": "cpu"}).validated()
    with pytest.raises(ConfigError, match=rf"'open_jar' is an RLBench task that the {backend} backend does not "
                                          r"have yet\. Closest tasks here: 'close_jar', 'open_drawer'"
                                          r".*backend='rlbench'"):
        backend_class(backend).validate(config)


def test_an_unknown_task_lists_what_there_is():
    config = EnvConfig(task="push_buttonz", backend="mujoco").validated()
    with pytest.raises(ConfigError,
                       match=r"unknown task 'push_buttonz'.*Closest tasks here: 'push_button', 'push_buttons'"):
        backend_class("mujoco").validate(config)


def test_listing_tasks_imports_no_simulator():
    code = ("import sys, rlbench_vec; rlbench_vec.list_tasks('mjwarp'); "
            "print(sorted(m for m in ('mujoco', 'warp', 'mujoco_warp', 'torch') if m in sys.modules))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.split() == ["[]"]
