"""Dataset readers: the CS224N course's CSV files (SST, CFIMDB, Quora, STS) as lists of small examples.

The course ships tab-separated files with a header row and an unnamed pandas index column first;
the SST and CFIMDB test files carry that index twice (`0<TAB><TAB>id<TAB>sentence`), and we accept
one or two index columns in any file. Text fields that contain a double quote are CSV-quoted (the
field in quotes, inner quotes doubled), so we read with Python's `csv` module, tab dialect, standard
quoting; a plain `line.split("\\t")` gets hundreds of rows wrong. Sentences keep the course's
tokenisation ("It 's", " .") and lose only their leading and trailing spaces. One quirk we keep:
the course's pipeline CSV-quoted the Quora and CFIMDB text twice, so after the one level of unquoting
that the course's own reader also does, about 650 Quora questions and the CFIMDB reviews with quotes
still read like `"Do I need ""the"" here?"`.

Every reader returns a `ReadResult`: the examples plus a list of the rows it skipped, each with its
file, line number and reason, for the caller to print. The course's own loader drops bad Quora rows
silently inside a bare `except`; here a malformed row (a missing field, an empty or unparsable label,
a label out of range, a duplicate id) is reported, and `strict=True` makes it fatal
(`MalformedRowError`). File-level problems (missing file, empty file, wrong header, bytes that are not
UTF-8) are always errors, raised before any training starts.

Penn Treebank escapes. SST (and one CFIMDB review) keep the Treebank's escapes: `-LRB-` for "(",
`` `` `` and `''` for double quotes, `\\/` for "/". The course's reference code passes them unchanged
to its tokenizer (which lower-cases), so by default we keep them too: numbers then compare with the
course's. `ptb_unescape=True` (see `unescape_ptb`) turns them back into the characters BERT saw
during pre-training.

Where the files come from (`resolve_data_dir`), in order: `--data-dir`; `$MINBERT_DATA/cs224n`;
`./data/cs224n`; a download of the course files into `./data/cs224n` (commit and checksums pinned);
and, when even that fails, the synthetic demo set in `data/sample/`, announced loudly on stderr.

    from tasks.data import resolve_data_dir, read_split, task_files
    source = resolve_data_dir(args.data_dir, task_files(["sst", "quora", "sts"]))
    print(source.description)
    train = read_split(source.path, "sst", "train")
    print(train.report())

Read next: heads.py (what the examples feed into after tokenisation).
"""

from __future__ import annotations

import csv
import hashlib
import io
import math
import os
import re
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator, Mapping, Sequence, TextIO, Union

from minbert.atomic import atomic_write_bytes

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
        return f"{self.path}:{self.line}: {self.reason}"


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


class DataFileError(ValueError):
    """A data file that cannot be read at all: empty, a wrong header, not UTF-8, no usable rows."""


class MalformedRowError(DataFileError):
    """A bad data row in strict mode; `path`, `line` and `reason` say which and why."""

    def __init__(self, path: Path, line: int, reason: str):
        super().__init__(f"{path}:{line}: {reason} (strict mode: malformed rows are fatal)")
        self.path, self.line, self.reason = path, line, reason


# ----------------------------------------------------------------------------------------------------
# Per-task specs: the only place the four formats differ
# ----------------------------------------------------------------------------------------------------

LabelParser = Callable[[str], Union[int, float]]


def class_label(allowed: Sequence[int]) -> LabelParser:
    """A parser for class labels written as whole numbers ("3") or as floats ("1.0", as in Quora)."""

    def parse(text: str) -> int:
        value = _number(text)
        if not value.is_integer():
            raise ValueError(f"{text!r} is not a whole number")
        if int(value) not in allowed:
            raise ValueError(f"{text!r} is out of range (allowed: {', '.join(map(str, allowed))})")
        return int(value)

    return parse


def score_label(low: float, high: float) -> LabelParser:
    """A parser for real-valued scores in [low, high] (STS similarity)."""

    def parse(text: str) -> float:
        value = _number(text)
        if not low <= value <= high:
            raise ValueError(f"{text!r} is out of range (allowed: {low:g} to {high:g})")
        return value

    return parse


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"{text!r} is not a finite number")
    return value


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


class CourseDialect(csv.Dialect):
    """Tab-separated, standard double-quote quoting: how pandas `to_csv(sep="\\t")` wrote the files."""

    delimiter = "\t"
    quotechar = '"'
    doublequote = True
    escapechar = None
    lineterminator = "\n"
    quoting = csv.QUOTE_MINIMAL
    skipinitialspace = False  # leading spaces belong to the sentence; we strip them ourselves
    strict = True  # a stray quote inside a quoted field is an error, not a guess


def read_task(task: str, path: str | os.PathLike, *, labelled: bool = True, strict: bool = False,
              ptb_unescape: bool = False) -> ReadResult:
    """Read one course file of `task` ("sst", "cfimdb", "quora", "sts").

    labelled: False for the unlabelled test files (header without the label column).
    strict: raise `MalformedRowError` at the first malformed row instead of skipping it.
    ptb_unescape: undo Penn Treebank escapes in the sentences (see `unescape_ptb`); off by default,
        like the course's reference code.
    Raises FileNotFoundError for a missing file, DataFileError for an empty file, a wrong header,
    bytes that are not UTF-8, or a file with no usable rows.
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
            problem = SkippedRow(path, line, "; ".join(reasons))
            if strict:
                raise MalformedRowError(path, line, problem.reason)
            skipped.append(problem)
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


def decode_data_file(path: str | os.PathLike, encoding: str = "utf-8-sig") -> str:
    """A data file's text. A missing file, or bytes that are not `encoding`, are errors naming the file
    and line. The default utf-8-sig also tolerates the byte-order mark some editors add."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such data file")
    data = path.read_bytes()
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        bad = data[error.start:error.end].hex(" ")
        name = "UTF-8" if encoding.startswith("utf-8") else encoding
        raise DataFileError(f"{path}:{line}: not {name} (byte(s) {bad} at byte offset {error.start}); "
                            f"re-encode the file as {name}") from None


def _numbered_rows(text: str) -> Iterator[tuple[int, int, list[str] | None]]:
    """Yield (first line, last line, fields) per CSV row; fields is None where the CSV is broken.

    A quoted field may in principle hold a newline, so a row's line number is where it starts.
    """
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


def read_cfimdb(path: str | os.PathLike, split_has_labels: bool = True, strict: bool = False,
                ptb_unescape: bool = False) -> ReadResult:
    """CFIMDB movie reviews: `SentenceExample`s with labels 0 (negative) / 1 (positive)."""
    return read_task("cfimdb", path, labelled=split_has_labels, strict=strict, ptb_unescape=ptb_unescape)


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
    spec = task_spec(task)
    if split not in spec.files:
        raise ValueError(f"unknown split {split!r} (allowed: {', '.join(SPLITS)})")
    return read_task(task, Path(data_dir) / spec.files[split], labelled=split != "test", strict=strict,
                     ptb_unescape=ptb_unescape)


# ----------------------------------------------------------------------------------------------------
# Where the data comes from: given, environment, local, downloaded, or the synthetic sample
# ----------------------------------------------------------------------------------------------------

COURSE_REPO = "gpoesia/minbert-default-final-project"
COURSE_COMMIT = "7ac8260577fc12a86c7aaf38918056c30054ef39"  # pinned: files at a branch head can change
COURSE_BASE_URL = f"https://raw.githubusercontent.com/{COURSE_REPO}/{COURSE_COMMIT}/data/"

# Pins from ../shared/data/cs224n/SOURCE.txt: sha256 of the content where known; for the two Quora
# files whose content was never seen, the git blob id (sha1 of b"blob <size>\0" + content), which
# is what git itself records for them at the pinned commit.
COURSE_CHECKSUMS: dict[str, str] = {
    "ids-cfimdb-dev.csv": "sha256:3087f571b66860fe5d035b5a018d08202ad3fd3720e4821c04b2acf6c7ded559",
    "ids-cfimdb-test-student.csv":
        "sha256:7ae611548c9eac879e9ebb406cc9f8ae68ff12f78090e4965af5cbdfa06240f4",
    "ids-cfimdb-train.csv": "sha256:140fc513045a966109faed46a5c7a898767b96714d71bcb9c15f659129fadcea",
    "ids-sst-dev.csv": "sha256:a186ce94577635fbe10beaaddd50f16cccf6c30973221cefdf90deed2a584bfe",
    "ids-sst-test-student.csv": "sha256:bdd5a767faa0c26782117e37767ece154c30d5d04fb8727d09c71e3850a55c7b",
    "ids-sst-train.csv": "sha256:03b2b625c090f94a6afd59f114cde5282e2053aab0b101e87ed695d8a0c5b1df",
    "sts-dev.csv": "sha256:ce3cad6f16062586ac7ba462c28b010a9be10c530fd5074165860d7b7ab4e93d",
    "sts-test-student.csv": "sha256:dee455745b72e9ca3ff74e7c056bd73e34bad5b8d5641045a2c1e7e131866f47",
    "sts-train.csv": "sha256:15d12efc2d656fffb1d61ac1f08ec4227f43925fd16f420c037cbd063699c21b",
    "quora-dev.csv": "sha256:bfa3cc954a9ba300ae776a980141de65f622a3c1b97e3fd905d63245bc36d5ad",
    "quora-train.csv": "gitblob:a3b5546f6a0e65b60a328a5d294d1038f5bed1da",
    "quora-test-student.csv": "gitblob:f257ef00558555afb50819578a58205732b16354",
}

LOCAL_DATA_DIR = Path("data") / "cs224n"  # relative to the working directory, as the course does
SAMPLE_DIR = Path(__file__).resolve().parents[1] / "data" / "sample"
DOWNLOAD_TIMEOUT_S = 30.0
MAX_DOWNLOAD_BYTES = 256 * 2**20  # the largest course file (quora-train.csv) is about 20 MB

Fetch = Callable[[str, float], bytes]


class DownloadError(OSError):
    """A course file could not be fetched, or what was fetched failed its checksum."""


def urllib_fetch(url: str, timeout: float) -> bytes:
    """GET `url` with the standard library; any network failure becomes a DownloadError."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            data = response.read(MAX_DOWNLOAD_BYTES + 1)
    except (urllib.error.URLError, OSError, ValueError) as error:  # HTTPError is a URLError
        raise DownloadError(f"{url}: {error}") from error
    if len(data) > MAX_DOWNLOAD_BYTES:
        raise DownloadError(f"{url}: larger than {MAX_DOWNLOAD_BYTES} bytes; not a course file")
    return data


def checksum_matches(data: bytes, pin: str) -> bool:
    """Whether `data` matches `pin`: "sha256:<hex>" of the content, or "gitblob:<hex>" (git's sha1)."""
    kind, _, expected = pin.partition(":")
    if kind == "sha256":
        actual = hashlib.sha256(data).hexdigest()
    elif kind == "gitblob":
        actual = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    else:
        raise ValueError(f"checksum pin {pin!r} has an unknown kind {kind!r} (allowed: sha256, gitblob)")
    return actual == expected.lower()


def download_course_data(dest: str | os.PathLike, files: Iterable[str], *, fetch: Fetch = urllib_fetch,
                         base_url: str | None = None, checksums: Mapping[str, str] | None = None,
                         timeout: float = DOWNLOAD_TIMEOUT_S, log: TextIO | None = None) -> list[Path]:
    """Fetch the course `files` into `dest`, each checked against its pinned checksum.

    Files already in `dest` with the right checksum are kept. Every file is fetched and verified
    before any is written, and each is written atomically, so a failure (no network, a checksum
    mismatch) leaves `dest` as it was. `base_url` and `checksums` default to the module's pins
    (`COURSE_BASE_URL`, `COURSE_CHECKSUMS`), read at call time so tests can point them elsewhere.
    Raises DownloadError.
    """
    dest = Path(dest)
    base_url = COURSE_BASE_URL if base_url is None else base_url
    checksums = COURSE_CHECKSUMS if checksums is None else checksums
    log = sys.stderr if log is None else log
    fetched: dict[str, bytes] = {}
    for name in files:
        if name not in checksums:
            raise DownloadError(f"{name}: not a pinned course file (known: {', '.join(sorted(checksums))})")
        target = dest / name
        if target.is_file() and checksum_matches(target.read_bytes(), checksums[name]):
            continue
        url = base_url.rstrip("/") + "/" + name
        print(f"downloading {url}", file=log)
        data = fetch(url, timeout)
        if not checksum_matches(data, checksums[name]):
            raise DownloadError(f"{url}: checksum mismatch ({len(data)} bytes; expected {checksums[name]}); "
                                "not written")
        fetched[name] = data
    for name, data in fetched.items():
        atomic_write_bytes(dest / name, data)
    return [dest / name for name in files]


@dataclass(frozen=True)
class DataSource:
    """Where a job's data files are, how they were found, and a sentence saying so for the log.

    kind: "given" (--data-dir), "env" ($MINBERT_DATA/cs224n), "local" (./data/cs224n),
    "downloaded" (fetched just now into ./data/cs224n) or "sample" (the synthetic demo set).
    """

    kind: str
    path: Path
    description: str

    @property
    def is_sample(self) -> bool:
        return self.kind == "sample"


_SAMPLE_BANNER = """\
!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!
!!! WARNING: USING THE SYNTHETIC DEMO DATA in {path}
!!! The course data was not found ({looked}) and could not be downloaded:
!!!   {reason}
!!! The demo set is a few hundred template sentences we wrote ourselves: the job runs end to end,
!!! but its metrics mean nothing. Pass --data-dir, set MINBERT_DATA, or put the course files in
!!! ./data/cs224n for real results.
!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"""


def resolve_data_dir(data_dir: str | os.PathLike | None, required_files: Iterable[str], *,
                     env: Mapping[str, str] | None = None,
                     local_dir: str | os.PathLike = LOCAL_DATA_DIR,
                     sample_dir: str | os.PathLike = SAMPLE_DIR, download: bool = True,
                     fetch: Fetch = urllib_fetch, log: TextIO | None = None) -> DataSource:
    """Find a folder holding every file in `required_files`, trying the places in the module docstring.

    An explicit `data_dir` is authoritative: if it (or its `cs224n/` subfolder) lacks a file, that is
    a FileNotFoundError, not a quiet fall-back. The other places are tried in turn; the sample is
    the last resort and is announced with a banner on `log` (stderr by default).
    """
    required = list(required_files)
    env = os.environ if env is None else env
    log = sys.stderr if log is None else log

    def missing(folder: Path) -> list[str]:
        return [name for name in required if not (folder / name).is_file()]

    if data_dir is not None:
        given = Path(data_dir)
        for folder in (given, given / "cs224n"):  # accept the folder above cs224n/ too
            if not missing(folder):
                return DataSource("given", folder, f"course data from --data-dir {folder}")
        raise FileNotFoundError(f"--data-dir {given}: missing {', '.join(missing(given))} "
                                f"(looked in {given} and {given / 'cs224n'})")

    looked = []
    if env.get("MINBERT_DATA"):
        folder = Path(env["MINBERT_DATA"]) / "cs224n"
        if not missing(folder):
            return DataSource("env", folder, f"course data from $MINBERT_DATA/cs224n ({folder})")
        looked.append(f"$MINBERT_DATA/cs224n = {folder}")
    local = Path(local_dir)
    if not missing(local):
        return DataSource("local", local, f"course data from {local}")
    looked.append(str(local))

    reason = "downloading is switched off"
    if download:
        try:
            download_course_data(local, required, fetch=fetch, log=log)
            return DataSource("downloaded", local, f"course data downloaded from {COURSE_REPO} "
                              f"(commit {COURSE_COMMIT[:10]}, checksums verified) into {local}")
        except OSError as error:  # a DownloadError, or a folder we cannot write to
            reason = f"{type(error).__name__}: {error}"

    sample = Path(sample_dir)
    if missing(sample):
        raise FileNotFoundError(f"no data: {', '.join(missing(sample))} not in {', '.join(looked)}, "
                                f"nor in the sample set {sample}; the download failed ({reason})")
    print(_SAMPLE_BANNER.format(path=sample, looked="; ".join(looked), reason=reason), file=log)
    return DataSource("sample", sample, f"SYNTHETIC DEMO DATA from {sample} (metrics mean nothing; "
                      f"the course data was not found and the download failed: {reason})")
