"""What a task's first start on the mjwarp backend costs, and which of Warp's modules it compiles.

Each task in turn, in a fresh process: build the batched simulation of a few worlds (the worker's own
start: MuJoCo model, MuJoCo Warp's model and data, our kernels, the warm-up and CUDA-graph capture), and
list the modules it added to Warp's kernel cache (--kernel_cache; default Warp's own): the modules it
compiled. With an empty cache the first row is the first-ever start; each later row is a task not yet
run, after another task has run; a task run before starts from the cache.

    python benchmarks/mjwarp_first_start.py --tasks pick_and_lift reach_target open_drawer --json PATH
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import platform
import shlex
import sys
import time

from rlbench_vec.cli import ArgumentParser, positive, run_main


def cached(folder: str) -> set[str]:
    """The compiled modules in Warp's kernel cache: a folder each, named after the module and its hash."""
    return {entry for _, entries, _ in os.walk(folder) for entry in entries if entry.startswith("wp_")}


def start(task: str, worlds: int, device: str, kernel_cache: str | None, queue) -> None:
    import warp as wp

    if kernel_cache:
        wp.config.kernel_cache_dir = kernel_cache
    from rlbench_vec.backends.mjwarp.group import MjwarpGroup
    from rlbench_vec.config import EnvConfig

    config = EnvConfig(task=task, backend="mjwarp", arm_mode="joint_velocity", action_timing="fixed",
                       image_size=(128, 128), modalities=("rgb", "depth", "mask"),
                       backend_options={"device": device}).validated()
    wp.init()
    before = cached(wp.config.kernel_cache_dir)
    began = time.perf_counter()
    group = MjwarpGroup(config, range(worlds))
    seconds = time.perf_counter() - began
    group.close()
    queue.put({"task": task, "start_s": round(seconds, 2),
               "compiled": sorted(cached(wp.config.kernel_cache_dir) - before)})


def main() -> None:
    parser = ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", nargs="+", default=["pick_and_lift", "reach_target"])
    parser.add_argument("--worlds", type=positive, default=16)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--kernel_cache", default=None, help="Warp's kernel cache folder (default: Warp's own)")
    parser.add_argument("--json", default=None, metavar="PATH")
    args = parser.parse_args()
    context = mp.get_context("spawn")
    rows = []
    for task in args.tasks:
        queue = context.Queue()
        child = context.Process(target=start, args=(task, args.worlds, args.device, args.kernel_cache, queue))
        child.start()
        row = queue.get()
        child.join()
        rows.append(row)
        print(f"{task:<28} start {row['start_s']:7.1f} s; {len(row['compiled'])} modules compiled: "
              f"{', '.join(row['compiled'])}", flush=True)
    if args.json:
        with open(args.json, "w") as file:
            json.dump({"command": shlex.join(["python", *sys.argv]), "host": platform.node(), "rows": rows}, file,
                      indent=2)


if __name__ == "__main__":
    run_main(main, "python benchmarks/mjwarp_first_start.py")
