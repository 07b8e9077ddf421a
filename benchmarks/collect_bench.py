"""Collection throughput: demos/s of `rlbench_vec.collect` against the number of envs, and whether writing keeps up.

    PYTHONPATH=. python benchmarks/collect_bench.py --tag cpu2 --episodes 100 --num_envs 1 2 --repeats 2
    PYTHONPATH=. python benchmarks/collect_bench.py --tag gpu16 --episodes_per_env 20 --num_envs 1 4 16

For each num_envs: collect --episodes of --task (one variation, mujoco, five cameras rgb+depth+mask at
--image_size, RLBench format) into a fresh folder under --root and report demos/s (episodes over the time
from the first job to the last episode on disk: env start-up excluded, the writers' tail included), the
scaling efficiency against one env (demos/s(n) / (n * demos/s(1))), the writer pool's queue (depth at each
hand-over, time the loop waited for a free slot, writers' busy fraction and ms per step), and the CPU each
demo costs in the workers, the writers and the main process. Once every core is busy, demos/s grows no
faster than the workers' share of that CPU allows (efficiency_bound_all_cores_busy). Then PNG encoding per
frame (Pillow; our rows deflated by zlib, and by ISA-L as the writers do), and whole episodes written by one
thread, by a thread per core and by a process per core (why the writers are processes).
Writes {out}/collect_{tag}.json and .png.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import queue
import resource
import shutil
import sys
import tempfile
import threading
import time
import zlib
from pathlib import Path

import numpy as np
import psutil

from rlbench_vec import Demo
from rlbench_vec.cli import ArgumentParser, run_main
from rlbench_vec.collect import CollectConfig, collect
from rlbench_vec.datasets import read_episode, write_episode
from rlbench_vec.datasets.rlbench_format import encode_depth, encode_mask, png_bytes
from rlbench_vec.wire.process import SPAWN


def run_collection(args: argparse.Namespace, num_envs: int, out: Path) -> dict:
    episodes = args.episodes if args.episodes_per_env is None else args.episodes_per_env * num_envs
    config = CollectConfig(tasks=(args.task,), out=str(out), episodes_per_task=episodes, variations=1,
                           backend="mujoco", num_envs=num_envs, image_size=tuple(args.image_size),
                           seed=args.seed, writers=args.writers, progress=not args.quiet)
    main_process = psutil.Process()
    load = os.getloadavg()[0]
    cpu, children = sum(main_process.cpu_times()[:2]), _children_cpu()
    summary = collect(config)
    cpu, children = sum(main_process.cpu_times()[:2]) - cpu, _children_cpu() - children  # children: once ended
    writers_cpu = summary["writer"]["write_cpu_ms_per_step"] * summary["writer"]["steps_written"] / 1e3
    written = summary["episodes"]["written"]
    collecting_s = summary["seconds"] - summary["env_start_seconds"]
    steps = summary["writer"]["steps_written"]
    return {"num_envs": num_envs, "load_average_before": round(load, 2), "episodes": written,
            "failed": summary["episodes"]["failed"],
            "demo_failures": summary["failures"]["demo_failures"], "steps_per_demo": round(steps / max(written, 1), 1),
            "wall_s": summary["seconds"], "env_start_s": summary["env_start_seconds"],
            "collecting_s": round(collecting_s, 3), "demos_per_s": round(written / collecting_s, 3),
            "main_cpu_ms_per_demo": round(1e3 * cpu / max(written, 1), 1),
            "workers_cpu_ms_per_demo": round(1e3 * (children - writers_cpu) / max(written, 1), 1),
            "writers_cpu_ms_per_demo": round(1e3 * writers_cpu / max(written, 1), 1), "writer": summary["writer"]}


def _children_cpu() -> float:
    """CPU seconds of this process's ended children (workers, writers, Xvfb)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def encoder_frames(demo: Demo) -> list[np.ndarray]:
    """Every rgb, encoded depth and encoded mask frame of a demo, as the writers encode them."""
    frames = []
    for key, images in demo.observations.items():
        if key.endswith("_rgb"):
            frames += list(images)
        elif key.endswith("_depth"):
            frames += [encode_depth(image) for image in images]
        elif key.endswith("_mask"):
            frames += [encode_mask(image) for image in images]
    return frames


def pillow_png(image: np.ndarray) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="PNG", compress_level=1)
    return buffer.getvalue()


def zlib_deflate(data: memoryview) -> bytes:
    """Our PNG rows deflated by zlib's fastest run-length setting (what the writers used before ISA-L)."""
    deflate = zlib.compressobj(1, zlib.DEFLATED, zlib.MAX_WBITS, 8, zlib.Z_RLE)
    return deflate.compress(data) + deflate.flush()


def write_after(demo: Demo, folder: Path, episodes: int, barrier, times) -> None:
    """Write `episodes` copies of `demo` once every worker is ready; report when this one started and ended."""
    barrier.wait()
    start = time.monotonic()
    for episode in range(episodes):
        write_episode(folder, "bench", episode, demo)
    times.put((start, time.monotonic()))


def parallel_seconds(demo: Demo, root: Path, workers: int, episodes: int, make_barrier, make_queue,
                     make_worker) -> float:
    """Wall time of `workers` threads or processes writing `episodes` episodes each, started together."""
    barrier, times = make_barrier(workers), make_queue()
    started = [make_worker(target=write_after, args=(demo, root / str(i), episodes, barrier, times))
               for i in range(workers)]
    for worker in started:
        worker.start()
    spans = [times.get() for _ in started]
    for worker in started:
        worker.join()
    return max(end for _, end in spans) - min(start for start, _ in spans)


def measure_writing(dataset: Path, root: Path, workers: int, episodes: int = 4) -> dict:
    """PNG encoding per frame, Pillow vs zlib vs ours; then whole episodes written by one thread, by `workers` threads
    and by `workers` processes (the same work each time)."""
    demo = read_episode(next(dataset.rglob("episode0")))
    frames = encoder_frames(demo)
    encoders = {"pillow": pillow_png, "zlib": lambda frame: png_bytes(frame, deflate=zlib_deflate), "ours": png_bytes}
    encoded, seconds = {}, {}
    for name, encode in encoders.items():
        start = time.perf_counter()
        encoded[name] = [encode(frame) for frame in frames]
        seconds[name] = time.perf_counter() - start
    start = time.perf_counter()
    write_after(demo, root / "serial", workers * episodes, threading.Barrier(1), queue.Queue())
    serial = time.perf_counter() - start
    threaded = parallel_seconds(demo, root / "threads", workers, episodes, threading.Barrier, queue.Queue,
                                threading.Thread)
    in_processes = parallel_seconds(demo, root / "processes", workers, episodes, SPAWN.Barrier, SPAWN.Queue,
                                    SPAWN.Process)
    steps = len(demo.actions) + 1
    return {"frames": len(frames), "shape": list(frames[0].shape),
            **{f"{name}_ms_per_frame": round(1e3 * seconds[name] / len(frames), 4) for name in encoders},
            **{f"{name}_mean_bytes": int(np.mean([len(data) for data in encoded[name]])) for name in encoders},
            "episode_steps": steps,
            "write_ms_per_step_one_thread": round(1e3 * serial / (workers * episodes * steps), 3),
            "workers": workers, "threads_speedup": round(serial / threaded, 2),
            "processes_speedup": round(serial / in_processes, 2)}


def plot(results: list[dict], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    envs = [r["num_envs"] for r in results]
    rates = [r["demos_per_s"] for r in results]
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.plot(envs, rates, "o-", label="collect")
    left.plot(envs, [rates[0] * n for n in envs], "--", color="grey", label="linear from 1 env")
    left.plot(envs, [0.8 * rates[0] * n for n in envs], ":", color="grey", label="0.8 x linear")
    left.set(xlabel="num_envs", ylabel="demos/s", title=title, xticks=envs)
    left.legend()
    right.plot(envs, [r["scaling_efficiency"] for r in results], "o-")
    right.axhline(0.8, ls=":", color="grey")
    right.set(xlabel="num_envs", ylabel="demos/s(n) / (n * demos/s(1))", ylim=(0, 1.1), title="scaling efficiency",
              xticks=envs)
    figure.tight_layout()
    figure.savefig(path, dpi=100)


def main() -> int:
    parser = ArgumentParser(description=__doc__)
    parser.add_argument("--tag", required=True, help="names the outputs: collect_{tag}.json / .png")
    parser.add_argument("--task", default="pick_and_lift")
    parser.add_argument("--episodes", type=int, default=100, help="episodes per run")
    parser.add_argument("--episodes_per_env", type=int, default=None,
                        help="instead of --episodes: this many per env, so that every run has as many rounds of "
                             "demos (a short run at many envs is mostly its start and its tail)")
    parser.add_argument("--num_envs", type=int, nargs="+", default=[1, os.cpu_count() or 1])
    parser.add_argument("--image_size", type=int, nargs=2, default=(128, 128))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--writers", type=int, default=None, help="writer processes (default: collect's)")
    parser.add_argument("--out", default="docs", help="folder of the JSON and PNG")
    parser.add_argument("--root", default=None, help="where the datasets are written (default: the temp folder)")
    parser.add_argument("--repeats", type=int, default=1,
                        help="runs per num_envs, interleaved; the fastest counts (for machines with other load)")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args()
    if args.num_envs[0] != 1:
        parser.error("--num_envs must start with 1: efficiency is measured against one env")

    root = Path(tempfile.mkdtemp(prefix="collect_bench_", dir=args.root))
    started = time.perf_counter()
    load = os.getloadavg()[0]
    try:
        runs: dict[int, list[dict]] = {n: [] for n in args.num_envs}
        for repeat in range(args.repeats):
            for num_envs in args.num_envs:
                out = root / f"envs{num_envs}_run{repeat}"
                run = run_collection(args, num_envs, out)
                runs[num_envs].append(run)
                if repeat or num_envs != 1:  # the first dataset stays for the encoder frames
                    shutil.rmtree(out)
                writer = run["writer"]
                print(f"num_envs {num_envs:3d}: {run['demos_per_s']:7.2f} demos/s, CPU ms/demo: workers "
                      f"{run['workers_cpu_ms_per_demo']:.0f} writers {run['writers_cpu_ms_per_demo']:.0f} main "
                      f"{run['main_cpu_ms_per_demo']:.0f}; writers {writer['processes']} busy "
                      f"{writer['busy_fraction']:.2f}, queue mean {writer['queue_depth_mean']:.1f} max "
                      f"{writer['queue_depth_max']}/{writer['queue_size']}, loop waited {writer['blocked_s']:.2f} s "
                      f"for writers (load before {run['load_average_before']})", flush=True)
        results = []
        for done in runs.values():
            best = max(done, key=lambda run: run["demos_per_s"])
            best["demos_per_s_of_each_run"] = [run["demos_per_s"] for run in done]
            results.append(best)
        for result in results:
            result["scaling_efficiency"] = round(
                result["demos_per_s"] / (result["num_envs"] * results[0]["demos_per_s"]), 3)
            print(f"num_envs {result['num_envs']:3d}: {result['demos_per_s']:7.2f} demos/s (best of "
                  f"{args.repeats}), scaling efficiency {result['scaling_efficiency']:.2f}")
        one = results[0]
        cpu_per_demo = one["workers_cpu_ms_per_demo"] + one["writers_cpu_ms_per_demo"] + one["main_cpu_ms_per_demo"]
        bound = round(one["workers_cpu_ms_per_demo"] / cpu_per_demo, 3)
        print(f"with every core busy, efficiency <= workers' share of the CPU per demo: {bound:.2f}")
        writing = measure_writing(root / "envs1_run0", root / "writing", os.cpu_count() or 1)
        print(f"PNG per frame: Pillow {writing['pillow_ms_per_frame']:.3f} ms, zlib "
              f"{writing['zlib_ms_per_frame']:.3f} ms, ours {writing['ours_ms_per_frame']:.3f} ms; episodes written "
              f"at {writing['write_ms_per_step_one_thread']:.1f} ms/step by one thread, x{writing['threads_speedup']} "
              f"by {writing['workers']} threads, x{writing['processes_speedup']} by {writing['workers']} processes")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    report = {
        "command": "python " + " ".join([sys.argv[0], *sys.argv[1:]]),
        "what": f"{args.task}, {args.episodes} episodes of one variation per run, mujoco backend, 5 cameras "
                f"rgb+depth+mask {args.image_size[0]}x{args.image_size[1]}, RLBench format; demos/s from the first job "
                "to the last episode on disk (env start-up excluded)",
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                    "renderer": os.environ.get("MUJOCO_GL") or ("egl" if os.path.exists("/dev/nvidia0") else "osmesa"),
                    "load_average_at_start": round(load, 2), "load_average_at_end": round(os.getloadavg()[0], 2)},
        "wall_s": round(time.perf_counter() - started, 1), "results": results,
        "efficiency_bound_all_cores_busy": bound, "writing": writing,
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"collect_{args.tag}.json").write_text(json.dumps(report, indent=2) + "\n")
    plot(results, out / f"collect_{args.tag}.png", f"{args.task} demos, {args.tag}")
    print(f"wrote {out / f'collect_{args.tag}.json'} and .png ({report['wall_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    run_main(main, "python benchmarks/collect_bench.py")
