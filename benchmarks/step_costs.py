"""The step-cost settings of benchmarks/peers.py (measured) and benchmarks/partial_gain.py (modelled):
synthetic backend options by name, and the env-steps timed per measurement (spread over the envs, at
least one chunk of 16 per env): enough for stable numbers, few enough for a 2-core machine."""

from __future__ import annotations

from typing import Any

SETTINGS: dict[str, dict[str, Any]] = {
    "0 ms": {"options": {"step_cost_s": 0.0}, "env_steps": 1024},
    "10 ms": {"options": {"step_cost_s": 0.01}, "env_steps": 256},
    "heavy-tailed": {
        "options": {"step_cost_s": 0.01, "step_cost_dist": "pareto", "reset_cost_s": 0.05, "episode_length": 10},
        "env_steps": 256,
    },
}
