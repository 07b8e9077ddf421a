import numpy as np

from pyrep.objects.object import Object


class CartesianPath(Object):
    """A straight path from `start` to `end` (positions) at a fixed orientation (Euler angles)."""

    def __init__(self, start, end, orientation):
        super().__init__(start)
        self._start, self._end = np.asarray(start, np.float64), np.asarray(end, np.float64)
        self._orientation = np.asarray(orientation, np.float64)

    def get_pose_on_path(self, relative_distance: float):
        """Position and Euler angles at `relative_distance` (0 to 1) along the path, as PyRep's."""
        position = self._start + relative_distance * (self._end - self._start)
        return list(position), list(self._orientation)
