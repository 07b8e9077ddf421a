"""rlbench_vec: many RLBench environments in parallel worker processes, observations in shared memory."""

from .backends.base import Demo
from .config import CAMERAS, MODALITIES, EnvConfig, VectorConfig
from .errors import (
    ActionError,
    BackendUnavailableError,
    ClosedError,
    ConfigError,
    DatasetError,
    RestartBudgetExceeded,
    RLBenchVecError,
    WorkerError,
)
from .gym_env import RLBenchEnv, make_env
from .vector_env import RLBenchVectorEnv

__version__ = "0.1.0"
__all__ = [
    "RLBenchVectorEnv", "RLBenchEnv", "make_env", "EnvConfig", "VectorConfig", "Demo", "CAMERAS", "MODALITIES",
    "RLBenchVecError", "ConfigError", "ActionError", "ClosedError", "BackendUnavailableError",
    "WorkerError", "RestartBudgetExceeded", "DatasetError",
]
