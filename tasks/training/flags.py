"""The checked types of the flags' values: each a function from the command line's string to the value,
raising argparse.ArgumentTypeError with what would be accepted. argparse adds the flag's name, so a bad
value ends the job, before it reads data or loads a model, with one line (exit status 2):

    error: argument --limit: must be an integer >= 0 (0: every example), got '-5'

Every flag of every job that takes a value has one of these types or choices (tests/test_command_line.py
checks that); each is marked `checked` and names the value --help shows (N, X, FILE, ...). This file imports
only the standard library and tasks/data/numbers.py: grading/'s command lines use it too.

Read next: settings.py (the settings every job shares, declared as flags).
"""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path
from typing import Callable

from tasks.data.numbers import decimal, whole_number

Refused = argparse.ArgumentTypeError


def checked(metavar: str) -> Callable:
    """Marks a type as one that checks its value, and names the value in --help."""
    def mark(parse: Callable) -> Callable:
        parse.checked, parse.metavar = True, metavar
        return parse
    return mark


def integer(low: int, meaning: str = "", high: int | Callable[[], int] | None = None,
            high_meaning: str = "") -> Callable[[str], int]:
    """An int >= low (and <= high: a number, or a function giving it when the flag is read) in ASCII digits
    (tasks/data/numbers.py: "1_0" and "１" are refused); `meaning` explains a special value ("0: every
    example"), `high_meaning` the bound."""
    @checked("N")
    def parse(text: str) -> int:
        top, note = high() if callable(high) else high, f" ({meaning})" if meaning else ""
        try:
            value = whole_number(text) if "." not in text else None  # a flag's integer has no ".0"
        except ValueError:
            value = None
        if value is None or value < low:
            raise Refused(f"must be an integer >= {low}{note}, got {text!r}")
        if top is not None and value > top:
            raise Refused(f"must be an integer from {low} to {top} ({high_meaning}), got {text!r}")
        return value
    return parse


def real(low: float, high: float = math.inf, low_open: bool = False, high_open: bool = False,
         meaning: str = "") -> Callable[[str], float]:
    """A finite float in the interval given ("(0, 1]" is low=0, low_open=True, high=1), in ASCII digits."""
    interval = f"{'(' if low_open else '['}{low:g}, {high:g}{')' if high_open or high == math.inf else ']'}"

    @checked("X")
    def parse(text: str) -> float:
        try:
            value = decimal(text)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and (value > low if low_open else value >= low)
                and (value < high if high_open else value <= high)):
            raise Refused(f"must be a number in {interval}{f' ({meaning})' if meaning else ''}, got {text!r}")
        return value
    return parse


def machine_cpus() -> int:
    """The CPUs this process may run on: more threads only slow every operation down, and hundreds of
    thousands crash OpenMP (--threads 100000 ended in a segmentation fault)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


positive_int = integer(1)
# torch.manual_seed takes a seed below 2**64; a larger one was an OverflowError deep inside it
seed_int = integer(0, high=2**64 - 1, high_meaning="torch.manual_seed's range")
threads_int = integer(0, "0: decide from the idle cores", high=machine_cpus,
                      high_meaning="this machine's CPUs")
non_negative_int = integer(0)
positive = real(0.0, low_open=True)
non_negative = real(0.0)
probability = real(0.0, 1.0, high_open=True, meaning="a dropout probability")


# ----- paths: the right kind of thing, checked before any work starts ----------------------------------


def _exists(path: Path, text: str) -> bool:
    """Whether something is at `path`; a path the operating system refuses to look up (a name too long, a
    symlink loop, a folder we may not search) is the flag's error, naming the cause."""
    try:
        path.stat()
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as error:
        raise Refused(f"{text!r}: {error.strerror}") from None
    return True


def _existing(text: str, folder: bool) -> str:
    kind, other = ("folder", "file") if folder else ("file", "folder")
    if not text:
        raise Refused(f"must be a {kind}, got an empty path")
    if not _exists(Path(text), text):
        raise Refused(f"no such {kind}: {text!r}")
    if Path(text).is_dir() != folder:
        raise Refused(f"{text!r} is a {other}, not a {kind}")
    if not os.access(text, os.R_OK | (os.X_OK if folder else 0)):
        raise Refused(f"{text!r} is not readable")
    return text


existing_file = checked("FILE")(lambda text: _existing(text, folder=False))  # a folder is named as such
existing_dir = checked("DIR")(lambda text: _existing(text, folder=True))


@checked("DIR")
def output_dir(text: str) -> str:
    """A folder to write into: absent (it will be created) or a folder, under a writable folder."""
    path = existing = Path(text)
    if not text:
        raise Refused("must be a folder, got an empty path")
    if _exists(path, text) and not path.is_dir():
        raise Refused(f"{text!r} is a file, not a folder")
    while not _exists(existing, text):  # the nearest folder that exists is where the new ones will be made
        existing = existing.parent
    if not existing.is_dir():
        raise Refused(f"{text!r} cannot be created: {str(existing)!r} is a file")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise Refused(f"{text!r} is not writable ({str(existing)!r} is read-only to you)")
    return text


@checked("FILE")
def output_file(text: str) -> str:
    """A file to write: not a folder, in a folder that exists or can be made and is writable."""
    path = Path(text)
    if not text:
        raise Refused("must be a file, got an empty path")
    if _exists(path, text) and path.is_dir():
        raise Refused(f"{text!r} is a folder, not a file")
    if _exists(path, text) and not path.is_file():  # written beside, then renamed: it would replace the node
        raise Refused(f"{text!r} is not a regular file (a device, a pipe or a socket); give the path of a "
                      "file to write")
    output_dir(str(path.parent) or ".")
    return text


# ----- names and lists ----------------------------------------------------------------------------------


@checked("NAME")
def nonempty(text: str) -> str:
    """A non-empty name (a model, a split list, a layer spec): checked further where used."""
    if not text.strip():
        raise Refused("must not be empty")
    return text


@checked("NAME")
def model_name_or_path(text: str) -> str:
    """A model's name or folder (hub.py says which, where used), as a path the system can look up."""
    _exists(Path(nonempty(text)).expanduser(), text)
    return text


def choice_list(allowed: tuple[str, ...]) -> Callable[[str], list[str]]:
    """A comma-separated list of some of `allowed` ("train,dev")."""
    @checked(",".join(allowed[:2]) + ",...")
    def parse(text: str) -> list[str]:
        items = [item.strip() for item in text.split(",")]
        if not text.strip() or any(item not in allowed for item in items):
            raise Refused(f"must be a comma-separated list of {', '.join(allowed)}, got {text!r}")
        return items
    return parse


@checked("NAMES")
def module_names(text: str) -> str:
    """Comma-separated module-name suffixes ("query,value"), or "all-linear" (--lora-targets); whether they
    name layers of the model is checked once it is loaded."""
    items = [item.strip() for item in text.split(",")]
    if not all(item and all(c.isalnum() or c in "._-" for c in item) for item in items):
        raise Refused(f"must be all-linear or comma-separated module names such as query,value, got {text!r}")
    return ",".join(items)
