"""Argument types that check a flag's value where argparse reads it, before any work starts.

Each is a function from the command line's string to the value, raising argparse.ArgumentTypeError with
what would be accepted; argparse adds the flag's name, so a bad value reads, for example,

    error: argument --limit: must be an integer >= 0 (0: every example), got '-5'

and the job exits with status 2 before it reads data or loads a model.

Read next: config.py (the training flags, typed with these).
"""

from __future__ import annotations

import argparse
import math
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
    return parse


positive_int = integer(1)
non_negative_int = integer(0)
positive = real(0.0, low_open=True)
non_negative = real(0.0)
probability = real(0.0, 1.0, high_open=True, meaning="a dropout probability")
