"""RRTConnect (Kuffner and LaValle, 2000), the sampling planner RLBench's CoppeliaSim runs through OMPL, in joint
space: two trees, one from the start and one from the goal configurations, each step extending one towards a
random sample and connecting the other to what it reached; the path found is then shortened.

Written here rather than called through OMPL's wheels: OMPL draws from one random generator per process and
stops on a time budget, so a planned path would depend on what the worker's other envs planned before and on
the machine's load. Here a plan's randomness is its own (`rng`, seeded from the move) and its budget a number of
iterations: one env's plans never change another's, and a move plans the same on any machine. Numpy only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

Points = list[np.ndarray]


class Tree:
    """Configurations and each one's parent (-1: a root)."""

    def __init__(self, roots: Sequence[np.ndarray]):
        self.nodes = np.array(roots, dtype=np.float64)
        self.parents = [-1] * len(roots)

    def nearest(self, q: np.ndarray) -> int:
        return int(np.argmin(np.max(np.abs(self.nodes - q), axis=1)))

    def add(self, q: np.ndarray, parent: int) -> int:
        self.nodes = np.vstack([self.nodes, q])
        self.parents.append(parent)
        return len(self.parents) - 1

    def branch(self, index: int) -> Points:
        """The configurations from `index` back to its root."""
        points = []
        while index >= 0:
            points.append(self.nodes[index])
            index = self.parents[index]
        return points


def _extend(tree: Tree, target: np.ndarray, step: float, segment_free: Callable[[Points], bool]) -> int | None:
    """One step of at most `step` (largest joint move) from the tree's nearest node towards target: the new node,
    or None where that step collides."""
    near = tree.nearest(target)
    start = tree.nodes[near]
    gap = float(np.max(np.abs(target - start)))
    q = target if gap <= step else start + (target - start) * (step / gap)
    return tree.add(q, near) if segment_free([start, q]) else None


def _connect(tree: Tree, target: np.ndarray, step: float, segment_free: Callable[[Points], bool]) -> int | None:
    """Steps towards target until it is reached (the node reaching it) or a step collides (None)."""
    while True:
        index = _extend(tree, target, step, segment_free)
        if index is None:
            return None
        if np.array_equal(tree.nodes[index], target):
            return index


def shortcut(path: Points, segment_free: Callable[[Points], bool], rng: np.random.Generator, tries: int) -> Points:
    """The path with random pairs of its points joined directly where that segment is free."""
    path = list(path)
    for _ in range(tries):
        if len(path) < 3:
            break
        i, j = sorted(rng.choice(len(path), 2, replace=False))
        if j - i > 1 and segment_free([path[i], path[j]]):
            path = path[:i + 1] + path[j:]
    return path


def rrt_connect(start: np.ndarray, goals: Sequence[np.ndarray], low: np.ndarray, high: np.ndarray,
                segment_free: Callable[[Points], bool], rng: np.random.Generator, step: float,
                iterations: int) -> Points | None:
    """A collision-free joint path from start to one of the goals (start first), shortened; None where
    `iterations` samples found none. segment_free: whether the straight joint move along the points is free."""
    trees = [Tree([start]), Tree(goals)]  # trees[0] grows from the start while `grow` is 0
    grow = 0
    for _ in range(iterations):
        growing, other = trees[grow], trees[1 - grow]
        reached = _extend(growing, rng.uniform(low, high), step, segment_free)
        if reached is not None:
            met = _connect(other, growing.nodes[reached], step, segment_free)
            if met is not None:
                from_start, from_goal = (growing, other) if grow == 0 else (other, growing)
                start_end, goal_end = (reached, met) if grow == 0 else (met, reached)
                path = from_start.branch(start_end)[::-1] + from_goal.branch(goal_end)[1:]
                return shortcut(path, segment_free, rng, tries=2 * len(path))
        grow = 1 - grow
    return None
