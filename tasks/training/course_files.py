"""The course starter's file flags, for the jobs that read the CS224N course's files.

The course's own `multitask_classifier.py` names every input and output file on the command line
(`--sst_train data/ids-sst-train.csv ... --sts_test_out predictions/sts-test-output.csv`). A job that adds
these flags keeps a student's commands working: each flag replaces the one file that `--data-dir` (for
inputs) or the run folder (for predictions) would give, and the flags left out keep their defaults.
Also here: reading the settings a finished run saved beside its best weights, for predicting later.

Read next: ../multitask.py (which uses all of this).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

from minbert.atomic import readable_directory
from tasks.data.course import task_files
from tasks.data.sources import DataSource, resolve_data_dir
from tasks.training.arguments import existing_file, output_file
from tasks.training.job import HEADS_SETTINGS, read_course_file, read_splits

COURSE_TASKS = {"sst": "sst", "para": "quora", "sts": "sts"}  # output prefix -> dataset
SPLITS = ("train", "dev", "test")
OUTPUT_SPLITS = ("dev", "test")


def add_course_file_arguments(parser: argparse.ArgumentParser) -> None:
    """The course starter's file flags (--sst_train ... --sts_test_out), each replacing one default path."""
    g = parser.add_argument_group("the course's files (each replaces the file --data-dir or --out gives)")
    for prefix, dataset in COURSE_TASKS.items():
        for split in SPLITS:
            g.add_argument(f"--{prefix}_{split}", f"--{prefix}-{split}", dest=f"{prefix}_{split}",
                           type=existing_file, default=None, metavar="FILE",
                           help=f"instead of <data-dir>/{task_files([dataset], [split])[0]}")
    for prefix in COURSE_TASKS:
        for split in OUTPUT_SPLITS:
            g.add_argument(f"--{prefix}_{split}_out", f"--{prefix}-{split}-out", dest=f"{prefix}_{split}_out",
                           type=output_file, default=None, metavar="FILE",
                           help=f"where the {split} predictions go, instead of "
                                f"<out>/predictions/{prefix}-{split}-output.csv")


def course_files(args, splits: Sequence[str]) -> dict[str, dict[str, str | None]]:
    """prefix -> split -> the file a --{prefix}_{split} flag names (None: the data folder's)."""
    return {prefix: {split: getattr(args, f"{prefix}_{split}") for split in splits}
            for prefix in COURSE_TASKS}


def find_data(args, files: dict[str, dict[str, str | None]], needed: Sequence[str]) -> DataSource:
    """The data folder holding every `needed` split's file that no flag replaces."""
    required = [task_files([COURSE_TASKS[prefix]], [split])[0] for prefix in COURSE_TASKS for split in needed
                if not files[prefix][split]]
    source = resolve_data_dir(args.data_dir, required)
    print(f"data: {source.description}", file=sys.stderr)
    return source


def output_path(args, prefix: str, split: str, folder: Path) -> Path:
    return Path(getattr(args, f"{prefix}_{split}_out") or folder / f"{prefix}-{split}-output.csv")


def read_prediction_inputs(args) -> dict[str, dict[str, list | None]]:
    """prefix -> split ("dev", "test") -> examples to predict: exactly the files the flags name, or, when
    none is named, the data folder's dev files and whichever test files it has."""
    files = course_files(args, OUTPUT_SPLITS)
    if any(path for by_split in files.values() for path in by_split.values()):
        return {prefix: {split: read_course_file(COURSE_TASKS[prefix], path, split, args.strict, args.limit)
                                if path else None
                         for split, path in files[prefix].items()} for prefix in COURSE_TASKS}
    source = find_data(args, files, ("dev",))
    return {prefix: read_splits(source, dataset, args.strict, args.limit, OUTPUT_SPLITS)
            for prefix, dataset in COURSE_TASKS.items()}


def read_run_settings(run_dir: str, job: str, keys: Sequence[str]) -> tuple[Path, dict]:
    """A finished run's folder (or its best/ folder) -> (best/, the settings `job` saved with its heads).

    The settings must name `job` and hold every one of `keys`; anything else is a one-line error."""
    best = readable_directory(Path(run_dir) / "best")  # best/, even if a crash interrupted its swap
    best = best if best.is_dir() else Path(run_dir)
    path = best / HEADS_SETTINGS
    if not path.is_file():
        raise SystemExit(f"error: --predict {run_dir}: no {path} (expected a tasks.{job} run folder that "
                         "finished at least one epoch, or its best/ folder)")
    try:
        settings = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise SystemExit(f"error: {path}: not valid JSON ({error})") from None
    writer = settings.get("job") if isinstance(settings, dict) else None
    if writer != job:
        who = f"tasks.{writer}" if writer else f"something other than tasks.{job}"
        raise SystemExit(f"error: --predict {run_dir}: {path} was written by {who}, whose heads "
                         f"tasks.{job} cannot rebuild")
    missing = [key for key in keys if key not in settings]
    if missing:
        raise SystemExit(f"error: {path}: missing {', '.join(missing)}; was it written by an older version?")
    return best, settings
