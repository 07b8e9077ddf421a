"""`evaluate(EvaluateConfig(...))`, the library function behind `python -m rlbench_vec.evaluate`: check what is
scored against the run folder, run the pending episodes (evaluate_loop), derive the results from the log.

- Episodes: episode k of task t always gets the same variation and reset seed (evaluate_plan), whatever the
  number of envs and whichever env runs it, so a deterministic policy scores the same at 1 env and at 16.
- Envs: one vector env for all tasks; where a reset cannot change an env's task (mjwarp: a simulator per task),
  the envs are shared out between the tasks by their episodes (each task at least one env while there are as
  many envs as tasks, else the rest in a next vector env), and each env runs the episodes of its own task.
- Stored episodes (--episodes_from): each task's stored episodes, their starts and the dataset's identity are in
  the log's first record (evaluate_plan.stored_starts), so a resume scores the same episodes and results rebuild
  from the log alone. Repeats: every episode once per repeat, each repeat with its own seeds.
- The run folder (evaluate_folder): its log's first record is what is scored; a folder started with anything
  else is refused before anything runs; results.json and results.md are derived from the log.
- Under torchrun (cli/ranks): the pending episodes dealt round robin between the ranks, each with its own vector
  envs and log; rank 0 shows the world's progress and writes the results once every rank is done.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from ..backends import backend_class
from .evaluate_config import EvaluateConfig, checked
from .evaluate_folder import OtherRanks, RunLog, package_version, read_log, results_of, write_results
from .evaluate_loop import Evaluation
from .evaluate_plan import EpisodeQueue, dataset_record, plan, stored_starts, variation_counts
from .policies import PolicySource
from .ranks import job_ranks


def evaluate(config: EvaluateConfig, command: str | None = None) -> dict[str, Any]:
    """Score config.policy on every episode of `config` not yet in config.out's log; return the results, also
    written to {out}/results.json and {out}/results.md. command: what the log records as this run's command
    (default: the equivalent command line). A folder started to score anything else raises ConfigError naming
    what differs, before anything runs."""
    config, env_config = checked(config)
    source = PolicySource(config.policy, config.policy_args)
    out = Path(config.out)
    before = read_log(out, ()).header  # a resumed folder's counts spare rlbench a started env
    counts = variation_counts(env_config, before["variation_counts"] if before else None)
    starts = stored_starts(config)
    planned = [p for task in config.tasks for p in plan(config, task, counts[task], (starts or {}).get(task))]
    header = {"record": "evaluation", "scored": config.scored_arguments(), "version": package_version(),
              "policy_identity": source.identity, "variation_counts": counts,
              "dataset": dataset_record(config, starts) or {}, "stored_episodes": starts or {}}
    keys = [p.key for p in planned]
    with job_ranks() as ranks:
        log = RunLog(out, header, keys, ranks.rank, ranks.world) if ranks.first else None  # writes the first record
        ranks.barrier()
        log = log or RunLog(out, header, keys, ranks.rank, ranks.world)
        ranks.barrier()  # every rank has read the log before any appends its run record: they share its number
        world = OtherRanks(out, ranks.world) if ranks.first and ranks.world > 1 else None
        finished = False
        try:
            log.add_run(command or config.command(), config.num_envs)
            run = Evaluation(config if ranks.first else replace(config, progress=False), env_config, source, log,
                             len(planned), world)
            done = {(e["task"], e["episode"], e.get("repeat", 0)) for e in log.log.episodes}
            if done:
                run.progress.say(f"resuming {out}: {len(done)} of {len(planned)} episodes are already there")
            pending = EpisodeQueue(ranks.mine([p for p in planned if p.key[:3] not in done]),
                                   pinned=backend_class(config.backend).task_change_reason is not None)
            try:
                while pending:
                    run.run(pending)
                # every rank's episodes are in the logs; rank 0's bar shows the world's until then
                ranks.barrier(tick=(lambda: run.show("waiting for the other ranks")) if ranks.first else None)
                finished = True
            finally:
                run.show("done" if finished else "stopped")
                run.progress.stop()
        finally:
            log.close(finished)
            if not finished and ranks.first:  # the log is what counts; results written where the disk still takes them
                try:
                    write_results(out, read_log(out))
                except Exception:  # the error that stopped the run is the one to report
                    pass
        ranks.barrier()  # every rank's log is closed (its end record written)
        return write_results(out, read_log(out)) if ranks.first else results_of(read_log(out))
