"""Embedded MuJoCo backend: a Franka Panda on a table with RLBench's cameras, tasks and action modes.

Importing this package does not import MuJoCo (the main process only needs the classmethods).
"""

from .backend import MujocoBackend

BACKEND = MujocoBackend
