"""Test double of RLBench 1.2.0: the module paths, names and signatures rlbench_vec uses.

Upstream's __init__ also imports gymnasium to register environments; the double does not need it.
"""

__version__ = "1.2.0"

from rlbench.environment import Environment  # noqa: E402
from rlbench.observation_config import CameraConfig, ObservationConfig  # noqa: E402
from rlbench.sim2real.domain_randomization import RandomizeEvery, VisualRandomizationConfig  # noqa: E402
from rlbench.utils import name_to_task_class  # noqa: E402

__all__ = ["CameraConfig", "Environment", "ObservationConfig", "RandomizeEvery", "VisualRandomizationConfig",
           "name_to_task_class"]
