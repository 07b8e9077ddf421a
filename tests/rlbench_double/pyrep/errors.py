class PyRepError(Exception):
    pass


class ConfigurationError(Exception):
    pass


class ConfigurationPathError(Exception):
    pass


class IKError(Exception):
    pass
