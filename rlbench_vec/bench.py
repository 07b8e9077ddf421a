"""`python -m rlbench_vec.bench`: the throughput benchmark (its flags and code: rlbench_vec.cli.bench)."""

from .cli import run_main
from .cli.bench import main

__all__ = ["main"]

if __name__ == "__main__":
    run_main(main, "python -m rlbench_vec.bench")
