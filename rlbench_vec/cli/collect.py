"""Collect demos on all workers at once: `python -m rlbench_vec.collect [flags]`, or collect(CollectConfig(...)).

    python -m rlbench_vec.collect --backend mujoco --tasks open_drawer reach_target --episodes_per_task 100 \\
        --variations all --num_envs 16 --format rlbench --out DIR

- Jobs: every (task, variation, episode) is a job whose demo seed comes from (--seed, task, variation,
  episode, failed attempts so far), so the same arguments give the same demos whatever the number of envs,
  the order of completion, crashes, or how often the run was resumed.
- Collection: one RLBenchVectorEnv per task, its envs collecting every variation (each job passes its variation
  to get_demos); each env collects one demo per call and gets its next job as soon as it returns, so no env
  waits for the slowest. --variations all: mujoco knows the count in the main process, rlbench asks a started
  env (get_attr("variation_count")).
- Failures: an unsuccessful demo (or one whose backend raised) is retried with the next attempt's seed; a
  crashed or hung worker (the engine restarts it) costs only its job, retried with the same seed. After
  --max_attempts a job is given up and reported.
- Writing: a pool of writer processes (rlbench_vec.datasets.writers) encodes and stores demos while the
  workers collect, on the cores the workers leave free; where they leave none, each worker writes its own
  demos. An episode appears on disk only complete (staging folder, then rename).
- Resume: a rerun with the same arguments skips the episodes on disk and sweeps what dead writers left.
- Summary: {out}/collect_summary.json (tasks, variations, episodes, failures, seconds, demos/s, command).
- torchrun (`torchrun --nproc_per_node N -m rlbench_vec.collect ...`): each rank collects every N-th episode of
  each task with --num_envs envs on its share of the host's cores and GPUs; rank 0 writes the summary.
"""

from __future__ import annotations

import collections
import functools
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..backends import list_tasks
from ..config import ARM_MODES, BACKENDS, CAMERAS, GRIPPER_MODES, MODALITIES, VectorConfig
from ..datasets import remove_stale_staging
from ..datasets.lerobot_format import LeRobotOptions
from ..datasets.writers import FORMATS, Episode, WriterOptions, WriterPool, store_rlbench
from ..distributed import RankInfo
from ..errors import ConfigError, WorkerError
from ..vector_env import RLBenchVectorEnv
from . import ArgumentParser, add_ignore_collisions_flag, json_object, non_negative, positive
from .collect_config import DATASET_ARGUMENTS, CollectConfig, checked_variations, known_variation_count
from .ranks import Ranks, job_ranks
from .runs import (
    ProgressBar,
    check_same_arguments,
    job_seed,
    parsed_flags,
    run_stoppable,
    stop_if_disk_full,
    write_json,
)

SUMMARY_FILE = "collect_summary.json"

@dataclass
class Job:
    episode: Episode
    failures: int = 0  # attempts that returned no successful demo: each moves on to the next seed
    crashes: int = 0  # attempts lost with their worker: retried with the same seed
    worker_pid: int | None = None
    error: str = ""

    @property
    def attempts(self) -> int:
        return self.failures + self.crashes


@dataclass
class Tally:
    """Counts of one run, per task, for the progress bar and the summary."""

    planned: dict[str, int] = field(default_factory=dict)
    variations: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=lambda: collections.defaultdict(int))
    written: dict[str, int] = field(default_factory=lambda: collections.defaultdict(int))
    demo_failures: int = 0
    worker_errors: int = 0
    failed: list[dict[str, Any]] = field(default_factory=list)  # jobs given up or not written
    tasks: int = 1  # in the run

    @property
    def done(self) -> int:
        """Episodes of the dataset that need nothing more: written now, already there, or given up."""
        return sum(self.written.values()) + sum(self.skipped.values()) + len(self.failed)

    @property
    def total(self) -> int:
        return sum(self.planned.values()) + sum(self.skipped.values())


def show_progress(progress: ProgressBar, description: str, tally: Tally, pool: WriterPool | None = None) -> None:
    failures = f"failed demos {tally.demo_failures}, crashes {tally.worker_errors}, lost {len(tally.failed)}"
    if pool is not None:
        failures += f"; writer queue {pool.pending}/{pool.options.queue_size}"
    noun = "episodes" if tally.tasks == 1 else f"episodes of all {tally.tasks} tasks"  # the line names one
    progress.update(description, tally.done, tally.total, sum(tally.written.values()), failures, noun)


def collect(config: CollectConfig, command: str | None = None) -> dict[str, Any]:
    """Collect every job of `config` not yet on disk under config.out; return the summary, also written to
    {out}/collect_summary.json. command: what the summary records (default: the equivalent command line). Under
    torchrun each rank collects every world_size-th episode of each task's plan, and rank 0 writes the summary."""
    with job_ranks() as ranks:
        config = config.validated()  # after the rank took its share of the cores: the default writers count it
        if ranks.world > 1 and config.format == "lerobot":
            raise ConfigError("--format lerobot stores a task in one dataset, written by one process: collect it "
                              "without torchrun, or collect --format rlbench under torchrun.")
        return _collect(config, command, ranks)


def _collect(config: CollectConfig, command: str | None, ranks: Ranks) -> dict[str, Any]:
    env_configs = {task: config.env_config(task) for task in config.tasks}
    counts: dict[str, int | None] = {}  # None: only the task's started env knows
    for task, env_config in env_configs.items():
        known = known_variation_count(env_config)
        counts[task] = None if known is None else checked_variations(config, task, known)
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    check_same_arguments(out / SUMMARY_FILE, _dataset_arguments(config), "demos")
    swept = remove_stale_staging(out) if ranks.first else 0
    summary: dict[str, Any] = {"command": command or config.command(), "finished": False,
                               "config": _dataset_arguments(config), "stale_staging_removed": swept,
                               "world_size": ranks.world}
    tally = Tally(tasks=len(config.tasks))
    started = time.perf_counter()
    start_s = 0.0
    progress: ProgressBar | None = None
    options = WriterOptions(config.format, int(config.writers or 0), int(config.queue_size or 1),
                            LeRobotOptions(vcodec=config.lerobot_vcodec,
                                           checkpoint_every=config.lerobot_checkpoint_every))
    pool = WriterPool(out, options, env_configs)
    try:
        ranks.barrier()  # rank 0 swept the staging folder before any rank writes
        todo = {task: None if count is None else _plan(config, task, count, pool, tally, ranks)
                for task, count in counts.items()}
        if ranks.first:
            _write_summary(out, summary, config, tally, pool, 0.0, 0.0)
        progress = ProgressBar(config.progress and ranks.first, "demos")
        _say_what_was_found(progress, out, tally)
        for number, (task, jobs) in enumerate(todo.items(), start=1):
            if jobs == []:
                continue
            doing = f"{task} (task {number}/{len(todo)})"  # the counts are of every task
            show_progress(progress, f"{doing}: starting", tally, pool)
            t0 = time.perf_counter()
            vector_config = _vector_config(config, config.num_envs if jobs is None else len(jobs))
            with RLBenchVectorEnv.from_config(env_configs[task], vector_config) as env:
                start_s += time.perf_counter() - t0
                if jobs is None:
                    count = checked_variations(config, task, int(env.get_attr("variation_count")[0]))
                    jobs = _plan(config, task, count, pool, tally, ranks)
                    _say_what_was_found(progress, out, tally, task)
                _collect_jobs(env, collections.deque(jobs), config, pool, tally,
                              functools.partial(show_progress, progress, doing, tally, pool))
        show_progress(progress, "writing", tally, pool)
        pool.drain()
        _record_writes(pool, tally)
        tally = merged(ranks.gather(tally))  # every rank is done writing
        if ranks.first:
            remove_stale_staging(out)  # removes the staging folder itself once empty
        summary["finished"] = True
    finally:
        pool.close()
        _record_writes(pool, tally)
        if progress is not None:
            show_progress(progress, "done" if summary["finished"] else "stopped", tally, pool)
            progress.stop()
        try:
            if ranks.first:
                _write_summary(out, summary, config, tally, pool, time.perf_counter() - started, start_s)
        except OSError:
            if summary["finished"]:
                raise  # else the run is already stopping (a full disk: the summary cannot be written either)
    return summary


def _plan(config: CollectConfig, task: str, variations: int, pool: WriterPool, tally: Tally, ranks: Ranks) -> list[Job]:
    """This rank's jobs of the task's first `variations` variations that are not on disk yet, variation by variation
    (with all_variations: episodes_per_task in all, cycling through the variations): every world_size-th of the
    task's plan (a rank may plan a task while others write it)."""
    done = pool.completed(task)
    if config.all_variations:  # one folder, episode e of variation e mod count
        every = [Episode(task, e % variations, e, True) for e in range(config.episodes_per_task)]
    else:
        every = [Episode(task, variation, e) for variation in range(variations)
                 for e in range(config.episodes_per_task)]
    mine = ranks.mine(every)
    jobs = [Job(episode) for episode in mine if (episode.variation, episode.episode) not in done]
    tally.variations[task], tally.planned[task] = variations, len(jobs)
    tally.skipped[task] = len(mine) - len(jobs)
    return jobs


def merged(tallies: list[Tally]) -> Tally:
    """The counts of every rank as one."""
    tally = Tally(variations=tallies[0].variations, tasks=tallies[0].tasks)
    for one in tallies:
        for name in ("planned", "skipped", "written"):
            for task, count in getattr(one, name).items():
                getattr(tally, name)[task] = getattr(tally, name).get(task, 0) + count
        tally.demo_failures += one.demo_failures
        tally.worker_errors += one.worker_errors
        tally.failed += one.failed
    return tally


def _say_what_was_found(progress: ProgressBar, out: Path, tally: Tally, task: str | None = None) -> None:
    """On a resumed run: the episodes already in `out` (of one task planned late, or of every task planned)."""
    tasks = [task] if task is not None else list(tally.planned)
    found = sum(tally.skipped[name] for name in tasks)
    if found:
        todo = sum(tally.planned[name] for name in tasks)
        progress.say(f"resuming {out}: {found} of {found + todo} episodes"
                     f"{f' of {task}' if task else ''} are already there, {todo} to collect")


def _vector_config(config: CollectConfig, jobs: int) -> VectorConfig:
    # one env per worker process: a crash costs one job, and envs collect in parallel, not in turn
    return VectorConfig(num_envs=min(config.num_envs, jobs), envs_per_worker=1, seed=config.seed)


def _collect_jobs(env: RLBenchVectorEnv, jobs: collections.deque[Job], config: CollectConfig, pool: WriterPool,
                  tally: Tally, show: Callable[[], None]) -> None:
    """Run `jobs` on every env of `env` at once, each env starting its next job as soon as it returns a demo."""
    running: dict[int, Job] = {}
    idle = list(range(env.num_envs))
    in_workers = pool.options.processes == 0
    while jobs or running:
        while idle and jobs:
            env_id, job = idle.pop(), jobs.popleft()
            job.worker_pid = env.worker_pid(env_id)
            seed = job_seed(config.seed, job.episode, job.failures)
            name, args = ("write_demo", (functools.partial(store_rlbench, str(pool.out), job.episode), seed)) \
                if in_workers else ("get_demos", (1, seed))
            env.call_async(name, *args, variation=job.episode.variation, env_ids=[env_id], ends_episode=True,
                           timeout=config.demo_timeout_s)
            running[env_id] = job
        for env_id, result in env.call_wait(min_envs=1):
            job = running.pop(env_id)
            idle.append(env_id)
            if isinstance(result, WorkerError):
                stop_if_disk_full(str(result), pool.out)
            if isinstance(result, WorkerError) and env.worker_pid(env_id) != job.worker_pid:
                job.crashes += 1  # the worker died or hung: not the demo's fault, same seed again
                tally.worker_errors += 1
                job.error = str(result).splitlines()[0]
            elif isinstance(result, WorkerError) or not (result.success if in_workers else result[0].success):
                job.failures += 1
                tally.demo_failures += 1
                job.error = str(result).splitlines()[0] if isinstance(result, WorkerError) else "the demo failed"
            else:
                if in_workers:
                    pool.written_in_worker(job.episode, result)
                else:
                    pool.submit(job.episode, result[0])
                continue
            if job.attempts < config.max_attempts:
                jobs.appendleft(job)
            else:
                tally.failed.append({**asdict(job.episode), "attempts": job.attempts, "error": job.error})
        _record_writes(pool, tally)
        show()


def _record_writes(pool: WriterPool, tally: Tally) -> None:
    for episode, error in pool.take_finished():
        if error is None:
            tally.written[episode.task] += 1
        else:
            tally.failed.append({**asdict(episode), "attempts": 1, "error": f"not written: {error}"})
            stop_if_disk_full(error, pool.out)


def _dataset_arguments(config: CollectConfig) -> dict[str, Any]:
    return json.loads(json.dumps({name: getattr(config, name) for name in DATASET_ARGUMENTS}))


def _write_summary(out: Path, summary: dict[str, Any], config: CollectConfig, tally: Tally, pool: WriterPool,
                   seconds: float, start_s: float) -> None:
    written = sum(tally.written.values())
    summary.update({
        "tasks": {task: {"variations": tally.variations.get(task), "episodes_per_variation": config.episodes_per_task,
                         "planned": tally.planned.get(task, 0), "written": tally.written[task],
                         "skipped": tally.skipped[task],
                         "failed": [f for f in tally.failed if f["task"] == task]}
                  for task in config.tasks},
        "episodes": {"planned": sum(tally.planned.values()), "written": written,
                     "skipped": sum(tally.skipped.values()), "failed": len(tally.failed)},
        "failures": {"demo_failures": tally.demo_failures, "worker_errors": tally.worker_errors,
                     "jobs_failed": len(tally.failed)},
        "seconds": round(seconds, 3), "env_start_seconds": round(start_s, 3),
        "demos_per_s": round(written / seconds, 3) if seconds > 0 else 0.0,
        "num_envs": config.num_envs, "writer": pool.stats.summary(),
    })
    write_json(out / SUMMARY_FILE, summary)


# ---- command line ----

def _count_or_all(text: str) -> int | str:
    return text if text == "all" else positive(text)


def parse_args(argv: Sequence[str] | None = None) -> CollectConfig:
    parser = ArgumentParser(prog="python -m rlbench_vec.collect", description=__doc__)
    default = CollectConfig()
    parser.add_argument("--tasks", nargs="+", required=True, metavar="TASK",
                        help="RLBench task names, or all (every task of the backend); the embedded backends "
                             f"run {' '.join(list_tasks('mujoco'))}")
    parser.add_argument("--out", required=True, help="dataset folder (a rerun resumes it)")
    parser.add_argument("--episodes_per_task", type=positive, default=default.episodes_per_task,
                        help="episodes per variation, as RLBench counts them")
    parser.add_argument("--variations", default=default.variations, type=_count_or_all,
                        help="a count (variations 0..n-1) or all")
    parser.add_argument("--format", default=default.format, choices=FORMATS)
    parser.add_argument("--all_variations", type=int, default=0, choices=(0, 1),
                        help="rlbench format: every episode in TASK/all_variations/episodes/ with its "
                             "variation_number.pkl (RLBench's generator's --all_variations, PerAct's test set), "
                             "--episodes_per_task in all")
    parser.add_argument("--seed", type=int, default=default.seed)
    parser.add_argument("--backend", default=default.backend, choices=BACKENDS)
    parser.add_argument("--num_envs", type=positive, default=default.num_envs,
                        help="worker processes collecting at once")
    parser.add_argument("--image_size", type=positive, nargs=2, default=default.image_size, metavar=("WIDTH", "HEIGHT"))
    parser.add_argument("--cameras", nargs="+", default=list(default.cameras), choices=CAMERAS)
    parser.add_argument("--modalities", nargs="+", default=None, choices=MODALITIES,
                        help="default: rgb depth mask; lerobot: rgb")
    parser.add_argument("--arm_mode", default=default.arm_mode, choices=ARM_MODES)
    parser.add_argument("--absolute_mode", type=int, default=1, choices=(0, 1))
    add_ignore_collisions_flag(parser)
    parser.add_argument("--gripper_mode", default=default.gripper_mode, choices=GRIPPER_MODES)
    parser.add_argument("--max_episode_steps", type=positive, default=default.max_episode_steps)
    parser.add_argument("--backend_options", type=json_object, default={}, help="JSON")
    parser.add_argument("--renderer", default=None, help="mujoco: osmesa, egl or glfw")
    parser.add_argument("--demo_timeout_s", type=float, default=default.demo_timeout_s,
                        help="restart a worker silent this long on one demo")
    parser.add_argument("--max_attempts", type=positive, default=default.max_attempts, help="per episode")
    parser.add_argument("--writers", type=non_negative, default=None,
                        help="writer processes; 0: each worker writes its own demos (default: num_envs / 2 on the "
                             "cores the envs leave free, 0 when they leave none)")
    parser.add_argument("--queue_size", type=positive, default=None,
                        help="demos waiting for writers (default: 2 per writer)")
    parser.add_argument("--lerobot_vcodec", default=default.lerobot_vcodec)
    parser.add_argument("--lerobot_checkpoint_every", type=positive, default=default.lerobot_checkpoint_every)
    parser.add_argument("--progress", type=int, default=1, choices=(0, 1))
    args = parsed_flags(parser, argv, ("tasks", "cameras", "modalities", "image_size"))
    return CollectConfig(**{**args, "all_variations": bool(args["all_variations"])})


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    config = parse_args(argv)
    summary = run_stoppable(collect, config, "rlbench_vec.collect", argv, "", Path(config.out) / SUMMARY_FILE)
    if isinstance(summary, int):
        return summary
    if RankInfo.from_env().rank != 0:  # under torchrun rank 0 reports the world's counts
        return 0
    episodes = summary["episodes"]
    print(f"{episodes['written']} episodes written, {episodes['skipped']} already there, {episodes['failed']} failed "
          f"in {summary['seconds']:.1f} s ({summary['demos_per_s']:.2f} demos/s): {Path(config.out) / SUMMARY_FILE}")
    return 1 if episodes["failed"] else 0

