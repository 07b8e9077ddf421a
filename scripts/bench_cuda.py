"""CUDA delivery, measured: host-to-device bandwidth from pinned vs pageable memory, and vector-env
step throughput with device="cuda" against CPU tensors.

    python scripts/bench_cuda.py --out docs/bench_cuda.json

1. Bandwidth: the same copy into GPU memory from (a) pageable memory (np.empty), (b) a shared-memory
   block registered with cudaHostRegister (what as_torch=True, device="cuda" does) and (c) torch's
   own pinned allocation, timed with CUDA events.
2. Step throughput (synthetic backend, RLBench-sized camera observations, so the engine and the
   copies are measured, not a simulator): steps per second of a loop that needs every observation
   on the GPU, for
     cpu        as_torch=True on CPU, no GPU copy at all: the ceiling of the transport
     cpu->cuda  CPU tensors, then obs[k].to("cuda") per key: what users do without device="cuda"
     cuda       device="cuda": pinned shared memory, asynchronous copy on a side stream
Prints a table and writes the JSON.
"""

from __future__ import annotations

import json
import platform
import time
from multiprocessing import shared_memory

import numpy as np
import torch

from rlbench_vec import RLBenchVectorEnv
from rlbench_vec.cli import ArgumentParser, run_main
from rlbench_vec.engine.tensors import register_pinned, unregister_pinned

MB = 1 << 20


def copy_gbps(source: torch.Tensor, repeats: int) -> float:
    """GB/s of source -> GPU copies (non_blocking, as the engine issues them), CUDA-event timed."""
    target = torch.empty(source.shape, dtype=source.dtype, device="cuda")
    for _ in range(3):  # warm-up
        target.copy_(source, non_blocking=True)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(repeats):
        target.copy_(source, non_blocking=True)
    end.record()
    end.synchronize()
    return source.numel() * source.element_size() * repeats / (start.elapsed_time(end) / 1e3) / 1e9


def bandwidth(sizes_mb: list[int], repeats: int) -> list[dict]:
    rows = []
    for size_mb in sizes_mb:
        size = size_mb * MB
        pageable = torch.from_numpy(np.ones(size, np.uint8))
        block = shared_memory.SharedMemory(create=True, size=size)
        try:
            shared = np.ndarray((size,), np.uint8, block.buf)
            shared[:] = 1
            start = shared.__array_interface__["data"][0]
            registered = register_pinned(start, size)
            row = {"size_mb": size_mb, "pageable_gbps": copy_gbps(pageable, repeats),
                   "shm_registered_gbps": copy_gbps(torch.from_numpy(shared), repeats) if registered else None,
                   "torch_pinned_gbps": copy_gbps(torch.ones(size, dtype=torch.uint8).pin_memory(), repeats)}
            if registered:
                unregister_pinned(start)
            del shared
        finally:
            block.close()
            block.unlink()
        rows.append(row)
        print("  ".join(f"{k} {v:.1f}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()), flush=True)
    return rows


def throughput(mode: str, num_envs: int, image_size: int, step_cost_s: float, steps: int) -> dict:
    """Steps per second of step() + every observation on the GPU (or kept on CPU for mode 'cpu')."""
    env = RLBenchVectorEnv(num_envs=num_envs, backend="synthetic", image_size=(image_size, image_size),
                           backend_options={"step_cost_s": step_cost_s}, as_torch=True,
                           device="cuda" if mode == "cuda" else None)
    try:
        obs, _ = env.reset(seed=0)
        bytes_per_step = sum(t.numel() * t.element_size() for t in obs.values())
        actions = np.zeros((num_envs, env.single_action_space.shape[0]), np.float32)
        checksum = torch.zeros((), device="cuda")
        for i in range(steps + 10):
            if i == 10:  # after warm-up
                torch.cuda.synchronize()
                started = time.perf_counter()
            obs = env.step(actions)[0]
            if mode == "cpu->cuda":
                obs = {k: v.to("cuda") for k, v in obs.items()}
            if mode != "cpu":  # use the data on the GPU, so the copy has to finish
                checksum += obs["front_rgb"][:, 0, 0, 0].sum()
        torch.cuda.synchronize()
        seconds = time.perf_counter() - started
    finally:
        env.close()
    return {"mode": mode, "num_envs": num_envs, "image_size": image_size, "step_cost_s": step_cost_s,
            "mb_per_step": round(bytes_per_step / MB, 2), "steps_per_s": round(steps / seconds, 1),
            "env_steps_per_s": round(steps * num_envs / seconds, 1),
            "gpu_gbps": round(bytes_per_step * steps / seconds / 1e9, 2) if mode != "cpu" else None}


def main() -> None:
    parser = ArgumentParser(description=__doc__)
    parser.add_argument("--sizes_mb", type=int, nargs="+", default=[1, 16, 64, 256])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--num_envs", type=int, nargs="+", default=[4, 16])
    parser.add_argument("--image_size", type=int, default=128)
    parser.add_argument("--step_cost_s", type=float, nargs="+", default=[0.0, 0.005])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--out", default="bench_cuda.json")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("bench_cuda.py needs a CUDA GPU (torch.cuda.is_available() is False).")

    print(f"{torch.cuda.get_device_name()}  torch {torch.__version__}  CUDA {torch.version.cuda}")
    print("host-to-device copies:")
    copies = bandwidth(args.sizes_mb, args.repeats)
    print("step throughput (5 cameras x rgb/depth/mask, synthetic backend):")
    steps = []
    for num_envs in args.num_envs:
        for cost in args.step_cost_s:
            for mode in ("cpu", "cpu->cuda", "cuda"):
                row = throughput(mode, num_envs, args.image_size, cost, args.steps)
                steps.append(row)
                print("  ".join(f"{k} {v}" for k, v in row.items()), flush=True)
    result = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
              "host": platform.node(), "args": vars(args), "h2d_copies": copies, "step_throughput": steps}
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    run_main(main, "python scripts/bench_cuda.py")
