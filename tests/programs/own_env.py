"""A user program that owns a vector env, for tests that kill or interrupt it.

Prints one JSON line (main pid, worker pids, Xvfb pids, shared-memory name) once stepping, then
steps until it is killed or interrupted. argv[1]: JSON of RLBenchVectorEnv keyword arguments.
"""

import json
import sys

import numpy as np
import psutil

from rlbench_vec import RLBenchVectorEnv

if __name__ == "__main__":
    kwargs = json.loads(sys.argv[1])
    with RLBenchVectorEnv(**kwargs) as env:
        env.reset(seed=0)
        xvfb = [p.pid for p in psutil.Process().children(recursive=True) if p.name() == "Xvfb"]
        print(
            json.dumps({"pid": psutil.Process().pid, "workers": env.worker_pids, "xvfb": xvfb, "shm": env.shm_name}),
            flush=True,
        )
        actions = np.zeros(env.action_space.shape, np.float32)
        while True:
            env.step(actions)
