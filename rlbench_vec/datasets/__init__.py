"""Demos on disk: RLBench's own layout (rlbench_format), LeRobot datasets (lerobot_format, whose writer needs
the optional `lerobot` package), and the writer processes of rlbench_vec.collect (writers)."""

from .rlbench_format import (
    completed_episodes,
    episode_dir,
    read_episode,
    remove_stale_staging,
    stored_episodes,
    write_episode,
)

__all__ = ["completed_episodes", "episode_dir", "read_episode", "remove_stale_staging", "stored_episodes",
           "write_episode"]
