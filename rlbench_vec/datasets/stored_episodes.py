"""The stored episodes an evaluation scores (`evaluate --episodes_from DIR`): each task's episodes of a dataset
in RLBench's layout (rlbench_format), in RLBench's order, with what resets an env to each one's start, and the
dataset's identity (a hash of the files that decide the episodes' starts).

Episode i of a task is its i-th stored episode: with an all_variations folder (PerAct's test set, the dataset
generator's --all_variations) the i-th of that folder in natural order, as YARR asks RLBench for it
(set_variation(-1), get_demos(1, random_selection=False, from_episode_number=i)); else the variation folders
one after another, each in natural order.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DatasetError
from . import upstream_pickle
from .rlbench_format import (
    EPISODE_FOLDER,
    EPISODES_FOLDER,
    LOW_DIM_PICKLE,
    VARIATION_DESCRIPTIONS,
    VARIATION_NUMBER,
    VARIATIONS_ALL_FOLDER,
    episode_numbers,
    variation_dir,
    variation_folders,
)

# The files of an episode that decide its start (its variation, its goal, the state its scene is placed from).
IDENTITY_FILES = (LOW_DIM_PICKLE, VARIATION_NUMBER, VARIATION_DESCRIPTIONS)


@dataclass(frozen=True)
class StoredEpisode:
    """One stored episode: its folder; `number`, its place in that folder's natural order (RLBench's
    from_episode_number); whether the folder is all_variations; its variation and descriptions; and
    reset_seed, the seed an embedded backend's reset starts its scene from (None: the dataset was not written
    by rlbench_vec's collect, so only RLBench's reset_to_demo can start it)."""

    path: Path
    number: int
    all_variations: bool
    variation: int
    descriptions: tuple[str, ...]
    reset_seed: int | None


def stored_task_episodes(root: str | os.PathLike, task: str, limit: int | None = None) -> list[StoredEpisode]:
    """The first `limit` (None: all) stored episodes of `task` under `root`, in RLBench's order; DatasetError
    where the task has none."""
    every = Path(root) / task / VARIATIONS_ALL_FOLDER / EPISODES_FOLDER
    parents = [every] if every.is_dir() else [variation_dir(root, task, v) / EPISODES_FOLDER
                                              for v in variation_folders(root, task)]
    folders = [(every.is_dir(), parent, episode_numbers(parent)) for parent in parents]
    found = [(shared, parent, place, number) for shared, parent, numbers in folders
             for place, number in enumerate(numbers)]
    if not found:
        raise DatasetError(f"{root} holds no stored episodes of {task}: RLBench's layout puts them in "
                           f"{Path(root) / task}/all_variations/episodes/episode0/ or "
                           f"{Path(root) / task}/variation0/episodes/episode0/ (python -m rlbench_vec.collect "
                           "--format rlbench writes either).")
    return [_episode(parent / (EPISODE_FOLDER % number), place, shared)
            for shared, parent, place, number in found[:limit]]


def _episode(path: Path, number: int, all_variations: bool) -> StoredEpisode:
    try:
        with open(path / LOW_DIM_PICKLE, "rb") as file:
            demo = upstream_pickle.load(file)
        variation = _variation(path, demo)
        descriptions = _descriptions(path)
    except OSError as error:
        raise DatasetError(f"{path} is not a whole RLBench episode: {error}") from None
    return StoredEpisode(path, number, all_variations, variation, tuple(descriptions),
                         seed_of_state(getattr(demo, "random_seed", None)))


def _variation(path: Path, demo: Any) -> int:
    """variation_number.pkl (the PerAct fork's), else the first observation's misc, else the folder's name."""
    if (path / VARIATION_NUMBER).is_file():
        with open(path / VARIATION_NUMBER, "rb") as file:
            return int(upstream_pickle.load(file))
    misc = (getattr(demo[0], "misc", None) or {}) if len(demo) else {}
    if "variation_index" in misc:
        return int(misc["variation_index"])
    name = path.parent.parent.name
    if name.startswith("variation") and name[len("variation"):].isdigit():
        return int(name[len("variation"):])
    raise DatasetError(f"cannot tell the variation of {path}: no {VARIATION_NUMBER}, misc or variation folder.")


def _descriptions(path: Path) -> list[str]:
    for candidate in (path / VARIATION_DESCRIPTIONS, path.parent.parent / VARIATION_DESCRIPTIONS):
        if candidate.is_file():
            with open(candidate, "rb") as file:
                return [str(text) for text in upstream_pickle.load(file)]
    return []


def seed_of_state(state: Any) -> int | None:
    """The seed s whose np.random.RandomState(s).get_state() is `state` (how collect stores a demo's reset seed as
    upstream's random_seed), else None: a state drawn on by RLBench names no seed. MT19937 seeded with s keeps s
    as its first key word; the whole state is compared, so no other state is mistaken for one."""
    if not (isinstance(state, tuple) and len(state) == 5 and state[0] == "MT19937"):
        return None
    key = np.asarray(state[1])
    if key.shape != (624,):
        return None
    again = np.random.RandomState(int(key[0])).get_state()
    same = np.array_equal(key, again[1]) and tuple(state[2:]) == tuple(again[2:])  # type: ignore[index]
    return int(key[0]) if same else None


def dataset_identity(root: str | os.PathLike, episodes: dict[str, list[StoredEpisode]]) -> str:
    """sha256 over every scored episode's place and the bytes of its IDENTITY_FILES: another dataset, or one
    whose scored episodes changed, has another identity (images are left out: they decide no start)."""
    digest = hashlib.sha256()
    for task, stored in episodes.items():
        for episode in stored:
            digest.update(f"{task}/{episode.path.relative_to(root)}\n".encode())
            for name in IDENTITY_FILES:
                file = episode.path / name
                digest.update(f"{name} {file.stat().st_size if file.is_file() else -1}\n".encode())
                if file.is_file():
                    digest.update(file.read_bytes())
    return digest.hexdigest()
