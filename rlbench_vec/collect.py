"""Demos collected on all workers at once, as a function, `collect(CollectConfig(...))`, and as a command,
`python -m rlbench_vec.collect` (their flags and code: rlbench_vec.cli.collect)."""

if __name__ == "__main__":  # a signal while the modules below load ends the command with its one line
    from .cli import stop_while_starting

    stop_while_starting("python -m rlbench_vec.collect")

from .cli import run_main  # noqa: E402
from .cli.collect import SUMMARY_FILE, CollectConfig, collect, job_seed, main  # noqa: E402

__all__ = ["SUMMARY_FILE", "CollectConfig", "collect", "job_seed", "main"]

if __name__ == "__main__":
    run_main(main, "python -m rlbench_vec.collect", on_interrupt=" before the collection started")
