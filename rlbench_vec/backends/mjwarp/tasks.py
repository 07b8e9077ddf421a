"""A task declaration (backends/mujoco/tasks) on every world: success and indicators through the batched
conditions (conditions.py), task_low_dim_state from the declared terms and the shaped reward from the
declared distances (shaped_rewards), for each world's variation.

Nothing per task: ids come from the host model the device model was put from, so a new task module
runs here as declared.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import warp as wp

from ..mujoco.simulation import Simulation
from .conditions import BatchedConditions
from .episodes import EpisodeStarts

KINDS = ("body_position", "body_quat", "site_position", "geom_position", "joint_position")


@wp.func
def _point(kind: int, i: int, world: int, xpos: wp.array2d(dtype=wp.vec3), site_xpos: wp.array2d(dtype=wp.vec3),
           geom_xpos: wp.array2d(dtype=wp.vec3)) -> wp.vec3:
    """The position a term of kind body_position (0), site_position (2) or geom_position (3) names."""
    p = xpos[world, i]
    if kind == 2:
        p = site_xpos[world, i]
    elif kind == 3:
        p = geom_xpos[world, i]
    return p


@wp.kernel
def _shaped_reward(kinds: wp.array3d(dtype=int), ids: wp.array3d(dtype=int), variation: wp.array(dtype=int),
                   xpos: wp.array2d(dtype=wp.vec3), site_xpos: wp.array2d(dtype=wp.vec3),
                   geom_xpos: wp.array2d(dtype=wp.vec3), finished: wp.array(dtype=bool),
                   truncated: wp.array(dtype=bool), error: wp.array(dtype=int), reward: wp.array(dtype=float)):
    """The task's reward() where a world's action ran to its end (no fault, no refused action): minus the
    summed distances of the variation's pairs of points (kind -1: a padding pair)."""
    world = wp.tid()
    if not finished[world] or truncated[world] or error[world] != 0:
        return
    v = variation[world]
    total = wp.float32(0.0)
    for k in range(kinds.shape[1]):
        if kinds[v, k, 0] >= 0:
            a = _point(kinds[v, k, 0], ids[v, k, 0], world, xpos, site_xpos, geom_xpos)
            b = _point(kinds[v, k, 1], ids[v, k, 1], world, xpos, site_xpos, geom_xpos)
            total -= wp.length(a - b)
    reward[world] = total


@wp.kernel
def _low_dim_state(kinds: wp.array2d(dtype=int), ids: wp.array2d(dtype=int), offsets: wp.array(dtype=int),
                   variation: wp.array(dtype=int), xpos: wp.array2d(dtype=wp.vec3), xquat: wp.array2d(dtype=wp.quat),
                   site_xpos: wp.array2d(dtype=wp.vec3), geom_xpos: wp.array2d(dtype=wp.vec3),
                   qpos: wp.array2d(dtype=float), state: wp.array2d(dtype=wp.float64)):
    """Each term of the world's variation at its offset: positions xyz, body quaternions xyzw (MuJoCo
    stores wxyz), joint positions."""
    world = wp.tid()
    v = variation[world]
    for t in range(kinds.shape[1]):
        kind = kinds[v, t]
        i = ids[v, t]
        o = offsets[t]
        if kind == 1:
            q = xquat[world, i]
            for k in range(3):
                state[world, o + k] = wp.float64(q[1 + k])
            state[world, o + 3] = wp.float64(q[0])
        elif kind == 4:
            state[world, o] = wp.float64(qpos[world, i])
        else:
            p = _point(kind, i, world, xpos, site_xpos, geom_xpos)
            for k in range(3):
                state[world, o + k] = wp.float64(p[k])


class BatchedTask:
    """The host simulation's task on `num_worlds` worlds; `episodes` holds each world's start and variation;
    the host's config says whether rewards are shaped."""

    def __init__(self, host: Simulation, episodes: EpisodeStarts, num_worlds: int, device: Any, geom_rgba: wp.array):
        task, model, self.device, self.episodes = host.task, host.model, device, episodes
        self.geom_rgba = geom_rgba  # the device model's per-world colours, which indicators change
        variations = range(task.variation_count)
        self.conditions = BatchedConditions(model, [task.success(v) for v in variations], num_worlds, device,
                                            [task.indicators(v) for v in variations])
        terms = [task.low_dim_state(v) for v in variations]
        sizes = [term.size for term in terms[0]]
        if any([term.size for term in row] != sizes for row in terms):
            raise ValueError(f"{task.name}: low_dim_state must give the same sizes for every variation")
        lookup = {"body_position": model.body, "body_quat": model.body, "site_position": model.site,
                  "geom_position": model.geom}

        def term_id(kind: str, name: str) -> int:
            return int(model.joint(name).qposadr[0]) if kind == "joint_position" else lookup[kind](name).id

        def ints(values: Any) -> wp.array:
            return wp.array(np.asarray(values, np.int32), dtype=int, device=device)

        self.kinds = ints([[KINDS.index(term.kind) for term in row] for row in terms])
        self.ids = ints([[term_id(term.kind, term.name) for term in row] for row in terms])
        self.offsets = ints(np.cumsum([0, *sizes[:-1]]))
        self.shaped = bool(host.config.backend_options.get("shaped_rewards"))
        if self.shaped:  # each variation's pairs of points, padded with kind -1 to the longest
            rewards = [task.reward(v) for v in variations]
            pairs = [[] if reward is None else list(reward.distances) for reward in rewards]
            width = max(1, *map(len, pairs))
            self.reward_kinds = ints([[[KINDS.index(p.kind) for p in pair] for pair in row] + [[-1, -1]] *
                                      (width - len(row)) for row in pairs])
            self.reward_ids = ints([[[term_id(p.kind, p.name) for p in pair] for pair in row] + [[0, 0]] *
                                    (width - len(row)) for row in pairs])

    def success(self, d: Any, out: wp.array) -> None:
        """out[world] = 1 where the world's episode succeeded (after forward and collision); the task's
        indicators met colour their geoms."""
        self.conditions.evaluate(d, self.episodes.on_device["qpos"], self.episodes.variation, out, self.geom_rgba)

    def low_dim_state(self, d: Any, out: wp.array) -> None:
        wp.launch(_low_dim_state, dim=d.nworld, device=self.device, inputs=[
            self.kinds, self.ids, self.offsets, self.episodes.variation, d.xpos, d.xquat, d.site_xpos, d.geom_xpos,
            d.qpos, out])

    def shape_rewards(self, d: Any, results: dict[str, wp.array]) -> None:
        """With shaped_rewards: the reward of each finished world becomes the task's reward() (after
        finish_action, which wrote the success reward)."""
        if self.shaped:
            wp.launch(_shaped_reward, dim=d.nworld, device=self.device, inputs=[
                self.reward_kinds, self.reward_ids, self.episodes.variation, d.xpos, d.site_xpos, d.geom_xpos,
                results["finished"], results["truncated"], results["error"], results["reward"]])

    def restart(self, mask: wp.array) -> None:
        """The masked worlds start their episodes again (reset or restored after a fault)."""
        self.conditions.restart(mask)
