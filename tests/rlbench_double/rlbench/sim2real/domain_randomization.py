import os
from enum import Enum


class RandomizeEvery(Enum):
    EPISODE = 0
    VARIATION = 1
    TRANSITION = 1


class RandomizationConfig(object):

    def __init__(self, whitelist=None, blacklist=None, randomize_arm: bool = True):
        self.whitelist = whitelist
        self.blacklist = [] if blacklist is None else blacklist
        self.randomize_arm = randomize_arm


class DynamicsRandomizationConfig(RandomizationConfig):
    pass


class VisualRandomizationConfig(RandomizationConfig):

    def __init__(self, image_directory: str, whitelist=None, blacklist=None, randomize_arm: bool = True):
        super().__init__(whitelist, blacklist, randomize_arm)
        self._image_directory = image_directory
        if not os.path.exists(image_directory):
            raise NotADirectoryError('The supplied image directory (%s) does not exist!' % image_directory)
