"""The buttons' plates turn green once pressed, as RLBench's (push_button, push_buttons): the front
camera sees no green before the oracle's press and the plate green after it, on the mujoco backend and
on mjwarp (warp's CPU device) replaying the same absolute pose actions."""

from __future__ import annotations

import numpy as np
from task_checks import MJWARP, config

from rlbench_vec.backends.mujoco import BACKEND
from rlbench_vec.backends.mujoco.backend import use_renderer

SIZE = 128
GREEN_PIXELS = 4  # a pressed plate, seen from the front camera, fills more pixels than this (128x128)


def green_pixels(rgb: np.ndarray) -> int:
    """Pixels of the plates' lit green (not a base colour's: none is bright green without red or blue)."""
    rgb = rgb.astype(int)
    return int(np.sum((rgb[..., 1] > 150) & (rgb[..., 0] < 90) & (rgb[..., 2] < 90)))


def camera_config(task: str):
    return config(task, cameras=("front",), modalities=("rgb",), image_size=(SIZE, SIZE), arm_mode="ik",
                  absolute_mode=True)


def check_plates_turn_green(task: str, seed: int = 0) -> None:
    """On mujoco: the oracle's presses turn the plates green, and they stay green once the hand has
    risen; on mjwarp the same actions do the same."""
    cfg = camera_config(task)
    backend = BACKEND(cfg, 0)
    try:
        backend.reset(seed, None)
        before = green_pixels(backend.render_rgb("front"))
        actions, rewards = [], []
        for action in backend.sim.oracle_actions():  # all of it: the hand rises off the last plate it pressed
            actions.append(action)
            rewards.append(backend.step(action).reward)
        reward = max(rewards)
        after = green_pixels(backend.render_rgb("front"))
    finally:
        backend.close()
    assert reward == 1.0 and before == 0 and after > GREEN_PIXELS, (reward, before, after)
    if MJWARP:
        check_on_mjwarp(cfg, seed, actions)


def check_on_mjwarp(cfg, seed: int, actions: list[np.ndarray]) -> None:
    use_renderer(cfg)
    from rlbench_vec.backends.mjwarp.simulation import BatchedSimulation

    sim = BatchedSimulation(cfg, 1, "cpu")
    try:
        sim.reset(seeds=[seed])
        assert green_pixels(sim.observe()["front_rgb"][0].cpu().numpy()) == 0
        for action in actions:
            sim.step(action[None])
        assert green_pixels(sim.observe()["front_rgb"][0].cpu().numpy()) > GREEN_PIXELS
    finally:
        sim.close()
