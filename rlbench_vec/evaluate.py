"""A policy scored on tasks x episodes with many envs, as a function, `evaluate(EvaluateConfig(...))`, and as a
command, `python -m rlbench_vec.evaluate` (their flags and code: rlbench_vec.cli.evaluate; docs/evaluate.md)."""

from .cli import run_main
from .cli.evaluate import evaluate, main
from .cli.evaluate_config import EvaluateConfig

__all__ = ["EvaluateConfig", "evaluate", "main"]

if __name__ == "__main__":
    run_main(main, "python -m rlbench_vec.evaluate", on_interrupt=": the finished episodes are kept")
