"""What every dataset reader returns: small example records, the rows it skipped, and its errors.

Readers (course.py, glue.py, hierarchy.py, conll.py, and pre-training's corpus.py) turn a file into a
`ReadResult`: the examples plus the rows they skipped, each with its file, line number and reason, for the
caller to print. File-level problems (missing file, empty file, wrong header, bytes that are not UTF-8)
are `DataFileError`s naming the file and line, raised before any training starts.

Read next: course.py (the course's CSV files).
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Union

from minbert.loading.errors import MinbertError, shorten
from tasks.data.inputs import record_input

# ----------------------------------------------------------------------------------------------------
# Examples and results
# ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SentenceExample:
    """One sentence to classify (SST: label 0..4; CFIMDB: 0/1; None in a test file)."""

    id: str
    sentence: str
    label: int | None


@dataclass(frozen=True)
class PairExample:
    """Two sentences and how they relate (Quora: int 0/1; STS: float 0..5; None in a test file)."""

    id: str
    sentence1: str
    sentence2: str
    label: float | int | None


Example = Union[SentenceExample, PairExample]


@dataclass(frozen=True)
class SkippedRow:
    """A data row a reader left out, and why; prints as `file:line: reason` like a compiler error."""

    path: Path
    line: int
    reason: str

    def __str__(self) -> str:
        return shorten(f"{self.path}:{self.line}: {self.reason}")  # a reason may quote a 10 MB field


@dataclass(frozen=True)
class ReadResult:
    """The examples read from one file, and the malformed rows skipped on the way."""

    path: Path
    examples: tuple[Example, ...]
    skipped: tuple[SkippedRow, ...]

    def __len__(self) -> int:
        return len(self.examples)

    def __iter__(self) -> Iterator[Example]:
        return iter(self.examples)

    def report(self) -> str:
        """One line for the count, then one line per skipped row (what a job prints after reading)."""
        head = f"read {len(self.examples)} examples from {self.path}"
        if not self.skipped:
            return head
        rows = "".join(f"\n  {row}" for row in self.skipped)
        return f"{head}; skipped {len(self.skipped)} malformed row(s):{rows}"


class DataFileError(MinbertError, ValueError):
    """A data file that cannot be read at all: empty, a wrong header, not UTF-8, no usable rows."""


class MalformedRowError(DataFileError):
    """A bad data row in strict mode; `path`, `line` and `reason` say which and why."""

    def __init__(self, path: Path, line: int, reason: str):
        super().__init__(f"{path}:{line}: {reason} (strict mode: malformed rows are fatal)")
        self.path, self.line, self.reason = path, line, reason


def skip_row(path: Path, line: int, problem: str, strict: bool, skipped: list[SkippedRow]) -> None:
    """A malformed row: fatal in strict mode (MalformedRowError), else reported (in `skipped`) and left out."""
    if strict:
        raise MalformedRowError(path, line, problem)
    skipped.append(SkippedRow(path, line, problem))


def allow_long_fields(text: str) -> None:
    """Let the csv module read every field of `text`: it refuses a field over `csv.field_size_limit()`
    (131,072 characters by default) as a csv.Error, which would drop a long sentence as broken quoting. No
    field is longer than the whole text, and each job's tokenization cuts every text to --max-length."""
    csv.field_size_limit(max(csv.field_size_limit(), len(text) + 1))


def not_a_file(path: Path) -> str:
    """Why `path`, which is no folder, is not a data file: absent, a broken link, or a device or pipe."""
    if path.is_symlink() and not path.exists():
        return f"{path} is a link to {os.readlink(path)}, which does not exist"
    if path.exists():
        return f"{path} is not a regular file (a device or a pipe?); a data file is a file"
    return f"{path}: no such data file"


def decode_data_file(path: str | os.PathLike, encoding: str = "utf-8-sig") -> str:
    """A data file's text. A missing file, one that cannot be read, or bytes that are not `encoding`, are
    errors naming the file (and line). The default utf-8-sig also tolerates the byte-order mark some
    editors add. The bytes are fingerprinted for the run folder (inputs.py)."""
    path = Path(path)
    if path.is_dir():
        raise FileNotFoundError(f"{path} is a folder, not a data file")
    if not path.is_file():
        raise FileNotFoundError(not_a_file(path))
    try:
        data = path.read_bytes()
    except OSError as error:  # not a write: the job's generic "cannot write" would misname it
        raise DataFileError(f"{path}: cannot read: {error.strerror}") from None
    record_input(path, data)
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        bad = data[error.start:error.end].hex(" ")
        name = "UTF-8" if encoding.startswith("utf-8") else encoding
        raise DataFileError(f"{path}:{line}: not {name} (byte(s) {bad} at byte offset {error.start}); "
                            f"re-encode the file as {name}") from None
