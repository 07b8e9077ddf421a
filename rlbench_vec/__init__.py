"""rlbench_vec: many RLBench environments in parallel worker processes, observations in shared memory."""

from .wire.process import capture_boot_output

capture_boot_output()  # in a spawned worker only: its start-up output goes where the main process can quote it

from .backends import list_tasks  # noqa: E402
from .backends.base import Demo  # noqa: E402
from .config import CAMERAS, MODALITIES, EnvConfig, VectorConfig, VideoConfig  # noqa: E402
from .errors import (  # noqa: E402
    ActionError,
    BackendUnavailableError,
    ClosedError,
    ConfigError,
    DatasetError,
    ResetNeeded,
    RestartBudgetExceeded,
    RLBenchVecError,
    WorkerError,
    WorkerStartError,
)
from .gym_env import RLBenchEnv, make_env  # noqa: E402
from .task_names import SUITES  # noqa: E402
from .vector_env import RLBenchVectorEnv  # noqa: E402

__version__ = "0.2.0"
__all__ = [
    "RLBenchVectorEnv", "RLBenchEnv", "make_env", "list_tasks", "EnvConfig", "VectorConfig", "VideoConfig", "Demo",
    "CAMERAS", "MODALITIES", "SUITES", "RLBenchVecError", "ConfigError", "ActionError", "ClosedError",
    "BackendUnavailableError", "WorkerError", "WorkerStartError", "ResetNeeded", "RestartBudgetExceeded",
    "DatasetError",
]
