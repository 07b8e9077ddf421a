class BoundaryError(Exception):
    """Raised when a boundary error occurs."""


class WaypointError(Exception):
    def __init__(self, message, task):
        super().__init__('Error in task %s. %s' % (task.get_name(), message))


class InvalidActionError(Exception):
    pass


class TaskEnvironmentError(Exception):
    pass
