"""Batch assembly, in-process: pages of results become gymnasium's (obs, reward, terminated,
truncated, info)."""

from __future__ import annotations

import numpy as np
from gymnasium.vector import SyncVectorEnv

from rlbench_vec.engine.results import EXECUTED, REWARD, TERMINATED, TRUNCATED, Batch, assemble, merge_infos
from rlbench_vec.errors import WorkerError
from rlbench_vec.wire.protocol import EPISODE_OVER


def page(n: int = 3, k: int = 4) -> tuple[dict[str, np.ndarray], np.ndarray]:
    obs = {"rgb": np.arange(n * 2 * 2 * 3, dtype=np.uint8).reshape(n, 2, 2, 3), "pose": np.ones((n, 7))}
    outcome = np.zeros((n, 4, k))
    return obs, outcome


def batch(rows: int, widths, flags=None, infos=None, errors=None) -> Batch:
    return Batch(page=0, rows=rows, envs=np.arange(rows), widths=np.asarray(widths),
                 flags=np.zeros(rows, np.uint8) if flags is None else np.asarray(flags, np.uint8),
                 infos=infos or [None] * rows, errors=errors or [])


def test_observations_are_views_of_the_rows_unless_copied():
    obs, outcome = page()
    views, *_ = assemble(batch(2, [1, 1]), obs, outcome, None, chunked=False, copy=False)
    assert views["rgb"].shape == (2, 2, 2, 3) and np.shares_memory(views["rgb"], obs["rgb"])
    copies, *_ = assemble(batch(2, [1, 1]), obs, outcome, None, chunked=False, copy=True)
    assert not np.shares_memory(copies["rgb"], obs["rgb"]) and np.array_equal(copies["rgb"], views["rgb"])


def test_columns_past_a_rows_own_chunk_read_as_zero():
    obs, outcome = page()
    outcome[:, REWARD] = 5.0  # stale everywhere
    outcome[:, EXECUTED] = 1.0
    outcome[0, TERMINATED, 1] = 1.0
    _, reward, terminated, truncated, info = assemble(batch(3, [2, 4, 0]), obs, outcome, None, chunked=True, copy=False)
    assert reward.tolist() == [[5, 5, 0, 0], [5, 5, 5, 5], [0, 0, 0, 0]]
    assert terminated[0].tolist() == [False, True, False, False] and not truncated.any()
    assert info["executed"].sum(axis=1).tolist() == [2, 4, 0]


def test_a_failed_row_reads_as_no_outcome_and_its_error_is_left_to_the_caller():
    """Output.result raises the batch's first error with this whole result (tests/test_pool.py)."""
    obs, outcome = page()
    _, reward, terminated, *_ = assemble(batch(2, [1, 0], errors=[WorkerError(1, "boom")]), obs, outcome, None,
                                         chunked=False, copy=False)
    assert reward[1] == 0 and not terminated[1]


def test_infos_merge_as_gymnasium_merges_them():
    infos = [
        {"count": 3, "ratio": 0.5, "name": "a", "nested": {"x": 1}, "array": np.ones(2), "final_obs": {"p": 1}},
        None,
        {"count": 4, "nested": {"x": 2, "y": True}},
    ]
    reference = SyncVectorEnv.__new__(SyncVectorEnv)
    reference.num_envs = 3
    expected: dict = {}
    for i, info in enumerate(infos):
        if info:
            expected = reference._add_info(expected, info, i)
    merged = merge_infos(infos)
    assert merged.keys() == expected.keys()
    for key in expected:
        if isinstance(expected[key], dict):
            assert merged[key].keys() == expected[key].keys()
            for inner in expected[key]:
                np.testing.assert_array_equal(merged[key][inner], expected[key][inner])
        else:
            assert merged[key].dtype == expected[key].dtype, key
            np.testing.assert_array_equal(merged[key], expected[key])


def test_episode_flags_come_from_the_outcome_block():
    obs, outcome = page(k=1)
    outcome[1, TRUNCATED, 0] = 1.0
    _, _, terminated, truncated, _ = assemble(batch(3, [1, 1, 1], flags=[0, EPISODE_OVER, 0]), obs, outcome, None,
                                              chunked=False, copy=False)
    assert truncated.tolist() == [False, True, False] and not terminated.any()
