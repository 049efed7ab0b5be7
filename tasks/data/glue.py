"""Readers for the small classification sets: GLUE CoLA, MRPC, RTE, WNLI, SST-2, and TREC.

Each returns a `ReadResult`, malformed rows reported by file and line (fatal with strict=True), like the
course readers. The shared files' quirks (../shared/data/glue/*/SOURCE.txt):

- GLUE TSVs are read with csv.QUOTE_NONE: some rows start with a double quote (RTE train index 2164) and a
  CSV reader would swallow the tab after it; MRPC's train and dev files start with a byte-order mark;
- CoLA is the public v1.1 release (no header); dev is GLUE's v1.0 dev.tsv (in- and out-of-domain), so dev
  numbers compare with published GLUE-dev ones; RTE labels are words (entailment = 0, GLUE's order);
- TREC (train_5500.label, "COARSE:fine question") is latin-1 with one stray byte (0xF0 in
  "sister\\xf0city", line 3,696), kept. TREC has no dev split here: `trec_split` makes a deterministic one,
  stratified by fine label.

Read next: classify_sets.py (how tasks.classify uses these readers).
"""

from __future__ import annotations

import csv
import os
import random
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from tasks.data.examples import (DataFileError, PairExample, ReadResult, SentenceExample, SkippedRow,
                                 allow_long_fields, decode_data_file, skip_row)


@dataclass(frozen=True)
class GlueSpec:
    files: dict[str, str]  # split -> path under the task's folder
    header: tuple[str, ...] | None  # expected header, or None for none
    text_columns: tuple[int, ...]  # one column (sentence) or two (pair)
    label_column: int
    labels: tuple[str, ...]  # label text of class 0, 1, ...
    metric: str  # the task's GLUE metric


GLUE: dict[str, GlueSpec] = {
    "cola": GlueSpec({"train": "CoLA/cola_public/raw/in_domain_train.tsv",
                      "dev": "CoLA/glue_v1.0_dev_test/dev.tsv"},
                     None, (3,), 1, ("0", "1"), "matthews"),
    "mrpc": GlueSpec({"train": "MRPC/train.tsv", "dev": "MRPC/dev.tsv"},
                     ("Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"), (3, 4), 0, ("0", "1"),
                     "accuracy+f1"),
    "rte": GlueSpec({"train": "RTE/train.tsv", "dev": "RTE/dev.tsv"},
                    ("index", "sentence1", "sentence2", "label"),
                    (1, 2), 3, ("entailment", "not_entailment"), "accuracy"),
    "wnli": GlueSpec({"train": "WNLI/train.tsv", "dev": "WNLI/dev.tsv"},
                     ("index", "sentence1", "sentence2", "label"),
                     (1, 2), 3, ("0", "1"), "accuracy"),
    "sst2": GlueSpec({"train": "SST-2/train.tsv", "dev": "SST-2/dev.tsv"}, ("sentence", "label"), (0,), 1,
                     ("0", "1"), "accuracy"),
}


def read_glue(root: str | os.PathLike, task: str, split: str, strict: bool = False) -> ReadResult:
    """One split of a GLUE task from `root` (the folder holding CoLA/, MRPC/, ...)."""
    if task not in GLUE:
        raise ValueError(f"unknown GLUE task {task!r}; choose from {sorted(GLUE)}")
    spec = GLUE[task]
    if split not in spec.files:
        raise ValueError(f"{task} has splits {sorted(spec.files)} here, not {split!r}")
    path = Path(root) / spec.files[split]
    text = _read_text(path, "utf-8-sig")
    allow_long_fields(text)
    rows = list(csv.reader(text.splitlines(), delimiter="\t", quoting=csv.QUOTE_NONE))
    first = 1  # the line number of rows[0]
    if spec.header is not None:
        if not rows or tuple(rows[0]) != spec.header:
            raise DataFileError(f"{path}:1: expected the header {list(spec.header)}, "
                                f"got {rows[0] if rows else []}")
        first, rows = 2, rows[1:]
    width = max(spec.text_columns + (spec.label_column,)) + 1
    examples, skipped = [], []
    for line, fields in enumerate(rows, start=first):
        problem = None
        if len(fields) < width:
            problem = f"expected at least {width} tab-separated fields, got {len(fields)}"
        elif fields[spec.label_column] not in spec.labels:
            problem = f"label {fields[spec.label_column]!r} is not one of {list(spec.labels)}"
        elif not all(fields[c].strip() for c in spec.text_columns):
            problem = "empty text"
        if problem:
            skip_row(path, line, problem, strict, skipped)
            continue
        label = spec.labels.index(fields[spec.label_column])
        texts = [fields[c].strip() for c in spec.text_columns]
        example_id = f"{task}-{split}-{line}"
        examples.append(SentenceExample(example_id, texts[0], label) if len(texts) == 1
                        else PairExample(example_id, texts[0], texts[1], label))
    return _result(path, examples, skipped)


# ----- TREC -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrecExample:
    id: str
    sentence: str
    coarse: str  # one of 6 (ABBR, DESC, ENTY, HUM, LOC, NUM)
    fine: str  # one of 50, written "COARSE:fine"


def read_trec(path: str | os.PathLike, strict: bool = False) -> tuple[list[TrecExample], list[SkippedRow]]:
    """TREC's "COARSE:fine question" lines (latin-1)."""
    path = Path(path)
    text = _read_text(path, "latin-1")
    examples, skipped = [], []
    for line, row in enumerate(text.splitlines(), start=1):
        label, _, question = row.partition(" ")
        coarse, colon, fine = label.partition(":")
        problem = None
        if not colon or not coarse.isupper() or not fine:
            problem = f"expected 'COARSE:fine question', got {row[:40]!r}"
        elif not question.strip():
            problem = "empty question"
        if problem:
            skip_row(path, line, problem, strict, skipped)
            continue
        examples.append(TrecExample(f"trec-{line}", question.strip(), coarse, label))
    if not examples:
        raise DataFileError(f"{path}: no usable examples")
    return examples, skipped


def trec_split(examples: Sequence[TrecExample], dev_fraction: float = 0.1,
               seed: int = 0) -> tuple[list[TrecExample], list[TrecExample]]:
    """(train, dev): `dev_fraction` of each fine label's examples (at least one where a label has 2+)."""
    by_label: dict[str, list[TrecExample]] = defaultdict(list)
    for example in examples:
        by_label[example.fine].append(example)
    rng = random.Random(f"trec-split-{seed}")
    dev_ids = set()
    for label in sorted(by_label):
        group = sorted(by_label[label], key=lambda e: e.id)
        rng.shuffle(group)
        n_dev = max(1, round(dev_fraction * len(group))) if len(group) >= 2 else 0
        dev_ids.update(e.id for e in group[:n_dev])
    return [e for e in examples if e.id not in dev_ids], [e for e in examples if e.id in dev_ids]


# ----- shared --------------------------------------------------------------------------------------


def _read_text(path: Path, encoding: str) -> str:
    text = decode_data_file(path, encoding)
    if not text.strip():
        raise DataFileError(f"{path}: the file is empty")
    return text


def _result(path: Path, examples: list, skipped: list) -> ReadResult:
    if not examples:
        raise DataFileError(f"{path}: no usable examples ({len(skipped)} malformed row(s))")
    return ReadResult(path, tuple(examples), tuple(skipped))

