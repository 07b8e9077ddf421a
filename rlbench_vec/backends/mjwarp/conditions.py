"""RLBench's success conditions (backends/mujoco/tasks/conditions.py) for every world in one kernel.

The conditions of every variation are flattened into one node list, children before their parent
(equal sub-conditions shared); a world evaluates every node in order and its success is the node of
its variation's root. Semantics as backends/mujoco/success.py (tests/test_conditions.py checks both on
the same states): an ordered ConditionSet keeps per-world progress, cleared when the world's episode
starts; JointCondition measures from the world's episode start. A task's indicators (colour changes
once a condition is met) are nodes too: after each evaluation a second kernel colours the geoms of the
met ones in the world's own colours (the model's per-world geom_rgba).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import warp as wp

from ..mujoco.tasks.base import Indicator
from ..mujoco.tasks.conditions import (
    Condition,
    ConditionSet,
    DetectedCondition,
    GraspedCondition,
    JointCondition,
    NothingGrasped,
    OrConditions,
    check_condition,
    check_stateless,
)
from ..mujoco.world import (
    BOX,
    CAPSULE,
    DETECTABLE,
    OVERLAP_ITERATIONS,
    OVERLAP_TOLERANCE,
    PADS,
    SPHERE,
)

DETECTED, JOINT, GRASPED, NOTHING_GRASPED, ALL, ANY, ORDERED = range(7)
# Node columns: kind, then (DETECTED) object id, object is a site, region site, region is a sphere,
# negated, the object's first geom, its geom count; (JOINT) qpos address; (GRASPED) body id; (sets)
# first entry in `children`, child count.
COLUMNS = 8
_SPHERE, _CAPSULE, _BOX = wp.constant(SPHERE), wp.constant(CAPSULE), wp.constant(BOX)
_TOLERANCE, _ITERATIONS = wp.constant(OVERLAP_TOLERANCE), wp.constant(OVERLAP_ITERATIONS)


@wp.func
def _project(kind: int, size: wp.vec3, point: wp.vec3) -> wp.vec3:
    """backends/mujoco/world.py's project: the point of a primitive closest to `point`, in its frame."""
    result = point
    if kind == _BOX:
        result = wp.vec3(wp.clamp(point[0], -size[0], size[0]), wp.clamp(point[1], -size[1], size[1]),
                         wp.clamp(point[2], -size[2], size[2]))
    elif kind == _SPHERE:
        norm = wp.length(point)
        if norm > size[0]:
            result = point * (size[0] / norm)
    else:
        axis = wp.vec3(0.0, 0.0, wp.clamp(point[2], -size[1], size[1]))
        if kind == _CAPSULE:
            offset = point - axis
            norm = wp.length(offset)
            if norm > size[0]:
                result = axis + offset * (size[0] / norm)
        else:  # cylinder
            radial = wp.sqrt(point[0] * point[0] + point[1] * point[1])
            scale = wp.float32(1.0)
            if radial > size[0]:
                scale = size[0] / radial
            result = wp.vec3(point[0] * scale, point[1] * scale, axis[2])
    return result


@wp.func
def _project_world(kind: int, size: wp.vec3, position: wp.vec3, rotation: wp.mat33, point: wp.vec3) -> wp.vec3:
    return position + wp.mul(rotation, _project(kind, size, wp.mul(wp.transpose(rotation), point - position)))


@wp.func
def _overlaps(kind: int, size: wp.vec3, position: wp.vec3, rotation: wp.mat33, reach: float, region_kind: int,
              region_size: wp.vec3, region_position: wp.vec3, region_rotation: wp.mat33) -> int:
    """world.py's World.overlaps: alternating projections between a geom and a region meet where they overlap."""
    found = wp.int32(0)
    if wp.length(position - region_position) <= reach:
        point = position
        for _ in range(_ITERATIONS):
            if found == 0:
                in_region = _project_world(region_kind, region_size, region_position, region_rotation, point)
                if wp.length(in_region - point) < _TOLERANCE:
                    found = 1
                else:
                    point = _project_world(kind, size, position, rotation, in_region)
                    if wp.length(point - in_region) < _TOLERANCE:
                        found = 1
    return found


@wp.kernel
def _pad_contacts(nacon: wp.array(dtype=int), geom: wp.array(dtype=wp.vec2i), worldid: wp.array(dtype=int),
                  geom_bodyid: wp.array(dtype=int), pads: wp.array(dtype=int), touching: wp.array3d(dtype=int)):
    """touching[world, body, k] = 1 where finger pad k touches a geom of `body` (zeroed before)."""
    i = wp.tid()
    if i >= nacon[0]:
        return
    pair = geom[i]
    for k in range(2):
        if pair[0] == pads[k]:
            touching[worldid[i], geom_bodyid[pair[1]], k] = 1
        elif pair[1] == pads[k]:
            touching[worldid[i], geom_bodyid[pair[0]], k] = 1


@wp.func
def _grasped(touching: wp.array3d(dtype=int), world: int, body: int) -> int:
    return touching[world, body, 0] * touching[world, body, 1]


@wp.kernel
def _evaluate(nodes: wp.array2d(dtype=int), sizes: wp.array(dtype=wp.vec3), children: wp.array(dtype=int),
              roots: wp.array(dtype=int), variation: wp.array(dtype=int), geom_type: wp.array(dtype=int),
              geom_size: wp.array(dtype=wp.vec3), geom_rbound: wp.array(dtype=float),
              geom_xpos: wp.array2d(dtype=wp.vec3), geom_xmat: wp.array2d(dtype=wp.mat33),
              site_xpos: wp.array2d(dtype=wp.vec3), site_xmat: wp.array2d(dtype=wp.mat33),
              qpos: wp.array2d(dtype=float), start_qpos: wp.array2d(dtype=float), touching: wp.array3d(dtype=int),
              progress: wp.array2d(dtype=int), values: wp.array2d(dtype=int), success: wp.array(dtype=int)):
    world = wp.tid()
    for n in range(nodes.shape[0]):
        kind = nodes[n, 0]
        met = wp.int32(0)
        if kind == 0:  # DETECTED
            region = nodes[n, 3]
            region_kind = _BOX
            region_reach = wp.length(sizes[n])
            if nodes[n, 4] != 0:
                region_kind = _SPHERE
                region_reach = sizes[n][0]
            region_position = site_xpos[world, region]
            region_rotation = site_xmat[world, region]
            if nodes[n, 2] != 0:  # a site: its point
                point = site_xpos[world, nodes[n, 1]]
                inside = _project_world(region_kind, sizes[n], region_position, region_rotation, point)
                met = int(wp.length(inside - point) < _TOLERANCE)
            for g in range(nodes[n, 6], nodes[n, 6] + nodes[n, 7]):
                if met == 0:
                    met = _overlaps(geom_type[g], geom_size[g], geom_xpos[world, g], geom_xmat[world, g],
                                    geom_rbound[g] + region_reach, region_kind, sizes[n], region_position,
                                    region_rotation)
            if nodes[n, 5] != 0:
                met = 1 - met
        elif kind == 1:  # JOINT
            adr = nodes[n, 1]
            met = int(wp.abs(qpos[world, adr] - start_qpos[world, adr]) > sizes[n][0])
        elif kind == 2:  # GRASPED
            met = _grasped(touching, world, nodes[n, 1])
        elif kind == 3:  # NOTHING_GRASPED
            grasps = wp.int32(0)
            for body in range(touching.shape[1]):
                grasps += _grasped(touching, world, body)
            met = int(grasps == 0)
        elif kind == 4 or kind == 5:  # ALL, ANY
            first = nodes[n, 1]
            count = nodes[n, 2]
            found = wp.int32(0)  # children met
            for c in range(count):
                found += values[world, children[first + c]]
            if kind == 4:
                met = int(found == count)
            else:
                met = int(found > 0)
        else:  # ORDERED
            first = nodes[n, 1]
            count = nodes[n, 2]
            done = progress[world, n]
            while done < count and values[world, children[first + done]] != 0:
                done += 1
            progress[world, n] = done
            met = int(done >= count)
        values[world, n] = met
    success[world] = values[world, roots[variation[world]]]


@wp.kernel
def _indicate(variation: wp.array(dtype=int), nodes: wp.array2d(dtype=int), geoms: wp.array2d(dtype=int),
              colours: wp.array2d(dtype=wp.vec3), values: wp.array2d(dtype=int), geom_rgba: wp.array2d(dtype=wp.vec4)):
    """Each (node, geom) entry of the world's variation: colour the geom once the node is met (-1: none)."""
    world = wp.tid()
    v = variation[world]
    for k in range(nodes.shape[1]):
        node = nodes[v, k]
        if node >= 0 and values[world, node] != 0:
            g = geoms[v, k]
            rgb = colours[v, k]
            geom_rgba[world, g] = wp.vec4(rgb[0], rgb[1], rgb[2], geom_rgba[world, g][3])


@wp.kernel
def _clear_progress(mask: wp.array(dtype=bool), progress: wp.array2d(dtype=int)):
    world, n = wp.tid()
    if mask[world]:
        progress[world, n] = 0


class BatchedConditions:
    """The success of every world: `conditions[v]` is variation v's condition, `indicators[v]` its
    indicators (none when not given); `model` the host MjModel the names are looked up in (the device
    model is put from it). `extra`: further conditions that keep no progress (a dense reward's), evaluated
    with the others: `node(condition)` is the column of `values` holding each world's answer."""

    def __init__(self, model: Any, conditions: Sequence[Condition], num_worlds: int, device: Any,
                 indicators: Sequence[Sequence[Indicator]] = (), extra: Sequence[Condition] = ()):
        self.model, self.device = model, device
        self.rows: list[list[int]] = []
        self.sizes: list[tuple[float, float, float]] = []
        self.children: list[int] = []
        self.index: dict[Condition, int] = {}
        roots = [self._add(check_condition(condition)) for condition in conditions]
        for condition in extra:
            self._add(check_stateless(condition))
        entries = [[(self._add(check_stateless(indicator.condition)), model.geom(geom).id, indicator.rgb)
                    for indicator in variation_indicators for geom in indicator.geoms]
                   for variation_indicators in indicators] or [[]]
        width = max(1, *map(len, entries))
        padded = [row + [(-1, 0, (0.0, 0.0, 0.0))] * (width - len(row)) for row in entries]

        def ids(values: Any, dtype: Any = int) -> wp.array:
            return wp.array(np.asarray(values, np.int32), dtype=dtype, device=device)

        self.nodes = ids(np.array(self.rows, np.int32).reshape(-1, COLUMNS))
        self.node_sizes = wp.array(np.array(self.sizes, np.float32).reshape(-1, 3), dtype=wp.vec3, device=device)
        self.child_list = ids(self.children or [0])
        self.roots = ids(roots)
        self.indicator_nodes = ids([[node for node, _, _ in row] for row in padded])
        self.indicator_geoms = ids([[geom for _, geom, _ in row] for row in padded])
        self.indicator_colours = wp.array(np.array([[rgb for _, _, rgb in row] for row in padded], np.float32),
                                          dtype=wp.vec3, device=device)
        self.has_indicators = any(entries)
        self.pads = ids([model.geom(name).id for name in PADS])
        self.geom_bodyid = ids(model.geom_bodyid)
        self.geom_type = ids(model.geom_type)
        self.geom_size = wp.array(np.asarray(model.geom_size, np.float32), dtype=wp.vec3, device=device)
        self.geom_rbound = wp.array(np.asarray(model.geom_rbound, np.float32), dtype=float, device=device)
        self.touching = wp.zeros((num_worlds, model.nbody, 2), dtype=int, device=device)
        self.progress = wp.zeros((num_worlds, len(self.rows)), dtype=int, device=device)
        self.values = wp.zeros((num_worlds, len(self.rows)), dtype=int, device=device)

    def _add(self, condition: Condition) -> int:
        """The node of `condition`, appended after its children unless an equal one exists."""
        if condition in self.index:
            return self.index[condition]
        row, size = [0] * COLUMNS, (0.0, 0.0, 0.0)
        m = self.model
        if isinstance(condition, (ConditionSet, OrConditions)):
            nodes = [self._add(child) for child in condition.conditions]
            ordered = isinstance(condition, ConditionSet) and condition.order_matters
            row[:3] = [ORDERED if ordered else ANY if isinstance(condition, OrConditions) else ALL,
                       len(self.children), len(nodes)]
            self.children.extend(nodes)
        elif isinstance(condition, DetectedCondition):
            is_site = condition.obj not in {m.body(i).name for i in range(m.nbody)}
            obj = m.site(condition.obj).id if is_site else m.body(condition.obj).id
            region = m.site(condition.region)
            sphere = int(m.site_type[region.id]) == SPHERE
            first, count = (0, 0) if is_site else (int(m.body_geomadr[obj]), int(m.body_geomnum[obj]))
            unhandled = [m.geom(g).name or str(g) for g in range(first, first + count)
                         if m.geom_type[g] not in DETECTABLE]
            if unhandled:
                raise ValueError(f"DetectedCondition on {condition.obj!r}: geoms {unhandled} are of a type detection "
                                 "does not handle (spheres, capsules, cylinders and boxes)")
            row = [DETECTED, obj, int(is_site), region.id, int(sphere), int(condition.negated), first, count]
            size = tuple(float(v) for v in m.site_size[region.id])
        elif isinstance(condition, JointCondition):
            row[:2] = [JOINT, int(m.joint(condition.joint).qposadr[0])]
            size = (float(condition.position), 0.0, 0.0)
        elif isinstance(condition, GraspedCondition):
            row[:2] = [GRASPED, m.body(condition.obj).id]
        else:
            assert isinstance(condition, NothingGrasped)
            row[0] = NOTHING_GRASPED
        self.rows.append(row)
        self.sizes.append(size)
        self.index[condition] = len(self.rows) - 1
        return len(self.rows) - 1

    def node(self, condition: Condition) -> int:
        """The node (column of `values`) of a condition given to the constructor."""
        return self.index[condition]

    def evaluate(self, d: Any, start_qpos: wp.array, variation: wp.array, out: wp.array,
                 geom_rgba: wp.array | None = None) -> None:
        """out[world] = 1 where the world's variation's condition is met (after forward and collision);
        the geoms of the met indicators coloured in `geom_rgba` (the model's per-world colours)."""
        self.touching.zero_()
        wp.launch(_pad_contacts, dim=d.naconmax, device=self.device, inputs=[
            d.nacon, d.contact.geom, d.contact.worldid, self.geom_bodyid, self.pads, self.touching])
        wp.launch(_evaluate, dim=d.nworld, device=self.device, inputs=[
            self.nodes, self.node_sizes, self.child_list, self.roots, variation, self.geom_type, self.geom_size,
            self.geom_rbound, d.geom_xpos, d.geom_xmat, d.site_xpos, d.site_xmat,
            d.qpos, start_qpos, self.touching, self.progress, self.values, out])
        if self.has_indicators and geom_rgba is not None:
            wp.launch(_indicate, dim=d.nworld, device=self.device, inputs=[
                variation, self.indicator_nodes, self.indicator_geoms, self.indicator_colours, self.values, geom_rgba])

    def restart(self, mask: wp.array) -> None:
        """The masked worlds start new episodes: their ordered sets start from nothing met."""
        wp.launch(_clear_progress, dim=self.progress.shape, device=self.device, inputs=[mask, self.progress])
