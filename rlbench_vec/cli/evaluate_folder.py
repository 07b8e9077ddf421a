"""An evaluation's run folder: one append-only log (log.jsonl) whose first record is what is scored, the check
that a resumed folder scores the same, and results.json / results.md derived from the log.

log.jsonl holds one JSON record per line, each appended whole by one write to a file opened for appending
(so records of several writers never interleave, and a kill leaves at most a cut last line, dropped on reading):
- {"record": "evaluation", ...}: first, once: the scored arguments, the package version, the policy's identity
  and each task's variation count (with the scored arguments, the plan of every episode's variation and seed);
  with --episodes_from, the dataset's identity and each scored stored episode's start.
- {"record": "run", "run": n, "command", "num_envs", "started"}: each start or resume of the folder.
- {"record": "envs", "run": n, "num_envs"}: each vector env a run made, with the envs it used.
- {"record": "episode", "run": n, "at": seconds into the run, task, episode, repeat, variation, seed, success, ...}.
- {"record": "end", "run": n, "at", "finished"}: a run that ended without being killed.
Only episodes of the plan count, each once (its first record). Every number of results.json comes from the log:
`rebuild(out)` writes them again.
Under torchrun rank r > 0 appends its run's records to log.rank{r}.jsonl (rank 0 to log.jsonl), each with "rank"
(a run record also with "world_size"): one writer per file, whatever the file system, and read as one log; a run's
ranks share its number.
"""

from __future__ import annotations

import importlib.metadata
import json
import math
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError, DatasetError
from .evaluate_config import EvaluateConfig
from .evaluate_plan import plan
from .evaluate_report import markdown, summary
from .runs import stop_if_disk_full, write_json, write_whole

LOG_FILE = "log.jsonl"
RANK_LOG = "log.rank{}.jsonl"  # the log of rank r > 0 under torchrun
RESULTS_FILE = "results.json"
TABLE_FILE = "results.md"
OLD_LOG = "episodes.jsonl"  # the log of rlbench_vec 0.2's evaluate, which kept no record of what it scored


def package_version() -> str:
    try:
        return importlib.metadata.version("rlbench_vec")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


@dataclass
class Log:
    """What a run folder's log holds, read back: its first record, the runs, and the planned episodes, each once."""

    header: dict[str, Any] | None = None
    runs: list[dict[str, Any]] = field(default_factory=list)
    episodes: list[dict[str, Any]] = field(default_factory=list)
    ignored: int = 0  # episode records outside the plan or repeated


def read_log(out: Path, planned: Iterable[tuple[str, int, int, int, int]] | None = None) -> Log:
    """The log of `out` (an empty Log where there is none). planned: the (task, episode, repeat, variation, seed)
    that count (None: the plan the first record gives); other episode records and repeats are left out, counted."""
    path = out / LOG_FILE
    log = Log()
    if not path.is_file():
        if (out / OLD_LOG).is_file():
            raise ConfigError(f"{out} holds an evaluation of an older rlbench_vec ({OLD_LOG}, with no record of what "
                              "it scored): choose another --out.")
        return log
    records = _records(path)
    if records and records[0].get("record") == "evaluation":
        log.header = records[0]
    elif records:
        raise ConfigError(f"{path} does not start with an evaluation's record: it is no run folder of evaluate; "
                          "choose another --out.")
    if planned is None and log.header is not None:
        planned = header_plan(log.header)
    wanted: dict[Any, tuple[int, int]] = {(task, episode, repeat): (variation, seed)
                                         for task, episode, repeat, variation, seed in planned or ()}
    seen = set()
    for record in records[1:] + [record for rank_log in rank_logs(out) for record in _records(rank_log)]:
        kind = record.get("record")
        if kind in ("run", "envs", "end"):
            log.runs.append(record)
        elif kind == "episode":
            key = (record.get("task"), record.get("episode"), record.get("repeat", 0))
            if key in seen or wanted.get(key) != (record.get("variation"), record.get("seed")):
                log.ignored += 1
            else:
                seen.add(key)
                log.episodes.append(record)
    return log


def rank_logs(out: Path) -> list[Path]:
    """The logs of ranks > 0 in the folder, by rank."""
    return sorted(out.glob(RANK_LOG.format("*")), key=lambda path: int(path.name.split(".")[1][4:]))


def log_path(out: Path, rank: int) -> Path:
    return out / (LOG_FILE if rank == 0 else RANK_LOG.format(rank))


def _records(path: Path) -> list[dict[str, Any]]:
    """The whole records of a log (a last line cut by a kill is left out)."""
    lines = path.read_bytes().split(b"\n")
    records = []
    for number, line in enumerate(lines[:-1], start=1):  # the last piece has no newline: empty, or cut by a kill
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            raise ConfigError(f"{path} line {number} is not JSON: this folder's log is damaged; choose another --out "
                              "(the results can be rebuilt only from a whole log).") from None
    return records


def header_plan(header: dict[str, Any]) -> list[tuple[str, int, int, int, int]]:
    """The (task, episode, repeat, variation, seed) of every planned episode, from a log's first record."""
    scored: dict[str, Any] = {key: tuple(value) if isinstance(value, list) else value
                              for key, value in header["scored"].items()}
    config = EvaluateConfig(**scored)
    starts = header.get("stored_episodes") or {}
    return [p.key for task in config.tasks
            for p in plan(config, task, header["variation_counts"][task], starts.get(task))]


def differences(before: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """What differs between two first records, one phrase each."""
    said = []
    for key in ("scored", "policy_identity", "variation_counts", "dataset", "stored_episodes"):
        old, new = before.get(key, {}), now[key]
        for name in sorted(set(old) | set(new), key=lambda name: (name not in new, name)):
            if old.get(name) != new.get(name):
                what = {"policy_identity": "the policy's ", "dataset": "the dataset's ",
                        "stored_episodes": "the stored episodes of "}.get(key, "") + name
                said.append(f"{what} {json.dumps(old.get(name))} then, {json.dumps(new.get(name))} now")
    if before.get("version") != now["version"]:
        said.append(f"rlbench_vec {before.get('version')} then, {now['version']} now")
    return said


class RunLog:
    """The log of a run folder opened to append: the first record checked against (or written as) what this run
    scores, a record per run, vector env and episode. A full disk raises DatasetError in one line; a record
    that does not fit is cut off again, so the log stays whole and the folder resumable. Under torchrun each
    rank opens its own (rank 0 first, writing the first record; the others once it is there, and all before
    any writes its run record, so they share the run's number)."""

    def __init__(self, out: Path, header: dict[str, Any], planned: Iterable[tuple[str, int, int, int, int]],
                 rank: int = 0, world: int = 1):
        self.out, self.path, self.rank, self.world = out, log_path(out, rank), rank, world
        self.log = read_log(out, planned)
        differ = differences(self.log.header, header) if self.log.header is not None else []
        if differ:
            raise ConfigError(f"{out} was started to score something else ({'; '.join(differ)}): resume with the "
                              "same command, or choose another --out.")
        self.started = time.perf_counter()
        self.run = 1 + max((record["run"] for record in self.log.runs), default=-1)
        self.fd: int | None = None
        out.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        size = os.fstat(self.fd).st_size
        with open(self.path, "rb") as file:  # a last line cut by a kill: dropped (read_log left it out)
            file.seek(max(0, size - 1))
            if size and file.read(1) != b"\n":
                content = self.path.read_bytes()
                os.truncate(self.path, content.rfind(b"\n") + 1)
        if self.log.header is None:
            assert rank == 0, "rank 0 writes the first record before the other ranks open the log"
            self.log.header = header
            self.write(header)

    def write(self, record: dict[str, Any]) -> None:
        """Append one record whole."""
        assert self.fd is not None
        data = (json.dumps(record) + "\n").encode()
        size = os.fstat(self.fd).st_size
        try:
            if os.write(self.fd, data) != len(data):
                raise OSError(28, os.strerror(28))  # ENOSPC: a short write means the disk filled up
        except OSError as error:
            os.ftruncate(self.fd, size)  # no cut record left behind
            stop_if_disk_full(f"{error.strerror or error}", self.out)
            raise DatasetError(f"cannot append to {self.path}: {error}; the finished episodes are kept.") from None

    def add_run(self, command: str, num_envs: int) -> None:
        ranks = {"world_size": self.world} if self.world > 1 else {}
        self.write({"record": "run", "run": self.run, **self._rank(), **ranks, "command": command,
                    "num_envs": num_envs, "started": round(time.time(), 3)})

    def add(self, record: dict[str, Any], kind: str) -> None:
        """An "episode" or "envs" record of this run, with the seconds into it."""
        self.write({"record": kind, "run": self.run, **self._rank(),
                    "at": round(time.perf_counter() - self.started, 3), **record})
        if kind == "episode":
            self.log.episodes.append(record)

    def _rank(self) -> dict[str, int]:
        return {"rank": self.rank} if self.world > 1 else {}

    def close(self, finished: bool) -> None:
        """The run's end record where the disk still takes it (else the last episode's time stands for it)."""
        if self.fd is None:
            return
        try:
            self.add({"finished": finished}, "end")
        except (DatasetError, OSError):
            pass
        finally:
            os.close(self.fd)
            self.fd = None


class OtherRanks:
    """Rank 0's view of the other ranks' logs as they grow: their episodes of this run, for the world's progress.
    Open it after every rank opened its log, before any writes its run record."""

    def __init__(self, out: Path, world: int):
        self.offsets = {log_path(out, rank): _size(log_path(out, rank)) for rank in range(1, world)}
        self.looked = -math.inf

    def episodes(self, now: bool = False) -> list[dict[str, Any]]:
        """The episode records the other ranks appended since the last look (one a second at most, unless `now`:
        the logs may lie on a network file system)."""
        found: list[dict[str, Any]] = []
        if not now and time.monotonic() - self.looked < 1.0:
            return found
        self.looked = time.monotonic()
        for path, offset in self.offsets.items():
            if _size(path) <= offset:
                continue
            with open(path, "rb") as file:
                file.seek(offset)
                data = file.read()
            data = data[:data.rfind(b"\n") + 1]  # a record still being appended waits for the next look
            self.offsets[path] += len(data)
            found += [record for record in map(json.loads, data.splitlines()) if record["record"] == "episode"]
        return found


def _size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


def results_of(log: Log) -> dict[str, Any]:
    assert log.header is not None
    return summary(log.header, log.runs, log.episodes, header_plan(log.header), log.ignored)


def write_results(out: Path, log: Log) -> dict[str, Any]:
    """results.json and results.md from the log, each replaced whole; returns the results."""
    result = results_of(log)
    try:
        write_json(out / RESULTS_FILE, result)
        write_whole(out / TABLE_FILE, markdown(result))
    except OSError as error:
        stop_if_disk_full(str(error), out)
        raise
    return result


def rebuild(out: str | Path) -> dict[str, Any]:
    """results.json and results.md of a run folder rebuilt from its log alone (`--report_only`)."""
    folder = Path(out)
    log = read_log(folder)
    if log.header is None:
        raise ConfigError(f"{folder} holds no evaluation's log ({LOG_FILE}): nothing to report.")
    return write_results(folder, log)
