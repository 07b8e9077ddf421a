"""The examples' command lines: every field of an Args dataclass becomes a --flag (num_envs -> --num-envs)."""

from __future__ import annotations

import argparse
from dataclasses import fields
from typing import TypeVar

T = TypeVar("T")


def parse_args(args_type: type[T], description: str | None) -> T:
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    for f in fields(args_type):  # type: ignore[arg-type]
        parser.add_argument("--" + f.name.replace("_", "-"), type=type(f.default), default=f.default)
    return args_type(**vars(parser.parse_args()))
