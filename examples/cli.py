"""What the examples share: their command lines (every field of an Args dataclass becomes a --flag named as
the field, the package's convention: --num_envs, defaults in --help) and the word on a missing extra."""

from __future__ import annotations

import sys
from dataclasses import fields
from typing import NoReturn, TypeVar

from rlbench_vec.cli import ArgumentParser

T = TypeVar("T")

def parse_args(args_type: type[T], description: str | None) -> T:
    parser = ArgumentParser(description=description)
    for f in fields(args_type):  # type: ignore[arg-type]
        parser.add_argument("--" + f.name, type=type(f.default), default=f.default)
    args = vars(parser.parse_args())
    args.pop("debug", None)  # run_main's
    return args_type(**args)


def missing(error: ModuleNotFoundError, extras: str) -> NoReturn:
    """Ends an example that cannot import what an extra of this package brings, saying which to install."""
    raise SystemExit(f"{sys.argv[0]} needs {error.name!r}, which is not installed: pip install -e \".[{extras}]\" "
                     "(torch: an installed build of any kind satisfies it).")
