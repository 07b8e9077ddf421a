"""What driving a YARR agent costs evaluate's main process per env and step, the agent's own act() aside: building
the observation PerAct's environment builds (channels first, float32, torch tensors with [1, 1] leading dims) from
a batch of the vector env's rows, and reading back the action (rlbench_vec/cli/yarr.py), at --protocol peract's
observation (four cameras, rgb and point clouds at 128x128).

    PYTHONPATH=. python benchmarks/yarr_observation.py --num_envs 16 --rounds 50
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from rlbench_vec.cli.evaluate_config import PROTOCOLS
from rlbench_vec.cli.yarr import YARR_ACTION, YarrAgent
from rlbench_vec.config import EnvConfig
from rlbench_vec.spec import observation_spec


class StandIn:
    """An agent that answers at once: only the adapter's work is timed."""

    def reset(self) -> None:
        pass

    def act(self, step: int, observation: dict, deterministic: bool = False) -> np.ndarray:
        return np.zeros(YARR_ACTION, np.float32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num_envs", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=50)
    args = parser.parse_args()
    peract = PROTOCOLS["peract"]
    config = EnvConfig(task="reach_target", backend="mujoco", cameras=peract["cameras"],
                       modalities=peract["modalities"], image_size=peract["image_size"], arm_mode="planning",
                       misc=True).validated()
    rows = args.num_envs
    obs = {key: np.zeros((rows, *spec.shape), spec.dtype) for key, spec in observation_spec(config).items()}
    info = {"env_id": np.arange(rows), "step": [0] * rows, "lang_goal": ["reach the red target"] * rows,
            "task": ["reach_target"] * rows}
    agent = YarrAgent(StandIn(), config, peract["max_steps"])
    agent.act(obs, info)
    start = time.perf_counter()
    for _ in range(args.rounds):
        agent.act(obs, info)
    per_env = (time.perf_counter() - start) / args.rounds / rows
    print(f"{1000 * per_env:.3f} ms per env and step ({rows} envs, {args.rounds} rounds)")


if __name__ == "__main__":
    main()
