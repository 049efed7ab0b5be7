"""Argument types that check a flag's value where argparse reads it, before any work starts.

Each is a function from the command line's string to the value, raising argparse.ArgumentTypeError with
what would be accepted; argparse adds the flag's name, so a bad value reads, for example,

    error: argument --limit: must be an integer >= 0 (0: every example), got '-5'

and the job exits with status 2 before it reads data or loads a model.

Read next: settings.py (flags declared as dataclass fields, typed with these).
"""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path
from typing import Callable


def integer(low: int, meaning: str = "") -> Callable[[str], int]:
    """An int >= low; `meaning` explains a special value in the message (e.g. "0: every example")."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < low:
            note = f" ({meaning})" if meaning else ""
            raise argparse.ArgumentTypeError(f"must be an integer >= {low}{note}, got {text!r}")
        return value
    parse.__name__ = f"integer >= {low}"
    parse.checked, parse.metavar = True, "N"
    return parse


def real(low: float, high: float = math.inf, low_open: bool = False, high_open: bool = False,
         meaning: str = "") -> Callable[[str], float]:
    """A finite float in the interval given ("(0, 1]" is low=0, low_open=True, high=1)."""
    interval = f"{'(' if low_open else '['}{low:g}, {high:g}{')' if high_open or high == math.inf else ']'}"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        inside = (math.isfinite(value) and (value > low if low_open else value >= low)
                  and (value < high if high_open else value <= high))
        if not inside:
            note = f" ({meaning})" if meaning else ""
            raise argparse.ArgumentTypeError(f"must be a number in {interval}{note}, got {text!r}")
        return value
    parse.__name__ = f"number in {interval}"
    parse.checked, parse.metavar = True, "X"
    return parse


positive_int = integer(1)
non_negative_int = integer(0)
positive = real(0.0, low_open=True)
non_negative = real(0.0)
probability = real(0.0, 1.0, high_open=True, meaning="a dropout probability")


# ----- paths: the right kind of thing, checked before any work starts ----------------------------------


def _existing(text: str, folder: bool) -> str:
    kind, other = ("folder", "file") if folder else ("file", "folder")
    path = Path(text)
    if not text:
        raise argparse.ArgumentTypeError(f"must be a {kind}, got an empty path")
    if path.exists() and path.is_dir() != folder:
        raise argparse.ArgumentTypeError(f"{text!r} is a {other}, not a {kind}")
    if not path.exists():
        raise argparse.ArgumentTypeError(f"no such {kind}: {text!r}")
    if not os.access(path, os.R_OK | (os.X_OK if folder else 0)):
        raise argparse.ArgumentTypeError(f"{text!r} is not readable")
    return text


def existing_file(text: str) -> str:
    """A file that exists and can be read (a folder given instead is named as such)."""
    return _existing(text, folder=False)


def existing_dir(text: str) -> str:
    """A folder that exists and can be read (a file given instead is named as such)."""
    return _existing(text, folder=True)


def output_dir(text: str) -> str:
    """A folder to write into: absent (it will be created) or a folder, under a writable folder."""
    path = Path(text)
    if not text:
        raise argparse.ArgumentTypeError("must be a folder, got an empty path")
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a file, not a folder")
    existing = path
    while not existing.exists():  # the nearest folder that exists is where the new ones will be made
        existing = existing.parent
    if not existing.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} cannot be created: {str(existing)!r} is a file")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{text!r} is not writable ({str(existing)!r} is read-only to you)")
    return text


def output_file(text: str) -> str:
    """A file to write: not a folder, in a folder that exists or can be made and is writable."""
    path = Path(text)
    if not text:
        raise argparse.ArgumentTypeError("must be a file, got an empty path")
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a folder, not a file")
    output_dir(str(path.parent) or ".")
    return text


def nonempty(text: str) -> str:
    """A non-empty name or name-or-path (a model, a split list, a layer spec): checked further where used."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text


def choice_list(allowed: tuple[str, ...]) -> Callable[[str], list[str]]:
    """A comma-separated list of some of `allowed` ("train,dev")."""
    def parse(text: str) -> list[str]:
        items = [item.strip() for item in text.split(",")]
        unknown = [item for item in items if item not in allowed]
        if unknown or not text.strip():
            raise argparse.ArgumentTypeError(f"must be a comma-separated list of {', '.join(allowed)}, "
                                             f"got {text!r}")
        return items
    parse.__name__ = "list"
    parse.checked, parse.metavar = True, ",".join(allowed[:2]) + ",..."
    return parse


def name_weights(allowed: tuple[str, ...]) -> Callable[[str], tuple[tuple[str, float], ...]]:
    """Comma-separated name=factor pairs, each name one of `allowed` and each factor > 0 ("sts=2,sst=1.5")."""
    factor = real(0.0, low_open=True)

    def parse(text: str) -> tuple[tuple[str, float], ...]:
        pairs = []
        for item in text.split(","):
            name, equals, value = item.strip().partition("=")
            if not equals or name not in allowed:
                raise argparse.ArgumentTypeError(f"must be comma-separated name=factor pairs, the names from "
                                                 f"{', '.join(allowed)} (e.g. {allowed[-1]}=2), got {text!r}")
            try:
                pairs.append((name, factor(value)))
            except argparse.ArgumentTypeError as error:
                raise argparse.ArgumentTypeError(f"{name}'s factor {error}") from None
        if len({name for name, _ in pairs}) < len(pairs):
            raise argparse.ArgumentTypeError(f"names a task twice: {text!r}")
        return tuple(pairs)
    parse.__name__ = "name=factor list"
    parse.checked, parse.metavar = True, "NAME=X,..."
    return parse


# Every flag that takes a value goes through a checking type (or has choices): tests/test_command_line.py
# enumerates every job's parser and finds any that does not. The checks mark their types so, and name the
# value --help shows (settings.py):
for _check, _metavar in ((existing_file, "FILE"), (existing_dir, "DIR"), (output_dir, "DIR"),
                         (output_file, "FILE"), (nonempty, "NAME")):
    _check.checked, _check.metavar = True, _metavar
