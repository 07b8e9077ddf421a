"""A command interrupted inside a string exec, as when Ctrl-C lands while a module being imported builds a
dataclass's methods: `python -m interrupt_in_exec` must still end with run_main's one line and status 130."""

from rlbench_vec.cli import run_main


def main() -> None:
    exec("raise KeyboardInterrupt", {})


if __name__ == "__main__":
    run_main(main, "python -m interrupt_in_exec")
