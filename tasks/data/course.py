"""The CS224N course's CSV files (SST, CFIMDB, Quora, STS) as lists of small examples.

The files are tab-separated with a header and one or two unnamed pandas index columns; fields holding a
double quote are CSV-quoted, so we read with `csv`'s tab dialect (a plain `split("\\t")` gets hundreds of
rows wrong). Sentences keep the course's tokenisation ("It 's"). One quirk kept: the course quoted Quora
and CFIMDB text twice, so about 650 Quora questions still read like `"Do I need ""the"" here?"`, as the
course's own reader gives them.

The course's loader drops bad Quora rows silently in a bare `except`; here a malformed row is reported in
the `ReadResult` (examples.py), and `strict=True` makes it fatal.

SST keeps the Penn Treebank's escapes (`-LRB-`, `` `` ``, `\\/`), as the course's reference code does, so
numbers compare with the course's; `ptb_unescape=True` (`unescape_ptb`) turns them back into the characters
BERT saw in pre-training.

The main job's file flags (--sst-train ... --sts-test-out) each replace one of these files (`CourseFiles`).

Read next: sources.py (where the files are found), then batching.py (examples to padded batches).
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator, Mapping, Sequence, Union

from minbert.loading.atomic import atomic_write_text
from tasks.data.examples import (DataFileError, Example, PairExample, ReadResult, SentenceExample, SkippedRow,
                                 allow_long_fields, decode_data_file, skip_row)
from tasks.data.inputs import not_recorded
from tasks.data.numbers import decimal, whole_number
from tasks.data.sources import DataSource, resolve_data_dir

# ----------------------------------------------------------------------------------------------------
# Per-task specs: the only place the four formats differ
# ----------------------------------------------------------------------------------------------------

LabelParser = Callable[[str], Union[int, float]]


def class_label(allowed: Sequence[int]) -> LabelParser:
    """A parser for class labels written as whole numbers ("3") or as floats ("1.0", as in Quora), in ASCII
    digits (numbers.py: "0_3" and "３" are refused, not read as 3)."""

    def parse(text: str) -> int:
        value = whole_number(text)
        if value not in allowed:
            raise ValueError(f"{text!r} is out of range (allowed: {', '.join(map(str, allowed))})")
        return value

    return parse


def score_label(low: float, high: float) -> LabelParser:
    """A parser for real-valued scores in [low, high] (STS similarity), in ASCII digits (numbers.py)."""

    def parse(text: str) -> float:
        value = decimal(text)
        if not low <= value <= high:
            raise ValueError(f"{text!r} is out of range (allowed: {low:g} to {high:g})")
        return value

    return parse


@dataclass(frozen=True)
class TaskSpec:
    """What one task's files look like: column names, label parser, file names per split."""

    name: str
    text_columns: tuple[str, ...]  # ("sentence",) or ("sentence1", "sentence2")
    label_column: str
    parse_label: LabelParser
    files: Mapping[str, str]  # split ("train", "dev", "test") -> file name


TASKS: dict[str, TaskSpec] = {
    "sst": TaskSpec("sst", ("sentence",), "sentiment", class_label(range(5)), {
        "train": "ids-sst-train.csv", "dev": "ids-sst-dev.csv", "test": "ids-sst-test-student.csv"}),
    "cfimdb": TaskSpec("cfimdb", ("sentence",), "sentiment", class_label(range(2)), {
        "train": "ids-cfimdb-train.csv", "dev": "ids-cfimdb-dev.csv",
        "test": "ids-cfimdb-test-student.csv"}),
    # Quora writes its 0/1 labels as "0.0" / "1.0"; they are classes, so they become ints.
    "quora": TaskSpec("quora", ("sentence1", "sentence2"), "is_duplicate", class_label(range(2)), {
        "train": "quora-train.csv", "dev": "quora-dev.csv", "test": "quora-test-student.csv"}),
    # STS-B gold scores are averages of annotators' 0..5 ratings (Cer et al. 2017), hence floats.
    "sts": TaskSpec("sts", ("sentence1", "sentence2"), "similarity", score_label(0.0, 5.0), {
        "train": "sts-train.csv", "dev": "sts-dev.csv", "test": "sts-test-student.csv"}),
}
SPLITS = ("train", "dev", "test")


def task_spec(task: str) -> TaskSpec:
    """The spec of `task`, or a ValueError naming the allowed tasks."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r} (allowed: {', '.join(TASKS)})")
    return TASKS[task]


def task_files(tasks: Iterable[str], splits: Iterable[str] = SPLITS) -> list[str]:
    """The course file names that `tasks` need for `splits`, e.g. for `resolve_data_dir`."""
    names = []
    for task in tasks:
        spec = task_spec(task)
        for split in splits:
            if split not in spec.files:
                raise ValueError(f"unknown split {split!r} (allowed: {', '.join(SPLITS)})")
            names.append(spec.files[split])
    return names


# ----------------------------------------------------------------------------------------------------
# Penn Treebank escapes
# ----------------------------------------------------------------------------------------------------

PTB_ESCAPES = {
    "-LRB-": "(", "-RRB-": ")", "-LSB-": "[", "-RSB-": "]", "-LCB-": "{", "-RCB-": "}",
    "``": '"', "''": '"',  # the Treebank's opening and closing double quotes
    "\\/": "/", "\\*": "*",  # escaped because / and * meant something to the Treebank's tools
}
_PTB_PATTERN = re.compile("|".join(re.escape(escape) for escape in PTB_ESCAPES))


def unescape_ptb(text: str) -> str:
    """Undo Penn Treebank escapes: `-LRB-` → `(`, `` `` `` and `''` → `"`, `\\/` → `/`, and so on.

    Token spacing stays as it is ("-LRB- a -RRB-" becomes "( a )"); only the escapes change.
    """
    return _PTB_PATTERN.sub(lambda match: PTB_ESCAPES[match.group(0)], text)


# ----------------------------------------------------------------------------------------------------
# Reading
# ----------------------------------------------------------------------------------------------------


class CourseDialect(csv.excel_tab):
    """How pandas `to_csv(sep="\\t")` wrote the files: tabs, standard double-quote quoting; a leading space
    belongs to the sentence (we strip it ourselves)."""

    strict = True  # a stray quote inside a quoted field is an error, not a guess


def read_task(task: str, path: str | os.PathLike, *, labelled: bool = True, strict: bool = False,
              ptb_unescape: bool = False) -> ReadResult:
    """Read one course file of `task` ("sst", "cfimdb", "quora", "sts").

    labelled: False for the test files (no label column). strict: raise `MalformedRowError` at the first
    malformed row instead of skipping it. ptb_unescape: undo Penn Treebank escapes (`unescape_ptb`).
    A missing, empty, wrongly headed or non-UTF-8 file, or one with no usable rows, is an error.
    """
    spec = task_spec(task)
    path = Path(path)
    text = _read_utf8(path)
    columns = ["id", *spec.text_columns] + ([spec.label_column] if labelled else [])
    rows = _numbered_rows(text)

    _, _, header = next(rows)
    n_index = _check_header(path, header, columns, spec, labelled)

    examples: list[Example] = []
    skipped: list[SkippedRow] = []
    first_line_of_id: dict[str, int] = {}
    for line, last, fields in rows:
        reasons = _row_problems(fields, n_index, columns, spec, labelled, first_line_of_id)
        if last > line:
            reasons.append(f"the row runs over lines {line}-{last} (an unbalanced quote?)")
        if reasons:
            skip_row(path, line, "; ".join(reasons), strict, skipped)
            continue
        assert fields is not None
        values = [value.strip() for value in fields[n_index:]]
        first_line_of_id[values[0]] = line
        texts = [unescape_ptb(t) if ptb_unescape else t for t in values[1:1 + len(spec.text_columns)]]
        label = spec.parse_label(values[-1]) if labelled else None
        if len(texts) == 1:
            examples.append(SentenceExample(values[0], texts[0], label))
        else:
            examples.append(PairExample(values[0], texts[0], texts[1], label))

    if not examples:
        what = f"all {len(skipped)} data rows are malformed" if skipped else "it has a header but no rows"
        raise DataFileError(f"{path}: no usable examples: {what}")
    return ReadResult(path, tuple(examples), tuple(skipped))


def _read_utf8(path: Path) -> str:
    text = decode_data_file(path)
    if not text.strip():
        raise DataFileError(f"{path}: the file is empty (expected a header row and data rows)")
    return text


def _numbered_rows(text: str) -> Iterator[tuple[int, int, list[str] | None]]:
    """Yield (first line, last line, fields) per CSV row; fields is None where the CSV is broken.

    A quoted field may in principle hold a newline, so a row's line number is where it starts.
    """
    allow_long_fields(text)
    reader = csv.reader(io.StringIO(text, newline=""), dialect=CourseDialect)
    lines_before = 0
    while True:
        try:
            fields: list[str] | None = next(reader)
        except StopIteration:
            return
        except csv.Error:
            fields = None  # the reader resets itself, so the rows after this one are still read
        yield lines_before + 1, reader.line_num, fields
        lines_before = reader.line_num


def _check_header(path: Path, header: list[str] | None, columns: list[str], spec: TaskSpec,
                  labelled: bool) -> int:
    """Return how many index columns come before `columns` (1, or 2 in the test files), or raise."""
    header = [cell.strip() for cell in header or []]
    for n_index in (1, 2):
        index_cells = header[:n_index]
        # pandas names its index column "" and, in the test files, the doubled one "0"
        if header[n_index:] == columns and all(c == "" or c.isdigit() for c in index_cells):
            return n_index
    expected = "\\t".join(["", *columns])
    if len(header) == 1 and set(columns) <= {cell.strip() for cell in header[0].split(",")}:
        raise DataFileError(f"{path}:1: this file is comma-separated; the course files are tab-separated "
                            f"(found the header {header[0]!r}, expected {expected!r}): save it with "
                            "sep='\\t' (pandas) or tabs between the columns")
    hint = ""
    if labelled and header[-len(columns) + 1:] == columns[:-1]:
        hint = "; it has no label column: is it a test file? read it with labelled=False"
    elif not labelled and header[-1:] == [spec.label_column]:
        hint = f"; it has a {spec.label_column} column: read it with labelled=True"
    raise DataFileError(f"{path}:1: wrong header for a {'labelled' if labelled else 'test'} {spec.name} "
                        f"file: found {header!r}, expected {expected!r} (one or two index columns, "
                        f"then {', '.join(columns)}){hint}")


def _row_problems(fields: list[str] | None, n_index: int, columns: list[str], spec: TaskSpec,
                  labelled: bool, first_line_of_id: dict[str, int]) -> list[str]:
    """Everything wrong with one data row, as reasons for the report (empty when the row is fine)."""
    if fields is None:
        return ["broken CSV quoting"]
    if fields == []:
        return ["empty line"]
    if len(fields) != n_index + len(columns):
        return [f"expected {n_index + len(columns)} tab-separated fields (index, {', '.join(columns)}), "
                f"found {len(fields)}"]
    values = dict(zip(columns, (value.strip() for value in fields[n_index:])))
    problems = [f"empty {name}" for name, value in values.items() if not value]
    if values["id"] in first_line_of_id:
        problems.append(f"duplicate id {values['id']!r} (first on line {first_line_of_id[values['id']]})")
    if labelled and values[spec.label_column]:
        try:
            spec.parse_label(values[spec.label_column])
        except ValueError as error:
            problems.append(f"{spec.label_column} {error}")
    return problems


def read_sst(path: str | os.PathLike, split_has_labels: bool = True, strict: bool = False,
             ptb_unescape: bool = False) -> ReadResult:
    """SST-5 movie-review sentences: `SentenceExample`s with labels 0 (very negative) .. 4."""
    return read_task("sst", path, labelled=split_has_labels, strict=strict, ptb_unescape=ptb_unescape)


def read_quora(path: str | os.PathLike, split_has_labels: bool = True, strict: bool = False,
               ptb_unescape: bool = False) -> ReadResult:
    """Quora question pairs: `PairExample`s with labels 0 / 1 (1 = duplicate questions)."""
    return read_task("quora", path, labelled=split_has_labels, strict=strict, ptb_unescape=ptb_unescape)


def read_sts(path: str | os.PathLike, split_has_labels: bool = True, strict: bool = False,
             ptb_unescape: bool = False) -> ReadResult:
    """STS-B sentence pairs: `PairExample`s with float similarity labels in [0, 5]."""
    return read_task("sts", path, labelled=split_has_labels, strict=strict, ptb_unescape=ptb_unescape)


def read_split(data_dir: str | os.PathLike, task: str, split: str, *, strict: bool = False,
               ptb_unescape: bool = False) -> ReadResult:
    """Read `task`'s `split` file from `data_dir`; the "test" split is read without labels."""
    return read_task(task, Path(data_dir) / task_files([task], [split])[0], labelled=split != "test",
                     strict=strict, ptb_unescape=ptb_unescape)


def read_splits(source: DataSource, task: str, strict: bool, limit: int,
                splits: Sequence[str] = SPLITS,
                files: dict[str, str | None] | None = None) -> dict[str, list | None]:
    """The examples of one course task's `splits` from `source`, each file's report printed.

    The test file is optional (the shared data has no Quora test file): None when it is absent.
    limit: keep only the first N examples of each file (0: all).
    files: split -> a file to read instead of `source`'s (the course's --sst_train etc.); None: source's.
    """
    files = files or {}
    examples: dict[str, list | None] = {}
    for split in splits:
        path = files.get(split) or source.path / task_files([task], [split])[0]
        if split == "test" and not Path(path).is_file():
            print(f"note: no {task} test file in {source.path}; no test predictions", file=sys.stderr)
            examples[split] = None
            continue
        # a test file shapes no training: a resumed run may read another (tasks/data/inputs.py)
        with not_recorded() if split == "test" else contextlib.nullcontext():
            examples[split] = read_course_file(task, path, split, strict, limit)
    return examples


def read_course_file(task: str, path: str | Path, split: str, strict: bool, limit: int) -> list:
    """One course file of `task` (a test file carries no labels), its report printed; limit: the first N
    examples (0: all)."""
    result = read_task(task, path, labelled=split != "test", strict=strict)
    print(result.report(), file=sys.stderr)
    return list(result.examples[:limit] if limit else result.examples)


# ----------------------------------------------------------------------------------------------------
# Which files a main-job run reads and writes: the data folder's, or the ones named one by one
# ----------------------------------------------------------------------------------------------------
# The course's `multitask_classifier.py` names every file on the command line (`--sst_train
# data/ids-sst-train.csv ... --sts_test_out predictions/sts-test-output.csv`). The main job keeps those flags:
# each replaces the one file `--data-dir` (inputs) or the run folder (predictions) would give. `tasks`: the
# job's table (rows with a `name`, the flags' and output files' prefix, and a `dataset` of TASKS).

OUTPUT_SPLITS = ("dev", "test")


class CourseFiles:  # the flags' fields are made from the main job's table (tasks/multitask.py's course_files)
    """The course's files (each flag replaces one file that --data-dir or --out gives)."""

    prefixes: tuple[str, ...] = ()  # the rows' names: sst, para, sts

    def inputs(self, splits: Sequence[str]) -> dict[str, dict[str, str | None]]:
        """prefix -> split -> the file its --{prefix}-{split} flag names (None: the data folder's)."""
        return {p: {split: getattr(self, f"{p}_{split}") for split in splits} for p in self.prefixes}

    def output(self, prefix: str, split: str) -> str | None:
        """The file --{prefix}-{split}-out names (None: the run folder's)."""
        return getattr(self, f"{prefix}_{split}_out")


def find_data(tasks: Sequence, data_dir: str | None, files: dict[str, dict[str, str | None]],
              needed: Sequence[str]) -> DataSource:
    """The data folder holding every `needed` split's file that no flag replaces."""
    required = [task_files([t.dataset], [split])[0] for t in tasks for split in needed
                if not files[t.name][split]]
    source = resolve_data_dir(data_dir, required)
    print(f"data: {source.description}", file=sys.stderr)
    return source


def output_path(files: CourseFiles, prefix: str, split: str, folder: Path) -> Path:
    """Where the predictions for `prefix`'s `split` go: its --{prefix}_{split}_out flag, or `folder`."""
    return Path(files.output(prefix, split) or folder / f"{prefix}-{split}-output.csv")


def read_prediction_inputs(tasks: Sequence, files: CourseFiles, data_dir: str | None, strict: bool,
                           limit: int) -> dict[str, dict[str, list | None]]:
    """prefix -> split ("dev", "test") -> examples to predict: exactly the files the flags name, or, when
    none is named, the data folder's dev files and whichever test files it has."""
    named = files.inputs(OUTPUT_SPLITS)
    with not_recorded():  # --predict trains nothing: no run folder records these
        if any(path for by_split in named.values() for path in by_split.values()):
            return {t.name: {split: read_course_file(t.dataset, path, split, strict, limit) if path else None
                             for split, path in named[t.name].items()} for t in tasks}
        source = find_data(tasks, data_dir, named, ("dev",))
        return {t.name: read_splits(source, t.dataset, strict, limit, OUTPUT_SPLITS) for t in tasks}


# ----------------------------------------------------------------------------------------------------
# The course's prediction files
# ----------------------------------------------------------------------------------------------------


def write_predictions(path: Path, header: str, ids: Sequence[str], predictions: Sequence) -> None:
    """The course's format: "id \\t <header> " on the first line, then "<id> , <prediction> " rows."""
    if len(ids) != len(predictions):
        raise ValueError(f"{len(ids)} ids but {len(predictions)} predictions for {path}")
    lines = [f"id \t {header} \n"] + [f"{i} , {p} \n" for i, p in zip(ids, predictions)]
    atomic_write_text(path, "".join(lines))


def read_predictions(path: Path) -> tuple[str, list[tuple[str, str]]]:
    """Parse a predictions file back: (header, [(id, prediction text), ...])."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    if not lines or not lines[0].startswith("id \t "):
        raise ValueError(f"{path}:1: expected the header 'id \\t <name>'")
    rows = []
    for number, line in enumerate(lines[1:], start=2):
        fields = line.split(" , ")
        if len(fields) != 2:
            raise ValueError(f"{path}:{number}: expected 'id , prediction', got {line!r}")
        rows.append((fields[0].strip(), fields[1].strip()))
    return lines[0][len("id \t "):].strip(), rows
