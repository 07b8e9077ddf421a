"""Test double of PyRep 4.1.0.3: the module paths, names and signatures rlbench_vec uses."""

__version__ = "4.1.0.3"

from .pyrep import PyRep  # noqa: E402  (as upstream)
