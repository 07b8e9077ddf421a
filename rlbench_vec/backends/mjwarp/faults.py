"""Per-world faults: a state that is no longer finite, or a contact/constraint buffer that overflowed.

MuJoCo Warp flags overflows per world in `Data.overflow`. Constraint rows (njmax) are per world, so
their flag names the world. Contacts share one pool of nconmax * num_worlds slots, and a full pool
flags every world; the world blamed is one holding at least its share (nconmax) of the pool, and the
flag is cleared for the others. A faulted world ends its episode and is restored to its episode start.
"""

from __future__ import annotations

import mujoco_warp as mjw
import warp as wp

NAN_STATE, CONSTRAINT_OVERFLOW, CONTACT_OVERFLOW = 1, 2, 4
FAULT_NAMES = {NAN_STATE: "nan_state", CONSTRAINT_OVERFLOW: "constraint_overflow", CONTACT_OVERFLOW: "contact_overflow"}

_NAN, _CONSTRAINT, _CONTACT = wp.constant(NAN_STATE), wp.constant(CONSTRAINT_OVERFLOW), wp.constant(CONTACT_OVERFLOW)
_CONSTRAINT_BITS = wp.constant(int(mjw.OverflowType.NEFC | mjw.OverflowType.NJMAX_NNZ))
_CONTACT_BITS = wp.constant(int(mjw.OverflowType.BROADPHASE | mjw.OverflowType.NARROWPHASE))


def fault_names(bits: int) -> list[str]:
    return [name for bit, name in FAULT_NAMES.items() if bits & bit]


@wp.kernel
def count_contacts(nacon: wp.array(dtype=int), worldid: wp.array(dtype=int), counts: wp.array(dtype=int)):
    """Contacts held by each world (launched over the pool; `counts` zeroed before)."""
    i = wp.tid()
    if i < nacon[0]:
        wp.atomic_add(counts, worldid[i], 1)


@wp.kernel
def detect_faults(qpos: wp.array2d(dtype=float), qvel: wp.array2d(dtype=float), overflow: wp.array(dtype=int),
                  contacts: wp.array(dtype=int), nconmax: int, fault: wp.array(dtype=int)):
    world = wp.tid()
    bits = fault[world]
    for i in range(qpos.shape[1]):
        if not wp.isfinite(qpos[world, i]):
            bits = bits | _NAN
    for i in range(qvel.shape[1]):
        if not wp.isfinite(qvel[world, i]):
            bits = bits | _NAN
    flags = overflow[world]
    if (flags & _CONSTRAINT_BITS) != 0:
        bits = bits | _CONSTRAINT
    if (flags & _CONTACT_BITS) != 0:
        if contacts[world] >= nconmax:
            bits = bits | _CONTACT
        overflow[world] = flags & ~_CONTACT_BITS
    fault[world] = bits
