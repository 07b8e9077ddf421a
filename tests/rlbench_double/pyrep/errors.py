class PyRepError(Exception):
    pass


class ConfigurationPathError(Exception):
    pass


class IKError(Exception):
    pass
