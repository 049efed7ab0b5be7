"""Which course files a main-job run reads and writes: the data folder's, or the ones named one by one.

The course's own `multitask_classifier.py` names every input and output file on the command line
(`--sst_train data/ids-sst-train.csv ... --sts_test_out predictions/sts-test-output.csv`). The main job
keeps those flags: each replaces the one file that `--data-dir` (for inputs) or the run folder (for
predictions) would give, and the flags left out keep their defaults. `settings` below is anything with an
attribute per flag (`sst_train`, ..., `sts_test_out`), None where the flag is not given.

Read next: batching.py (examples to padded batches).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Sequence

from tasks.data.course import read_course_file, read_splits, task_files
from tasks.data.sources import DataSource, resolve_data_dir

COURSE_TASKS = {"sst": "sst", "para": "quora", "sts": "sts"}  # output prefix -> dataset
SPLITS = ("train", "dev", "test")
OUTPUT_SPLITS = ("dev", "test")


def course_files(settings: Any, splits: Sequence[str]) -> dict[str, dict[str, str | None]]:
    """prefix -> split -> the file a --{prefix}_{split} flag names (None: the data folder's)."""
    return {prefix: {split: getattr(settings, f"{prefix}_{split}") for split in splits}
            for prefix in COURSE_TASKS}


def find_data(data_dir: str | None, files: dict[str, dict[str, str | None]],
              needed: Sequence[str]) -> DataSource:
    """The data folder holding every `needed` split's file that no flag replaces."""
    required = [task_files([COURSE_TASKS[prefix]], [split])[0] for prefix in COURSE_TASKS for split in needed
                if not files[prefix][split]]
    source = resolve_data_dir(data_dir, required)
    print(f"data: {source.description}", file=sys.stderr)
    return source


def output_path(settings: Any, prefix: str, split: str, folder: Path) -> Path:
    """Where the predictions for `prefix`'s `split` go: its --{prefix}_{split}_out flag, or `folder`."""
    return Path(getattr(settings, f"{prefix}_{split}_out") or folder / f"{prefix}-{split}-output.csv")


def read_prediction_inputs(settings: Any, data_dir: str | None, strict: bool,
                           limit: int) -> dict[str, dict[str, list | None]]:
    """prefix -> split ("dev", "test") -> examples to predict: exactly the files the flags name, or, when
    none is named, the data folder's dev files and whichever test files it has."""
    files = course_files(settings, OUTPUT_SPLITS)
    if any(path for by_split in files.values() for path in by_split.values()):
        return {prefix: {split: read_course_file(COURSE_TASKS[prefix], path, split, strict, limit)
                                if path else None
                         for split, path in files[prefix].items()} for prefix in COURSE_TASKS}
    source = find_data(data_dir, files, ("dev",))
    return {prefix: read_splits(source, dataset, strict, limit, OUTPUT_SPLITS)
            for prefix, dataset in COURSE_TASKS.items()}
