"""Check the course's prediction files before they are submitted: header, ids, one prediction each, labels.

    python -m grading.check_predictions runs/multitask/<date-time>         a run of the main job
    python -m grading.check_predictions predictions/ --data-dir data/cs224n

The CS224N default project grades six files, {sst,para,sts}-{dev,test}-output.csv, in the format its
multitask_classifier.py writes (and tasks.data.course's write_predictions copies): a header line
"id \\t Predicted_Sentiment " (space, tab, space, the column, space; the STS column is the course's
"Predicted_Similiary", sic), then one line "<id> , <prediction> " (space, comma, space, and a trailing
space) per example. A submission whose files the course's scripts cannot read loses points; this finds
what would, before the deadline. Each output file is checked against its input file in the data folder:

    sst-dev-output.csv   <- ids-sst-dev.csv            sst-test-output.csv   <- ids-sst-test-student.csv
    para-dev-output.csv  <- quora-dev.csv              para-test-output.csv  <- quora-test-student.csv
    sts-dev-output.csv   <- sts-dev.csv                sts-test-output.csv   <- sts-test-student.csv

Problems found: a missing, empty, non-UTF-8 or binary file; a wrong header (a byte-order mark, other spacing,
another task's column); a line that is not "<id> , <prediction> " (other spacing is named as such); an id
that is not in the input file, or that comes twice; an input id with no prediction; a prediction out of
its task's range (SST a whole number 0..4, paraphrase 0 or 1, "1.0" accepted as the course writes it; STS
a number from 0 to 5; never NaN or infinity). Each is one line, "file:line: id 'x': what is wrong"; a file
with none gets one OK line; the exit status is 1 when any file has a problem, 0 when all pass, 2 when the
folders cannot be read. Line endings may be "\\n" or "\\r\\n" and the last newline may be missing: any
line-based reader takes those.

Test files: their gold labels are hidden from students, so nothing is scored anywhere here; a test file is
checked exactly as a dev file is (its ids against the *-test-student.csv input, its labels' ranges). Where
the data folder lacks an input file (the shared data has no quora-test-student.csv), its output file is
not required; if present, it is checked for everything but its ids, and the OK line says so.

Malformed input rows (a missing field, an empty sentence or label; quora-dev.csv has one) are skipped by
the course's loader and by the main job, so their ids need no prediction; a prediction for one is
accepted too.

It imports only the standard library and tasks.training.flags (the flag types every command line uses,
themselves standard library only), so that it runs before torch is installed; a student's handout installs
it with the rest (grading.layout INSTALLED_TOOLS). The repository's tests check that its file names,
headers and input rows agree with the main job's (tasks.data.course, tasks.models).

Read next: handout.py.
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from tasks.training.flags import existing_dir

SHOWN = 20  # problems of one kind printed per file before a count of the rest


@dataclass(frozen=True)
class Output:
    """One prediction file of the course and the input file whose ids it predicts."""

    prefix: str  # "sst", "para", "sts": the course's names for the output files
    split: str  # "dev" or "test"
    input_name: str  # the course's input file in the data folder
    column: str  # the header's prediction column, as the course spells it
    check: Callable[[float], bool]  # is this (finite) prediction in range?
    allowed: str  # the range, for messages

    @property
    def name(self) -> str:
        return f"{self.prefix}-{self.split}-output.csv"

    @property
    def header(self) -> str:
        return f"id \t {self.column} "


def _class(value: float, classes: int) -> bool:
    return value.is_integer() and 0 <= value < classes


_TASKS = {  # prefix -> (input file stem per split, column, range check, allowed values)
    "sst": ({"dev": "ids-sst-dev", "test": "ids-sst-test-student"}, "Predicted_Sentiment",
            lambda v: _class(v, 5), "a whole number 0..4"),
    "para": ({"dev": "quora-dev", "test": "quora-test-student"}, "Predicted_Is_Paraphrase",
             lambda v: _class(v, 2), "0 or 1"),
    "sts": ({"dev": "sts-dev", "test": "sts-test-student"}, "Predicted_Similiary",  # sic, the course's
            lambda v: 0.0 <= v <= 5.0, "a number from 0 to 5"),
}
OUTPUTS = tuple(Output(prefix, split, f"{stems[split]}.csv", column, check, allowed)
                for prefix, (stems, column, check, allowed) in _TASKS.items() for split in ("dev", "test"))
# The input files' label columns: a row whose label is empty or not a number is malformed.
LABEL_COLUMNS = ("sentiment", "is_duplicate", "similarity")


class InputError(Exception):
    """An input file that cannot be read: the message names it."""


@dataclass
class InputIds:
    """The ids of one input file: those that need a prediction, and those of malformed rows (optional)."""

    path: Path
    required: dict[str, int] = field(default_factory=dict)  # id -> its line in the input file
    optional: dict[str, int] = field(default_factory=dict)


@dataclass
class Report:
    """What one output file got: its problems (already formatted) and its OK line."""

    problems: list[str] = field(default_factory=list)
    ok: str = ""
    required: bool = True  # False: neither the file nor its input is there


def read_input_ids(path: Path) -> InputIds:
    """The ids of a course input file (one or two unnamed index columns, then id, the sentences and, in
    dev files, the label), as the main job reads them; InputError names the file if it cannot be read."""
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError(f"{path}: not UTF-8 ({error.reason} at byte {error.start})") from None
    # tab-separated, fields with quotes CSV-quoted (pandas' to_csv); broken quoting raises (strict)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter="\t", strict=True)
    try:
        header = [cell.strip() for cell in next(reader)]
    except (StopIteration, csv.Error):
        raise InputError(f"{path}: empty, or no header row") from None
    if "id" not in header:
        raise InputError(f"{path}:1: no id column in the header {header!r}")
    named = [i for i, cell in enumerate(header) if cell and not cell.isdigit()]  # pandas' index: "" or "0"
    id_column = header.index("id")
    ids = InputIds(path)
    line = 1
    while True:
        first = line + 1
        try:
            fields = next(reader)
        except StopIteration:
            break
        except csv.Error:
            fields = []  # broken quoting: malformed, and its id unknown
        line = reader.line_num
        if len(fields) != len(header):
            if len(fields) > id_column and fields[id_column].strip():
                ids.optional.setdefault(fields[id_column].strip(), first)
            continue
        values = {header[i]: fields[i].strip() for i in named}
        if values["id"] in ids.required:
            continue  # a repeated input id still needs one prediction
        if all(values.values()) and all(_number(values[c]) is not None for c in LABEL_COLUMNS if c in values):
            ids.required[values["id"]] = first
        elif values["id"]:
            ids.optional.setdefault(values["id"], first)
    return ids


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


_ROW = re.compile(r"(\S+) , (\S+) ")  # the course's f"{id} , {prediction} \n"


def check_output(path: Path, output: Output, ids: InputIds | None) -> Report:
    """Check one output file against its input's ids (None: the input is absent, ids unchecked)."""
    report = Report()

    def problem(message: str, line: int | None = None, id_: str | None = None) -> None:
        where = f"{path}:{line}" if line else f"{path}"
        report.problems.append(f"{where}: " + (f"id {_quoted(id_)}: " if id_ is not None else "") + message)

    if not path.is_file():
        if ids is not None:
            problem(f"missing: expected the predictions for the {len(ids.required)} ids of "
                    f"{output.input_name}")
        else:
            report.ok = f"{path}: not checked: neither it nor {output.input_name} is there (not required)"
            report.required = False
        return report
    data = path.read_bytes()
    if not data.strip():
        problem(f"the file is empty: expected the header {output.header!r} and one line per id")
        return report
    if data.startswith(b"\xef\xbb\xbf"):
        problem("starts with a UTF-8 byte-order mark, which the course's header has not: save without it", 1)
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[:error.start].count(b"\n") + 1
        problem(f"not UTF-8 (byte 0x{data[error.start]:02x}): not a text file of the course's format; "
                "write it as UTF-8 text", line)
        return report
    if "\0" in text:
        problem("holds NUL bytes: not a text file of the course's format",
                text[:text.index("\0")].count("\n") + 1)
        return report
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the newline after the last line
    lines = [line[:-1] if line.endswith("\r") else line for line in lines]

    first = _parse_row(lines[0])
    headless = not isinstance(first, str) and first[0] != "id"  # its first line is a prediction
    if lines[0] != output.header:
        problem(f"header {_quoted(lines[0])}, expected {output.header!r}"
                + _header_hint(lines[0], output, headless), 1)
    rows, first_line = (lines, 1) if headless else (lines[1:], 2)
    seen: dict[str, int] = {}
    lowered = {known.lower(): known for known in ids.required} if ids is not None else {}
    before = len(report.problems)
    for number, raw in enumerate(rows, start=first_line):
        parsed = _parse_row(raw)
        if isinstance(parsed, str):
            problem(parsed, number)
            continue
        id_, value, spacing = parsed
        if spacing:
            problem(f"spacing differs from the course's: found {_quoted(raw)}, expected "
                    f"{_quoted(f'{id_} , {value} ')} (space, comma, space, and a space at the end)",
                    number, id_)
        if id_ in seen:
            problem(f"a second prediction (the first is on line {seen[id_]}): one line per id", number, id_)
            continue
        seen[id_] = number
        if ids is not None and id_ not in ids.required and id_ not in ids.optional:
            known = lowered.get(id_.lower())
            hint = f" (it has {_quoted(known)}: ids are case-sensitive)" if known else ""
            problem(f"not an id of {output.input_name}{hint}", number, id_)
        number_value = _number(value)
        if number_value is None:
            problem(f"prediction {_quoted(value)} is not a finite number; expected {output.allowed}", number,
                    id_)
        elif not output.check(number_value):
            problem(f"prediction {_quoted(value)} is out of range; expected {output.allowed}", number, id_)
    line_problems = report.problems[before:]
    if len(line_problems) > SHOWN:
        report.problems[before + SHOWN:] = [f"{path}: ... and {len(line_problems) - SHOWN} more problems "
                                            "on other lines"]
    missing = [] if ids is None else [(i, line) for i, line in ids.required.items() if i not in seen]
    if missing and len(missing) == len(ids.required):
        problem(f"none of the {len(ids.required)} ids of {output.input_name} has a prediction")
        missing = []
    elif len(missing) > 1 and set(seen) == set(list(ids.required)[:len(ids.required) - len(missing)]):
        problem(f"only the first {len(ids.required) - len(missing)} of the {len(ids.required)} ids of "
                f"{output.input_name} (its lines up to {missing[0][1] - 1}) have a prediction: a run with "
                "--limit?")
        missing = []
    for id_, line in missing[:SHOWN]:
        problem(f"no prediction (it is on line {line} of {output.input_name})", None, id_)
    if len(missing) > SHOWN:
        problem(f"... and {len(missing) - SHOWN} more ids of {output.input_name} with no prediction "
                f"({len(missing)} of {len(ids.required)} in all)")
    if not report.problems:
        report.ok = _ok_line(path, output, ids, len(seen))
    return report


def _quoted(text: str, limit: int = 80) -> str:
    """A value of the file as a message quotes it: a 10 MB id cut to its start, its length said."""
    return repr(text) if len(text) <= limit else f"{text[:limit]!r}... ({len(text):,} characters)"


def _header_hint(found: str, output: Output, headless: bool) -> str:
    others = [o for o in OUTPUTS if o.column != output.column and o.header == found]
    if others:
        return f": that is the header of {others[0].prefix} files; are two files swapped?"
    if headless:
        return ": the header line is missing"
    if found.split() == output.header.split():
        return ": the spacing differs (the course's: 'id', space, tab, space, the column, space)"
    return ""


def _parse_row(raw: str) -> tuple[str, str, bool] | str:
    """(id, prediction, whether the spacing differs from the course's), or what is wrong with the line."""
    match = _ROW.fullmatch(raw)
    if match:
        return match.group(1), match.group(2), False
    if not raw.strip():
        return "an empty line: expected '<id> , <prediction> '"
    parts = [part.strip() for part in raw.split(",")]
    if len(parts) == 2 and all(parts) and not any(re.search(r"\s", part) for part in parts):
        return parts[0], parts[1], True
    return f"not a line '<id> , <prediction> ': {raw[:80]!r}"


def _ok_line(path: Path, output: Output, ids: InputIds | None, count: int) -> str:
    if ids is None:
        return (f"{path}: OK: {count} predictions, {output.allowed}; ids not checked: no {output.input_name} "
                "in the data folder")
    skipped = ""
    if ids.optional:
        lines = ", ".join(str(line) for line in sorted(ids.optional.values()))
        skipped = (f" (and {len(ids.optional)} malformed input row{'s' if len(ids.optional) > 1 else ''}, "
                   f"line {lines}, that the course skips)")
    return f"{path}: OK: {count} predictions, one per id of {output.input_name}{skipped}, {output.allowed}"


def find_predictions(folder: Path) -> Path:
    """The folder holding the prediction files: `folder`, or a run folder's predictions/."""
    if not any((folder / o.name).is_file() for o in OUTPUTS) and (folder / "predictions").is_dir():
        return folder / "predictions"
    return folder


def default_data_dir() -> Path:
    """$MINBERT_DATA/cs224n where $MINBERT_DATA is set, else ./data/cs224n (where the main job downloads)."""
    root = os.environ.get("MINBERT_DATA")
    if root is not None and not root.strip():  # set, but to nothing: never quietly ./data/cs224n instead
        raise InputError(f"MINBERT_DATA is set but empty ({root!r}); point it at the shared datasets folder, "
                         "give --data-dir, or unset it")
    return Path(root) / "cs224n" if root else Path("data") / "cs224n"


def check_folder(predictions: Path, data_dir: Path) -> list[Report]:
    """Check the six files in `predictions` against `data_dir`'s inputs: a report per file."""
    present = [o for o in OUTPUTS if (data_dir / o.input_name).is_file()]
    if not present:
        names = ", ".join(o.input_name for o in OUTPUTS)
        raise InputError(f"{data_dir}: none of the course's input files ({names}) is there; give the folder "
                         "that holds them with --data-dir")
    return [check_output(predictions / output.name, output,
                         read_input_ids(data_dir / output.input_name) if output in present else None)
            for output in OUTPUTS]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m grading.check_predictions",
                                     description=__doc__.split("\nRead next:")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=existing_dir, metavar="DIR",
                        help="the folder with the six *-output.csv files, or a run folder (its predictions/)")
    parser.add_argument("--data-dir", type=existing_dir, default=None, metavar="DIR",
                        help="the course's input files (ids-sst-dev.csv, ...; default: $MINBERT_DATA/cs224n, "
                             "else data/cs224n)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        data_dir = Path(args.data_dir) if args.data_dir else default_data_dir()
        reports = check_folder(find_predictions(Path(args.folder)), data_dir)
    except InputError as error:
        print(f"check_predictions: {error}", file=sys.stderr)
        return 2
    for report in reports:
        print("\n".join(report.problems or [report.ok]))
    failed = sum(1 for r in reports if r.problems)
    if failed:
        print(f"{failed} of {len(reports)} files have problems: fix them before you submit")
        return 1
    skipped = sum(1 for r in reports if not r.required)
    print(f"all {len(reports) - skipped} files pass (ids from {data_dir})"
          + (f"; {skipped} not required: no input file" if skipped else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
