from typing import List

import numpy as np

from rlbench.backend.task import Task

COLORS = ['red', 'maroon', 'lime', 'green', 'blue', 'navy', 'yellow', 'cyan', 'magenta', 'silver',
          'gray', 'orange', 'olive', 'purple', 'teal', 'azure', 'violet', 'rose', 'black', 'white']


class ReachTarget(Task):

    def init_episode(self, index: int) -> List[str]:
        super().init_episode(index)
        return ['reach the %s target' % COLORS[index],
                'touch the %s ball with the panda gripper' % COLORS[index]]

    def variation_count(self) -> int:
        return len(COLORS)

    def get_low_dim_state(self) -> np.ndarray:
        return np.array(self.target)

    def reward(self) -> float:
        return -float(np.linalg.norm(self.target - self.robot.gripper_pose[:3]))
