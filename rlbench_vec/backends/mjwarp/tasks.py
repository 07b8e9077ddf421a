"""A task declaration (backends/mujoco/tasks) on every world: success and indicators through the batched
conditions (conditions.py), task_low_dim_state from the declared terms, the shaped reward from the
declared distances (shaped_rewards) and the dense reward from the declared stages (dense_rewards; their
conditions are nodes of the batched conditions), for each world's variation.

Nothing per task: ids come from the host model the device model was put from, so a new task module
runs here as declared.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import warp as wp

from ..mujoco.simulation import Simulation
from ..mujoco.tasks.base import CLOSENESS_SCALE, Closeness, DenseReward, Met, Stage
from .conditions import BatchedConditions
from .episodes import EpisodeStarts

KINDS = ("body_position", "body_quat", "site_position", "geom_position", "joint_position")
CLOSENESS, MET, PROGRESS = range(3)  # a dense reward stage's value (-1: a padding stage)
# Stage columns: value kind, point a's kind and id, point b's kind and id, (MET) the condition's node or
# (PROGRESS) the joint's qpos address, the `once` condition's node (-1: none).
STAGE_COLUMNS = 7
_SCALE = wp.constant(CLOSENESS_SCALE)


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
def _dense_reward(stages: wp.array3d(dtype=int), travel: wp.array2d(dtype=float), counts: wp.array(dtype=int),
                  variation: wp.array(dtype=int), xpos: wp.array2d(dtype=wp.vec3), site_xpos: wp.array2d(dtype=wp.vec3),
                  geom_xpos: wp.array2d(dtype=wp.vec3), qpos: wp.array2d(dtype=float),
                  start_qpos: wp.array2d(dtype=float), values: wp.array2d(dtype=int), finished: wp.array(dtype=bool),
                  terminated: wp.array(dtype=bool), truncated: wp.array(dtype=bool), error: wp.array(dtype=int),
                  reward: wp.array(dtype=float)):
    """The task's dense_reward() where a world's action ran to its end (no fault, no refused action): 1 on
    success (terminated without an error), else the values of the stages that count, summed, over the
    variation's stage count + 1 (backends/mujoco/success.py's dense_reward)."""
    world = wp.tid()
    if not finished[world] or truncated[world] or error[world] != 0:
        return
    if terminated[world]:
        reward[world] = 1.0
        return
    v = variation[world]
    total = wp.float32(0.0)
    for k in range(stages.shape[1]):
        kind = stages[v, k, 0]
        once = stages[v, k, 6]
        if kind >= 0 and (once < 0 or values[world, once] != 0):
            if kind == 0:  # CLOSENESS
                a = _point(stages[v, k, 1], stages[v, k, 2], world, xpos, site_xpos, geom_xpos)
                b = _point(stages[v, k, 3], stages[v, k, 4], world, xpos, site_xpos, geom_xpos)
                total += 1.0 - wp.tanh(_SCALE * wp.length(a - b))
            elif kind == 1:  # MET
                total += wp.float32(values[world, stages[v, k, 5]])
            else:  # PROGRESS
                adr = stages[v, k, 5]
                total += wp.min(1.0, wp.abs(qpos[world, adr] - start_qpos[world, adr]) / travel[v, k])
    reward[world] = total / wp.float32(counts[v] + 1)


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
        dense = [task.dense_reward(v) for v in variations] if host.config.backend_options.get("dense_rewards") \
            else []
        gates = [c for reward in dense if reward is not None for c in dense_conditions(reward)]
        self.conditions = BatchedConditions(model, [task.success(v) for v in variations], num_worlds, device,
                                            [task.indicators(v) for v in variations], extra=gates)
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

        self.dense: tuple[wp.array, wp.array, wp.array] | None = None  # stages, travels, stage counts
        if dense:  # each variation's stages, padded with kind -1 to the longest
            rows = [[self._stage(stage, term_id, model) for stage in reward.stages] if reward else []
                    for reward in dense]
            width = max(1, *map(len, rows))
            padding = ([-1] + [0] * (STAGE_COLUMNS - 1), 1.0)
            rows = [stages + [padding] * (width - len(stages)) for stages in rows]
            self.dense = (ints([[columns for columns, _ in stages] for stages in rows]),
                          wp.array(np.array([[travel for _, travel in stages] for stages in rows], np.float32),
                                   dtype=float, device=device),
                          ints([len(reward.stages) if reward else 0 for reward in dense]))

    def _stage(self, stage: Stage, term_id: Any, model: Any) -> tuple[list[int], float]:
        """A stage's row of STAGE_COLUMNS and its travel (PROGRESS; else 1)."""
        once = -1 if stage.once is None else self.conditions.node(stage.once)
        value = stage.value
        if isinstance(value, Closeness):
            points = [KINDS.index(value.a.kind), term_id(value.a.kind, value.a.name),
                      KINDS.index(value.b.kind), term_id(value.b.kind, value.b.name)]
            return [CLOSENESS, *points, 0, once], 1.0
        if isinstance(value, Met):
            return [MET, 0, 0, 0, 0, self.conditions.node(value.condition), once], 1.0
        return [PROGRESS, 0, 0, 0, 0, int(model.joint(value.joint).qposadr[0]), once], float(value.travel)

    def success(self, d: Any, out: wp.array) -> None:
        """out[world] = 1 where the world's episode succeeded (after forward and collision); the task's
        indicators met colour their geoms."""
        self.conditions.evaluate(d, self.episodes.on_device["qpos"], self.episodes.variation, out, self.geom_rgba)

    def low_dim_state(self, d: Any, out: wp.array) -> None:
        wp.launch(_low_dim_state, dim=d.nworld, device=self.device, inputs=[
            self.kinds, self.ids, self.offsets, self.episodes.variation, d.xpos, d.xquat, d.site_xpos, d.geom_xpos,
            d.qpos, out])

    def shape_rewards(self, d: Any, results: dict[str, wp.array]) -> None:
        """With shaped_rewards (dense_rewards): the reward of each finished world becomes the task's reward()
        (dense_reward()), after finish_action, which wrote the success reward."""
        if self.dense is not None:
            stages, travel, counts = self.dense
            wp.launch(_dense_reward, dim=d.nworld, device=self.device, inputs=[
                stages, travel, counts, self.episodes.variation, d.xpos, d.site_xpos, d.geom_xpos, d.qpos,
                self.episodes.on_device["qpos"], self.conditions.values, results["finished"], results["terminated"],
                results["truncated"], results["error"], results["reward"]])
        if self.shaped:
            wp.launch(_shaped_reward, dim=d.nworld, device=self.device, inputs=[
                self.reward_kinds, self.reward_ids, self.episodes.variation, d.xpos, d.site_xpos, d.geom_xpos,
                results["finished"], results["truncated"], results["error"], results["reward"]])

    def restart(self, mask: wp.array) -> None:
        """The masked worlds start their episodes again (reset or restored after a fault)."""
        self.conditions.restart(mask)


def dense_conditions(reward: DenseReward) -> list:
    """The conditions a dense reward's stages read (Met values and `once` gates)."""
    found = [stage.once for stage in reward.stages if stage.once is not None]
    return found + [stage.value.condition for stage in reward.stages if isinstance(stage.value, Met)]
