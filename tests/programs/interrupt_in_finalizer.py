"""A command whose Ctrl-C (or SIGTERM) lands while the main thread runs a finalizer, where CPython swallows the
KeyboardInterrupt ("Exception ignored in ...") and goes on: as in the bench when the signal lands in a worker
pipe's Connection.__del__ as a worker starts, or in importlib's module-lock callback after an import.
`python -m interrupt_in_finalizer SIGNAL WHEN` must still end with run_main's one line and status 130 or 143.
WHEN: `before_env` (Python's own SIGINT handler) or `between_steps` (the vector env's)."""

import signal
import sys

from rlbench_vec import RLBenchVectorEnv
from rlbench_vec.cli import run_main


class SignalWhenCollected:
    def __init__(self, signum: int):
        self.signum = signum

    def __del__(self) -> None:
        signal.raise_signal(self.signum)  # its handler runs here, inside the finalizer


def main() -> int:
    signum, when = signal.Signals[sys.argv[1]], sys.argv[2]
    if when == "before_env":
        SignalWhenCollected(signum)  # collected at once
    with RLBenchVectorEnv(num_envs=2, backend="synthetic", cameras=()) as env:
        env.reset(seed=0)
        for _ in range(20):
            if when == "between_steps":
                SignalWhenCollected(signum)
            env.step(env.action_space.sample())
    print("went on to the end", file=sys.stderr)
    return 0


if __name__ == "__main__":
    run_main(main, "python -m interrupt_in_finalizer")
