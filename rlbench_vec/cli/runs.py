"""What the commands that run a list of jobs into a folder share (`collect`, `evaluate`): the progress bar,
stopping at a full disk, the check that a resumed folder was started with the same arguments, and a JSON
summary replaced whole, each job's seed."""

from __future__ import annotations

import errno
import json
import math
import os
import shlex
import sys
import time
import zlib
from collections.abc import Callable, Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np

from ..datasets.writers import Episode
from ..errors import ConfigError, DatasetError
from . import stopped_status

DISK_FULL = tuple(os.strerror(code) for code in (errno.ENOSPC, errno.EDQUOT))  # as the errors quote them
FINAL = ("done", "stopped")  # descriptions of a run's last progress line


class ProgressBar:
    """Jobs done of all, a rate and what went wrong, on stderr: a rich bar on a terminal; else (a log file,
    CI) one whole line every LINE_EVERY_S seconds and at the end, since rich cuts a line to 80 columns there.
    unit: what the rate counts per second (e.g. "demos")."""

    LINE_EVERY_S = 10.0

    def __init__(self, enabled: bool, unit: str):
        self.bar: Any = None
        self.unit = unit
        self.lines = enabled and not sys.stderr.isatty()
        self.last_line = -math.inf
        if enabled and not self.lines:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self.bar = Progress(TextColumn("{task.description:<22}"), BarColumn(bar_width=24), MofNCompleteColumn(),
                                TextColumn(f"{{task.fields[rate]}} {unit}/s  ETA"), TimeRemainingColumn(),
                                TextColumn("{task.fields[detail]}"), console=Console(stderr=True))
            self.bar.start()
            self.task = self.bar.add_task("starting", total=None, rate="-", detail="")
        self.started = time.perf_counter()

    def update(self, description: str, done: int, total: int, counted: int, detail: str, noun: str) -> None:
        """done of total `noun` (e.g. "episodes"); the rate is `counted` per second since the start."""
        if self.bar is None and not self.lines:
            return
        now = time.perf_counter()
        rate = counted / max(now - self.started, 1e-9)
        if self.bar is not None:
            self.bar.update(self.task, description=description, completed=done, total=total, rate=f"{rate:.2f}",
                            detail=detail)
        elif now - self.last_line >= self.LINE_EVERY_S or description in FINAL:
            self.last_line = now
            print(f"{description}: {done}/{total} {noun}, {rate:.2f} {self.unit}/s, {detail}", file=sys.stderr,
                  flush=True)

    def say(self, text: str) -> None:
        """A line of its own, above the bar."""
        if self.bar is not None:
            self.bar.console.print(text)
        elif self.lines:
            print(text, file=sys.stderr, flush=True)

    def stop(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def job_seed(seed: int, episode: Episode, attempt: int) -> int:
    """The seed of one attempt at one job (a demo to collect, an episode to score): the same whatever the number
    of envs, the order of completion or the resumes."""
    entropy = [seed, zlib.crc32(episode.task.encode()), episode.variation, episode.episode, attempt]
    return int(np.random.SeedSequence(entropy).generate_state(1)[0])


def stop_if_disk_full(error: str, out: Path) -> None:
    """A full disk (or quota) fails every write after it: stop at the first such error, retrying nothing.
    What was written is whole, so a rerun resumes there."""
    if any(text in error for text in DISK_FULL):
        raise DatasetError(f"the disk holding {out} is full ({error.splitlines()[0]}): free space or choose "
                           "another --out, then run the same command again to resume.")


def check_same_arguments(path: Path, now: Mapping[str, Any], what: str) -> None:
    """A folder being resumed must have been started with the same arguments (its summary at `path` keeps
    them under "config"); `what` says what the folder holds."""
    if not path.is_file():
        return
    before = json.loads(path.read_text()).get("config", {})
    different = {name: (before.get(name), value) for name, value in now.items() if before.get(name) != value}
    if different:
        raise ConfigError(f"{path.parent} holds {what} made with other arguments ({different}: before, now); resume "
                          "with the same arguments, or choose another --out.")


def command_line(module: str, config: Any) -> str:
    """The command line of `python -m MODULE` that runs `config` (a dataclass of the command's flags): every
    field that is not its default, lists space-separated as the flags take them."""
    words = ["python", "-m", module]
    for f in fields(config):
        value = getattr(config, f.name)
        if value is None or value == type(config).__dataclass_fields__[f.name].default:
            continue
        if isinstance(value, bool):
            value = int(value)
        if isinstance(value, Mapping):
            words += [f"--{f.name}", json.dumps(dict(value))]
        elif isinstance(value, tuple):
            words += [f"--{f.name}", *map(str, value)]
        else:
            words += [f"--{f.name}", str(value)]
    return shlex.join(words)


def parsed_flags(parser: Any, argv: Any, lists: tuple[str, ...]) -> dict[str, Any]:
    """A command's flags as its config's fields: 0/1 flags (absolute_mode, progress) as bools, lists as tuples."""
    args = vars(parser.parse_args(argv))
    args.pop("debug", None)  # run_main's
    args["absolute_mode"], args["progress"] = bool(args["absolute_mode"]), bool(args["progress"])
    args["ignore_collisions_flag"] = bool(args.get("ignore_collisions_flag", 0))
    for key in lists:
        args[key] = None if args[key] is None else tuple(args[key])
    return args


def run_stoppable(run: Callable[..., dict[str, Any]], config: Any, module: str, argv: list[str], kept: str,
                  summary: Path) -> dict[str, Any] | int:
    """run(config, command=...) with the command line it was given; on Ctrl-C or SIGTERM one line saying what
    is kept and how to resume, and the status to exit with."""
    try:
        return run(config, command=shlex.join(["python", "-m", module, *argv]))
    except KeyboardInterrupt:
        word, status = stopped_status()
        print(f"{word}: {kept}run the same command again to resume ({summary}).", file=sys.stderr)
        return status


def write_json(path: Path, content: Any) -> None:
    """Replace the file whole (a reader never sees half of it)."""
    write_whole(path, json.dumps(content, indent=2) + "\n")


def write_whole(path: Path, text: str) -> None:
    """Replace the file whole, through a temporary file renamed over it: a reader, or a full disk, never leaves
    half of it; the temporary file does not outlive a failure."""
    temporary = path.with_name(path.name + ".tmp")
    try:
        temporary.write_text(text)
        temporary.replace(path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
