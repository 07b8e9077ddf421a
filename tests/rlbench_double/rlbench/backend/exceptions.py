class BoundaryError(Exception):
    """Raised when a boundary error occurs."""


class InvalidActionError(Exception):
    pass


class TaskEnvironmentError(Exception):
    pass
