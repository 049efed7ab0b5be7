"""Which course files a main-job run reads and writes: the data folder's, or the ones named one by one.

The course's `multitask_classifier.py` names every file on the command line (`--sst_train
data/ids-sst-train.csv ... --sts_test_out predictions/sts-test-output.csv`). The main job keeps those
flags: each replaces the one file `--data-dir` (inputs) or the run folder (predictions) would give. `tasks`
is the job's table (rows with a `name`, the course's prefix and a `dataset`); `files` the flags' group of
the job's settings (tasks/training/job.py's CourseFiles), None where a flag is not given.

Read next: batching.py (examples to padded batches).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Protocol, Sequence

from tasks.data.inputs import not_recorded
from tasks.data.course import read_course_file, read_splits, task_files
from tasks.data.sources import DataSource, resolve_data_dir

SPLITS = ("train", "dev", "test")
OUTPUT_SPLITS = ("dev", "test")


class Row(Protocol):
    name: str  # the prefix of the flags and the output files: "sst", "para", "sts"
    dataset: str  # tasks/data/course.py's name of its files: "sst", "quora", "sts"


class NamedFiles(Protocol):
    def inputs(self, splits: Sequence[str]) -> dict[str, dict[str, str | None]]:
        """prefix -> split -> the file its --{prefix}_{split} flag names (None: the data folder's)."""

    def output(self, prefix: str, split: str) -> str | None:
        """The file --{prefix}_{split}_out names (None: the run folder's)."""


def find_data(tasks: Sequence[Row], data_dir: str | None, files: dict[str, dict[str, str | None]],
              needed: Sequence[str]) -> DataSource:
    """The data folder holding every `needed` split's file that no flag replaces."""
    required = [task_files([t.dataset], [split])[0] for t in tasks for split in needed
                if not files[t.name][split]]
    source = resolve_data_dir(data_dir, required)
    print(f"data: {source.description}", file=sys.stderr)
    return source


def output_path(files: NamedFiles, prefix: str, split: str, folder: Path) -> Path:
    """Where the predictions for `prefix`'s `split` go: its --{prefix}_{split}_out flag, or `folder`."""
    return Path(files.output(prefix, split) or folder / f"{prefix}-{split}-output.csv")


def read_prediction_inputs(tasks: Sequence[Row], files: NamedFiles, data_dir: str | None, strict: bool,
                           limit: int) -> dict[str, dict[str, list | None]]:
    """prefix -> split ("dev", "test") -> examples to predict: exactly the files the flags name, or, when
    none is named, the data folder's dev files and whichever test files it has."""
    with not_recorded():  # --predict trains nothing: no run folder records these
        return _read_prediction_inputs(tasks, files.inputs(OUTPUT_SPLITS), data_dir, strict, limit)


def _read_prediction_inputs(tasks: Sequence[Row], files: dict, data_dir: str | None, strict: bool,
                            limit: int) -> dict[str, dict[str, list | None]]:
    if any(path for by_split in files.values() for path in by_split.values()):
        return {t.name: {split: read_course_file(t.dataset, path, split, strict, limit) if path else None
                         for split, path in files[t.name].items()} for t in tasks}
    source = find_data(tasks, data_dir, files, ("dev",))
    return {t.name: read_splits(source, t.dataset, strict, limit, OUTPUT_SPLITS) for t in tasks}
