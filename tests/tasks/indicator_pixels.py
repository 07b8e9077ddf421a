"""A task's indicator seen by a camera, as RLBench's task step() colours it: the buttons' plates turn green
once pressed (push_button, push_buttons), the bulb's glass yellow once in the lamp (light_bulb_in). The
front camera sees none of the colour before the oracle's actions and some after them, on the mujoco backend
and on mjwarp (warp's CPU device) replaying the same absolute pose actions."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from task_checks import MJWARP, config

from rlbench_vec.backends.mujoco import BACKEND
from rlbench_vec.backends.mujoco.backend import use_renderer

SIZE = 128
LIT_PIXELS = 4  # a lit indicator (a pressed plate, a bulb's glass) seen from the front camera fills more (128x128)
PixelCount = Callable[[np.ndarray], int]


def green_pixels(rgb: np.ndarray) -> int:
    """Pixels of the plates' lit green (not a base colour's: none is bright green without red or blue)."""
    rgb = rgb.astype(int)
    return int(np.sum((rgb[..., 1] > 150) & (rgb[..., 0] < 90) & (rgb[..., 2] < 90)))


def yellow_pixels(rgb: np.ndarray) -> int:
    """Pixels of a lit yellow glass: red and green alike and bright, little blue (the white glass has blue)."""
    rgb = rgb.astype(int)
    red, green, blue = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    return int(np.sum((red > 150) & (green > 150) & (np.abs(red - green) < 40) & (blue < 0.4 * green)))


def camera_config(task: str):
    return config(task, cameras=("front",), modalities=("rgb",), image_size=(SIZE, SIZE), arm_mode="ik",
                  absolute_mode=True)


def check_indicator_lights(task: str, count: PixelCount, seed: int = 0) -> None:
    """On mujoco: the oracle's actions light the indicator (`count` finds its colour), which stays lit
    once the hand has left it, and is off again in the next episode; on mjwarp the same actions do the same."""
    cfg = camera_config(task)
    backend = BACKEND(cfg, 0)
    try:
        backend.reset(seed, None)
        before = count(backend.render_rgb("front"))
        actions, rewards = [], []
        for action in backend.sim.oracle_actions():  # all of it: the hand leaves the last thing it lit
            actions.append(action)
            rewards.append(backend.step(action).reward)
        reward = max(rewards)
        after = count(backend.render_rgb("front"))
        backend.reset(seed, None)
        again = count(backend.render_rgb("front"))
    finally:
        backend.close()
    assert reward == 1.0 and before == again == 0 and after > LIT_PIXELS, (reward, before, after, again)
    if MJWARP:
        check_on_mjwarp(cfg, seed, actions, count)


def check_on_mjwarp(cfg, seed: int, actions: list[np.ndarray], count: PixelCount) -> None:
    use_renderer(cfg)
    from rlbench_vec.backends.mjwarp.simulation import BatchedSimulation

    sim = BatchedSimulation(cfg, 1, "cpu")
    try:
        sim.reset(seeds=[seed])
        assert count(sim.observe()["front_rgb"][0].cpu().numpy()) == 0
        for action in actions:
            sim.step(action[None])
        assert count(sim.observe()["front_rgb"][0].cpu().numpy()) > LIT_PIXELS
        sim.reset(seeds=[seed])
        assert count(sim.observe()["front_rgb"][0].cpu().numpy()) == 0
    finally:
        sim.close()
