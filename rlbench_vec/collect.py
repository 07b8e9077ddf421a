"""Demos collected on all workers at once, as a function, `collect(CollectConfig(...))`, and as a command,
`python -m rlbench_vec.collect` (their flags and code: rlbench_vec.cli.collect)."""

from .cli import run_main
from .cli.collect import SUMMARY_FILE, CollectConfig, collect, job_seed, main

__all__ = ["SUMMARY_FILE", "CollectConfig", "collect", "job_seed", "main"]

if __name__ == "__main__":
    run_main(main, "python -m rlbench_vec.collect", on_interrupt=" before the collection started")
