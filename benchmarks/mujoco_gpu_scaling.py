"""Where MuJoCo time goes as envs share one GPU: physics alone, one camera, five cameras; 1 and 16 envs.

    MUJOCO_GL=egl python benchmarks/mujoco_gpu_scaling.py     (results: docs/mujoco_gpu_scaling.txt)
"""

import time

import numpy as np

from rlbench_vec import CAMERAS, RLBenchVectorEnv

STEPS = 100

if __name__ == "__main__":
    for num_envs in (1, 16):
        for cameras in ((), ("front",), CAMERAS):
            env = RLBenchVectorEnv(num_envs=num_envs, task="reach_target", backend="mujoco", renderer="egl",
                                   cameras=cameras, arm_mode="joint_velocity")
            env.reset(seed=0)
            actions = np.zeros((num_envs, 8), np.float32)
            actions[:, -1] = 1.0  # gripper open, arm still: physics and rendering, no IK
            for _ in range(5):
                env.step(actions)
            env.reset_stats()
            start = time.perf_counter()
            for _ in range(STEPS):
                env.step(actions)
            elapsed = time.perf_counter() - start
            ms = {key: env.stats()[key].mean() / STEPS * 1e3 for key in ("exec_s", "write_s", "ipc_s")}
            print(f"envs {num_envs:2d} cameras {len(cameras)}: {STEPS / elapsed:6.1f} steps/s per env; "
                  f"exec {ms['exec_s']:.2f} ms write {ms['write_s']:.2f} ms ipc {ms['ipc_s']:.2f} ms", flush=True)
            env.close()
