"""Upstream's waypoint classes, less path planning: what a task's get_waypoints() returns."""


class Waypoint(object):

    def __init__(self, waypoint, robot, ignore_collisions=False, start_of_path_func=None, end_of_path_func=None):
        self._waypoint = waypoint
        self._robot = robot
        self._ext = waypoint.get_extension_string()
        self._ignore_collisions = ignore_collisions
        self._linear_only = False
        self._start_of_path_func = start_of_path_func
        self._end_of_path_func = end_of_path_func
        self.skip = False
        if len(self._ext) > 0:
            self._ignore_collisions = 'ignore_collision' in self._ext
            self._linear_only = 'linear' in self._ext

    def get_ext(self) -> str:
        return self._ext

    def get_waypoint_object(self):
        return self._waypoint

    def start_of_path(self) -> None:
        if self._start_of_path_func is not None:
            self._start_of_path_func(self)

    def end_of_path(self) -> None:
        if self._end_of_path_func is not None:
            self._end_of_path_func(self)


class Point(Waypoint):
    pass


class PredefinedPath(Waypoint):
    pass
