"""Demos on disk: RLBench's own layout (rlbench_format) and LeRobot datasets (lerobot_format, which needs
the optional `lerobot` package and is imported from its module only)."""

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
