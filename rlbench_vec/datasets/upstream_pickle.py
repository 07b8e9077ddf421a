"""RLBench's pickled `Demo` of `Observation`s, written and read without importing RLBench.

Upstream's `low_dim_obs.pkl` is a pickled `rlbench.demo.Demo` whose `_observations` are
`rlbench.backend.observation.Observation`s. Neither class defines `__reduce__` or `__setstate__`,
so a pickle of one is just "that class, by module and name" plus its instance `__dict__`. The
stand-in classes below carry exactly upstream's attribute dict and are written under upstream's
module paths, so a Python with RLBench unpickles them into the real classes; our reader maps those
two names back to the stand-ins, so it needs no RLBench (and never imports it, which would start
CoppeliaSim).

Python's C pickler refuses to write a class under a module it cannot import, so the four globals
that must carry other names (the two classes, and numpy's array and scalar rebuilders as
`numpy.core.multiarray`: numpy 2 writes `numpy._core...`, which the numpy 1.x of most RLBench installs
cannot import, while numpy 2 keeps the old names loadable for pickles) are written first, under those
names, into the pickle's memo; the C pickler then starts with its memo holding them, so it refers to
each by its memo slot and never looks one up. That keeps the ~1,000 arrays of a demo on the C
pickler, many times faster than the pure-Python one.
"""

from __future__ import annotations

import io
import pickle
from typing import Any, BinaryIO

import numpy as np

from ..config import CAMERAS, LOW_DIM_FIELDS, MODALITIES
from ..errors import DatasetError

# rlbench/backend/observation.py: Observation.__init__ assigns these, in this order (our CAMERAS,
# MODALITIES and LOW_DIM_FIELDS follow it; upstream adds gripper_touch_forces and misc).
OBSERVATION_ATTRIBUTES = (
    *(f"{camera}_{kind}" for camera in CAMERAS for kind in MODALITIES),
    *LOW_DIM_FIELDS[:-1],
    "gripper_touch_forces",
    "task_low_dim_state",
    "ignore_collisions",
    "misc",
)
DEMO_ATTRIBUTES = ("_observations", "random_seed", "num_reset_attempts")  # rlbench/demo.py
PROTOCOL = 4  # Python 3.4+; upstream's pickle.dump default on Python 3.8+


class UpstreamObservation:
    """Stand-in for rlbench.backend.observation.Observation: the same attribute dict, all None unless given."""

    def __init__(self, **attributes: Any):
        unknown = set(attributes) - set(OBSERVATION_ATTRIBUTES)
        if unknown:
            raise DatasetError(f"RLBench's Observation has no attribute(s) {sorted(unknown)}.")
        self.__dict__.update({name: attributes.get(name) for name in OBSERVATION_ATTRIBUTES})


class UpstreamDemo:
    """Stand-in for rlbench.demo.Demo. Indexable like upstream's, so readers can treat both alike."""

    def __init__(self, observations: list[UpstreamObservation], random_seed: Any = None,
                 num_reset_attempts: int | None = None):
        self._observations = observations
        self.random_seed = random_seed
        self.num_reset_attempts = num_reset_attempts

    def __len__(self) -> int:
        return len(self._observations)

    def __getitem__(self, i: int) -> UpstreamObservation:
        return self._observations[i]


_RECONSTRUCT = np.empty(0).__reduce__()[0]
_SCALAR = np.float64(0).__reduce__()[0]
# Written under upstream's / numpy 1.x's names whatever the writing Python has.
WRITTEN_AS = {
    UpstreamDemo: ("rlbench.demo", "Demo"),
    UpstreamObservation: ("rlbench.backend.observation", "Observation"),
    _RECONSTRUCT: ("numpy.core.multiarray", "_reconstruct"),
    _SCALAR: ("numpy.core.multiarray", "scalar"),
}
# What the reader resolves; anything else in a pickle is refused (a dataset is data, not code).
READ_AS = {
    ("rlbench.demo", "Demo"): UpstreamDemo,
    ("rlbench.backend.observation", "Observation"): UpstreamObservation,
    ("numpy.core.multiarray", "_reconstruct"): _RECONSTRUCT,
    ("numpy._core.multiarray", "_reconstruct"): _RECONSTRUCT,
    ("numpy.core.multiarray", "scalar"): _SCALAR,
    ("numpy._core.multiarray", "scalar"): _SCALAR,
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
}


def _named_globals() -> tuple[bytes, dict[int, tuple[int, Any]]]:
    """The pickle opcodes that put each WRITTEN_AS object, under its upstream name, into memo slot
    0, 1, ... (and leave the stack as it was), and the C pickler's memo that refers to those slots."""
    opcodes, memo = bytearray(pickle.PROTO + bytes([PROTOCOL])), {}
    for slot, (target, names) in enumerate(WRITTEN_AS.items()):
        for name in map(str.encode, names):
            opcodes += pickle.SHORT_BINUNICODE + bytes([len(name)]) + name
        opcodes += pickle.STACK_GLOBAL + pickle.MEMOIZE + pickle.POP
        memo[id(target)] = (slot, target)
    return bytes(opcodes), memo


class _UpstreamUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        found = READ_AS.get((module, name))
        if found is None:
            raise DatasetError(
                f"the pickle refers to {module}.{name}, which is not part of RLBench's dataset format; "
                "refusing to load it (unpickling runs code). Only trusted RLBench-format pickles can be read."
            )
        return found


def dumps(obj: Any) -> bytes:
    """Pickle `obj` so that Demo/Observation stand-ins load as RLBench's classes."""
    prelude, memo = _named_globals()
    buffer = io.BytesIO(prelude)
    buffer.seek(0, io.SEEK_END)
    pickler = pickle.Pickler(buffer, protocol=PROTOCOL)
    pickler.memo = memo  # the C pickler takes a dict {id(object): (slot, object)}
    pickler.dump(obj)
    return buffer.getvalue()


def load(file: BinaryIO) -> Any:
    """Unpickle an RLBench-format pickle (ours or upstream's) into the stand-ins, without RLBench."""
    try:
        return _UpstreamUnpickler(file).load()
    except (pickle.UnpicklingError, EOFError) as error:
        raise DatasetError(f"not a readable RLBench-format pickle: {error}") from error
