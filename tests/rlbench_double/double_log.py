"""Call recorder of the RLBench/PyRep test double (not an upstream module).

Knobs, read from the environment (spawned workers inherit them):
  RLBENCH_DOUBLE_LOG           JSON-lines file: one {"pid", "event", ...} record per recorded call
  RLBENCH_DOUBLE_FAIL_RESETS   the first N resets in each process raise TaskEnvironmentError
  RLBENCH_DOUBLE_PERACT_FORK   "1": PerAct's fork: MoveArmThenGripper slices action[:7], [7:8], bool(action[8:9])
                               and the pose arm modes' action() takes ignore_collisions (recorded: "arm_move")
Without a reachable X display, PyRep.launch writes Qt's message to fd 2 and aborts (SIGABRT), as Qt does.
Magic actions: an arm action whose first value is -0.0111 raises pyrep.errors.IKError, -0.0222 raises
ConfigurationPathError (the raw PyRep errors that some code paths let through unwrapped); values inside
every arm mode's bounds, so that the engine's clipping leaves them as they are.
"""

from __future__ import annotations

import json
import os
from enum import Enum
from typing import Any


def _plain(obj: Any) -> Any:
    if isinstance(obj, Enum):
        return obj.name
    if hasattr(obj, "tolist"):
        return obj.tolist()
    return {"class": type(obj).__name__, **{k.lstrip("_"): v for k, v in vars(obj).items()}}


def record(event: str, **data: Any) -> None:
    path = os.environ.get("RLBENCH_DOUBLE_LOG")
    if path:
        line = json.dumps({"pid": os.getpid(), "event": event, **data}, default=_plain)
        with open(path, "a") as file:
            file.write(line + "\n")
