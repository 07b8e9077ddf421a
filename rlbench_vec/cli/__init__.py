"""The command-line programs: the throughput bench (`bench`, with its action sampler, resource usage and
report), the demo collector (`collect`, `collect_config`) and the evaluation (`evaluate` and its `evaluate_*`
modules, `policies`, `videos`), run as `python -m rlbench_vec.bench`, `python -m rlbench_vec.collect` and
`python -m rlbench_vec.evaluate` through the front's entry modules; `runs` is what the job runners share, and
`ranks` their split between torchrun's ranks. They may import anything below them: the front (vector_env),
`datasets`, `display`, `backends` and the base modules; nothing
imports them but the entries, and no command imports another command's modules.

This module holds what every command line of the package (and its examples) shares: the bench's
convention of `--snake_case` flags and space-separated lists, every default and choice shown in `--help`,
counts and sizes checked by the parser; bad input (a flag the parser refuses, a ConfigError) said in one
line with exit status 2, another of the package's errors in one line with status 1 (`--debug` shows the
traceback); and Ctrl-C or SIGTERM ending the command with one line and status 130 or 143 (the vector
env's own cleanup leaves nothing behind)."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from ..engine import interrupts
from ..errors import ConfigError, RLBenchVecError

INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a command ended by Ctrl-C
TERMINATED = 143  # 128 + SIGTERM
BAD_INPUT = 2  # argparse's own status for arguments it refuses
DEBUG_FLAG = "--debug"


def _integer_at_least(least: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"must be an integer >= {least}, got {value}")
        return value

    parse.__name__ = f"integer >= {least}"  # argparse names the type in its messages
    return parse


def json_object(text: str) -> dict[str, Any]:
    """A flag's JSON object (--backend_options): what was wrong with it, and an example, else."""
    example = """give an object such as '{"shaped_rewards": true}'"""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(f"{text!r} is not JSON ({error}): {example}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"{text!r} is JSON but not an object: {example}")
    return value


positive = _integer_at_least(1)  # counts and sizes: envs, steps, pixels, episodes
non_negative = _integer_at_least(0)  # counts that may be none: spare envs, writers, env ids


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
        self.add_argument(DEBUG_FLAG, action="store_true", default=argparse.SUPPRESS,  # set only when given
                          help="show the traceback of an error")

    def error(self, message: str) -> NoReturn:
        """A refused argument in one line (argparse prints its whole usage first)."""
        self.exit(BAD_INPUT, f"{self.prog}: error: {message} (see --help)\n")

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        if not kwargs.get("help") and kwargs.get("default") is not None:
            kwargs["help"] = "(default: %(default)s)"
        return super().add_argument(*args, **kwargs)


def add_ignore_collisions_flag(parser: argparse.ArgumentParser) -> None:
    """--ignore_collisions_flag 0|1, EnvConfig's ignore_collisions_flag, the same in every command."""
    parser.add_argument("--ignore_collisions_flag", type=int, default=0, choices=(0, 1),
                        help="pose arm modes: a 9th action number, PerAct's ignore_collisions (> 0.5: no collision "
                             "checking)")


class _Stop:
    """How the command is being stopped: by Ctrl-C unless a SIGTERM came."""

    word, status = "interrupted", INTERRUPTED


def _on_sigterm(signum: int, frame: Any) -> None:
    """SIGTERM ends a command as Ctrl-C does: through the SIGINT handler in force (a vector env's holds
    it back until nothing is half done), so everything is closed and nothing is left behind."""
    _Stop.word, _Stop.status = "terminated", TERMINATED
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler):
        handler(signal.SIGINT, frame)
    else:
        raise KeyboardInterrupt


def stop_while_starting(prog: str) -> None:
    """For a command's module run as __main__, before its heavy imports: Ctrl-C or SIGTERM while they load ends
    the command at once with its one line and status (nothing runs yet that could be left behind). run_main
    takes the signals over."""
    def stop(signum: int, frame: Any) -> None:
        word, status = ("terminated", TERMINATED) if signum == signal.SIGTERM else ("interrupted", INTERRUPTED)
        os.write(2, f"{prog}: {word}.\n".encode())
        os._exit(status)

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)


def stopped_status() -> tuple[str, int]:
    """("interrupted", 130) after Ctrl-C, ("terminated", 143) after SIGTERM: for a command that says more."""
    return _Stop.word, _Stop.status


def run_main(main: Callable[[], Any], prog: str, on_interrupt: str = "") -> NoReturn:
    """Runs a command's main and exits with the status it returns (an int; anything else is 0). Ctrl-C and
    SIGTERM print one line ("PROG: interrupted" or "terminated", then on_interrupt) instead of a traceback;
    a ConfigError prints "PROG: error: ..." with status 2, any other error of the package the same with
    status 1 (with --debug, the traceback instead)."""
    signal.signal(signal.SIGINT, signal.default_int_handler)  # from stop_while_starting's, if it ran
    signal.signal(signal.SIGTERM, _on_sigterm)
    interrupts.keep_swallowed_interrupts()  # a signal whose handler runs inside a finalizer still stops the command
    debug = DEBUG_FLAG in sys.argv[1:]
    try:
        status = main()
    except KeyboardInterrupt:
        word, code = stopped_status()
        print(f"{prog}: {word}{on_interrupt}.", file=sys.stderr)
        _exit(code)
    except RLBenchVecError as error:
        if debug:
            raise
        print(f"{prog}: error: {' '.join(str(error).split())}", file=sys.stderr)
        _exit(BAD_INPUT if isinstance(error, ConfigError) else 1)
    _exit(status if isinstance(status, int) else 0)


def _exit(status: int) -> NoReturn:
    """sys.exit(status), with the status kept under `python -m`: a KeyboardInterrupt raised inside a string exec
    (dataclasses and namedtuples build their methods so while a module imports) marks the interpreter even once
    caught, and CPython's Py_RunMain then ends a `-m` run by SIGINT whatever the status. A string exec clears
    the mark."""
    exec("", {})
    sys.exit(status)
