import numpy as np

from rlbench.backend.task import Task


class PickAndLift(Task):

    def variation_count(self) -> int:
        return 20

    def get_low_dim_state(self) -> np.ndarray:
        return np.concatenate([self.target, self.target + 0.1], 0)
