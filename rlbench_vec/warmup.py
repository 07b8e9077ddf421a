"""`python -m rlbench_vec.warmup`: compile the mjwarp backend's kernels ahead (its flags and code:
rlbench_vec.cli.warmup)."""

if __name__ == "__main__":  # a signal while the modules below load ends the command with its one line
    from .cli import stop_while_starting

    stop_while_starting("python -m rlbench_vec.warmup")

from .cli import run_main  # noqa: E402
from .cli.warmup import main  # noqa: E402

__all__ = ["main"]

if __name__ == "__main__":
    run_main(main, "python -m rlbench_vec.warmup")
