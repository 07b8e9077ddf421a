class NoiseModel(object):
    def apply(self, val):
        raise NotImplementedError


class Identity(NoiseModel):
    def apply(self, val):
        return val
