"""The command-line programs: the throughput bench (`bench`, with its action sampler, resource usage and
report) and the demo collector (`collect`, `collect_config`), run as `python -m rlbench_vec.bench` and
`python -m rlbench_vec.collect` through the front's entry modules. They may import anything below them:
the front (vector_env), `datasets`, `backends` and the base modules; nothing imports them but the entries.

This module holds what every command line of the package (and its examples) shares: the bench's
convention of `--snake_case` flags and space-separated lists, every default and choice shown in `--help`,
and Ctrl-C ending the command with one line and exit status 130 (the vector env's own cleanup leaves
nothing behind)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any, NoReturn

INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a command ended by Ctrl-C


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the description's layout and appends each option's default (argparse's
    ArgumentDefaultsHelpFormatter also prints "(default: None)" for required and automatic options)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.required or action.default in (None, argparse.SUPPRESS) or "%(default)" in text:
            return text
        return f"{text} (default: %(default)s)".strip()


class ArgumentParser(argparse.ArgumentParser):
    """argparse with HelpFormatter; an option declared without help still shows its default (argparse skips
    the help line, default included, of an option whose help is empty)."""

    def __init__(self, prog: str | None = None, description: str | None = None, **kwargs: Any):
        super().__init__(prog=prog, description=description, formatter_class=HelpFormatter, **kwargs)

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        if not kwargs.get("help") and kwargs.get("default") is not None:
            kwargs["help"] = "(default: %(default)s)"
        return super().add_argument(*args, **kwargs)


def run_main(main: Callable[[], Any], prog: str, on_interrupt: str = "interrupted") -> NoReturn:
    """Runs a command's main and exits with the status it returns (an int; anything else is 0); Ctrl-C
    prints one line instead of a traceback."""
    try:
        status = main()
    except KeyboardInterrupt:
        print(f"{prog}: {on_interrupt}.", file=sys.stderr)
        sys.exit(INTERRUPTED)
    sys.exit(status if isinstance(status, int) else 0)
