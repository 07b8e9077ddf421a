import glob
import os
from enum import Enum


class RandomizeEvery(Enum):
    EPISODE = 0
    VARIATION = 1
    TRANSITION = 1  # the same value: an alias of VARIATION, as upstream


class RandomizationConfig(object):

    def __init__(self, whitelist=None, blacklist=None, randomize_arm: bool = True):
        self.whitelist = whitelist
        self.blacklist = [] if blacklist is None else blacklist
        self.randomize_arm = randomize_arm


class DynamicsRandomizationConfig(RandomizationConfig):
    pass


EXTENSIONS = ['*.jpg', '*.png']


class VisualRandomizationConfig(RandomizationConfig):

    def __init__(self, image_directory: str, whitelist=None, blacklist=None, randomize_arm: bool = True):
        super().__init__(whitelist, blacklist, randomize_arm)
        self._image_directory = image_directory
        if not os.path.exists(image_directory):
            raise NotADirectoryError('The supplied image directory (%s) does not exist!' % image_directory)
        self._imgs = [f for e in EXTENSIONS for f in glob.glob(os.path.join(image_directory, e))]
        if len(self._imgs) == 0:
            raise RuntimeError('The supplied image directory (%s) does not have any images!' % image_directory)
