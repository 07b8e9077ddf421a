"""backends/mjwarp/first_start.py: a task's first start is announced on stderr with its time, and marked, so the
next start of the same task and cameras says nothing; another task or camera set is a first start of its own."""

from __future__ import annotations

import pytest
from conftest import needs

from rlbench_vec.config import EnvConfig

pytestmark = needs("gpu", "warp", "mujoco_warp", "torch")


def test_a_first_start_is_announced_once_per_task_and_cameras(tmp_path, monkeypatch, capsys):
    import warp

    from rlbench_vec.backends.mjwarp.first_start import announced

    warp.init()
    monkeypatch.setattr(warp.config, "kernel_cache_dir", str(tmp_path))
    config = EnvConfig(task=["reach_target", "open_drawer", "reach_target"], backend="mjwarp").validated()
    with announced(config, "cpu", 3):
        pass
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("rlbench_vec: compiling mjwarp kernels for open_drawer, reach_target (first start on "
                             "this machine") and err[1].startswith("rlbench_vec: mjwarp kernels for open_drawer, "
                                                                   "reach_target ready in ")
    with announced(config, "cpu", 3):
        pass
    assert capsys.readouterr().err == ""
    with announced(config.for_task("reach_target"), "cpu", 1):  # the same task alone: marked already
        pass
    assert capsys.readouterr().err == ""
    fewer = EnvConfig(task="reach_target", backend="mjwarp", cameras=("front",)).validated()
    with pytest.raises(RuntimeError), announced(fewer, "cpu", 1):
        raise RuntimeError("a failing first start")
    assert "compiling mjwarp kernels for reach_target" in capsys.readouterr().err
    with announced(fewer, "cpu", 1):
        pass
    assert "compiling" in capsys.readouterr().err  # the failed start left no mark
