"""How text becomes a number, strictly: ASCII digits in the forms data files and command lines write.

Python's `int()` and `float()` accept more than a data file or a flag means: "0_3" is 3, "３" and "٣" are
3, and "nan", "infinity" and "0x1"-like spellings slip through one or the other. A label written "0_3" is
a typo, not a 3, so every label reader (course.py) and numeric flag (tasks/training/flags.py) parses with
`whole_number` ("3", "-1", "007", "1.0" as Quora writes classes) or `decimal` ("2.5", ".5", "1e-3"), and
refuses the rest with a ValueError that quotes the text. Surrounding spaces and tabs are not part of it.

Read next: course.py (the readers that use them).
"""

from __future__ import annotations

import math
import re

_WHOLE = re.compile(r"-?[0-9]+(\.0*)?")  # "1.0": Quora writes its classes so
_DECIMAL = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
_NOT_FINITE = ("nan", "inf", "infinity")


def whole_number(text: str) -> int:
    """An integer written in ASCII digits (optionally "-", optionally ".0"); else a ValueError."""
    stripped = text.strip(" \t")
    if not _WHOLE.fullmatch(stripped):
        decimal(text)  # a number of another form says so; one that is not a number too
        raise ValueError(f"{text!r} is not a whole number")
    return int(stripped.partition(".")[0])


def decimal(text: str) -> float:
    """A finite number written in ASCII digits ("2.5", "1e-3"); else a ValueError."""
    stripped = text.strip(" \t")
    if stripped.lower().lstrip("+-") in _NOT_FINITE:
        raise ValueError(f"{text!r} is not a finite number")
    if not _DECIMAL.fullmatch(stripped):
        raise ValueError(f"{text!r} is not a number written in the digits 0-9 (such as 2.5 or 1e-3)")
    value = float(stripped)
    if not math.isfinite(value):  # "1e999"
        raise ValueError(f"{text!r} is not a finite number")
    return value
