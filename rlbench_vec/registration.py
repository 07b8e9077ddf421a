"""The gymnasium id "rlbench_vec/RLBench-v0", registered by `import rlbench_vec`: gymnasium.make builds an
RLBenchEnv and gymnasium.make_vec an RLBenchVectorEnv. The entry points are named as strings, so the
registration imports neither class (nor anything that starts a simulator) until an env is made.
"""

from __future__ import annotations

ENV_ID = "rlbench_vec/RLBench-v0"


def register_env_id() -> None:
    """Register ENV_ID once (importing the package again, or under a worker, registers nothing twice)."""
    from gymnasium.envs.registration import register, registry

    if ENV_ID not in registry:
        register(ENV_ID, entry_point="rlbench_vec.gym_env:RLBenchEnv",
                 vector_entry_point="rlbench_vec.vector_env:RLBenchVectorEnv")
