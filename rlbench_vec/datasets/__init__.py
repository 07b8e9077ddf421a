"""Demos on disk: RLBench's own layout (rlbench_format: its names, paths and encodings; rlbench_writer,
rlbench_reader), LeRobot datasets (lerobot_format, whose writer needs the optional `lerobot` package), and
the writer processes of rlbench_vec.collect (writers).

May import: the package's base modules (errors, config, spec, backends.base: a demo's fields) and `wire`
(the writers' processes and shared buffers); never a simulator, the engine, the worker side or the front."""

from .rlbench_format import completed_episodes, episode_dir, stored_episodes
from .rlbench_reader import read_episode
from .rlbench_writer import remove_stale_staging, write_episode

__all__ = ["completed_episodes", "episode_dir", "read_episode", "remove_stale_staging", "stored_episodes",
           "write_episode"]
