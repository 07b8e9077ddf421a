"""backends/mjwarp/draw_ahead.py: episodes drawn ahead in host processes are the episodes drawn in place, for
every order of seeded, optioned and plain resets (each draw depends on the world's generator state alone), and
plain resets take them from the processes; the option is checked in the main process."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from conftest import needs

from rlbench_vec.backends import backend_class
from rlbench_vec.backends.mujoco.backend import use_renderer
from rlbench_vec.config import EnvConfig
from rlbench_vec.errors import ConfigError

pytestmark = needs("gpu", "warp", "mujoco_warp", "torch")
WORLDS = 3


def starts(config: EnvConfig):
    import warp

    from rlbench_vec.backends.mjwarp.episodes import EpisodeStarts
    from rlbench_vec.backends.mujoco.simulation import Simulation

    host = Simulation(replace(config, cameras=()))
    rgba = warp.zeros((WORLDS, host.model.ngeom), dtype=warp.vec4, device="cpu")
    return EpisodeStarts(config, host, WORLDS, "cpu", rgba)


def test_episodes_drawn_ahead_are_the_episodes_drawn_in_place():
    config = EnvConfig(task="pick_and_lift", backend="mujoco", cameras=(),
                       backend_options={"variation": "random"}).validated()
    use_renderer(config)
    in_place = starts(config)
    ahead = starts(replace(config, backend_options={"variation": "random", "draw_ahead": 1}))
    assert ahead.ahead is not None and in_place.ahead is None
    taken = []
    take = ahead.ahead.take
    ahead.ahead.take = lambda world, rng: taken.append(take(world, rng)) or taken[-1]
    everyone = np.arange(WORLDS)
    resets = [(everyone, [5, 6, 7], None), (everyone, None, None), (np.array([0, 2]), None, None),
              (everyone, [9, None, None], None), (np.array([1]), None, [None, {"variation": 3}, None]),
              (everyone, None, None)]
    try:
        for worlds, seeds, options in resets:
            expected = in_place.draw(worlds, seeds, options)
            assert ahead.draw(worlds, seeds, options) == expected
            for name, view in in_place.host_view.items():
                np.testing.assert_array_equal(ahead.host_view[name][worlds], view[worlds], err_msg=name)
    finally:
        ahead.ahead.close()
    # every plain reset (no seed, no options: 3 + 2 + 2 + 3 worlds) took its episode from the processes
    assert len(taken) == 10 and all(found is not None for found in taken)


def test_draw_ahead_is_checked_in_the_main_process():
    mjwarp = backend_class("mjwarp")
    with pytest.raises(ConfigError, match="draw_ahead.*must be an integer"):
        mjwarp.validate(EnvConfig(backend="mjwarp", backend_options={"draw_ahead": "many"}).validated())
    with pytest.raises(ConfigError, match="leave draw_ahead unset with oracle=True"):
        mjwarp.validate(EnvConfig(backend="mjwarp", backend_options={"draw_ahead": 2, "oracle": True}).validated())
