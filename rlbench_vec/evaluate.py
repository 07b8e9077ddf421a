"""A policy scored on tasks x episodes with many envs, as a function, `evaluate(EvaluateConfig(...))`, and as a
command, `python -m rlbench_vec.evaluate` (their flags and code: rlbench_vec.cli.evaluate; docs/evaluate.md)."""

if __name__ == "__main__":  # a signal while the modules below load ends the command with its one line
    from .cli import stop_while_starting

    stop_while_starting("python -m rlbench_vec.evaluate")

from .cli import run_main  # noqa: E402
from .cli.evaluate import evaluate, main  # noqa: E402
from .cli.evaluate_config import EvaluateConfig  # noqa: E402
from .cli.evaluate_folder import rebuild  # noqa: E402

__all__ = ["EvaluateConfig", "evaluate", "main", "rebuild"]

if __name__ == "__main__":
    run_main(main, "python -m rlbench_vec.evaluate", on_interrupt=": the finished episodes are kept")
