"""The small classification sets of tasks.classify: each one's classes, metric and reader.

GLUE CoLA, MRPC, RTE, WNLI and SST-2 (glue.py), TREC coarse and fine (a fixed stratified dev split of the
train file, glue.py's trec_split), the course's CFIMDB reviews (course.py) and 20 Newsgroups as flat
classes (hierarchy.py's reader and split). Labels become class indices; the keywords per class are the
default start of --label-init keywords (minbert/label_attention.py).

Read next: ../classify.py (the job that trains on them).
"""


from __future__ import annotations

import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from tasks.data.course import read_split
from tasks.data.examples import SentenceExample
from tasks.data.glue import read_glue, read_trec, trec_split
from tasks.data.hierarchy import label_statistics, read_dataset

PAIR_TASKS = ("mrpc", "rte", "wnli")  # encoded [CLS] A [SEP] B [SEP]
TREC_FILE = "trec/train_5500.label"
TREC_DEV_FRACTION = 0.1


@dataclass(frozen=True)
class ClassifyTaskSpec:
    labels: tuple[str, ...]  # class names, index = class id
    metric: str  # "accuracy", "matthews" or "accuracy+f1"
    keywords: tuple[tuple[str, ...], ...]  # default --label-init keywords, one tuple per class


TREC_COARSE_KEYWORDS = {"ABBR": ("abbreviation",), "DESC": ("description", "why"), "ENTY": ("thing", "what"),
                        "HUM": ("person", "who"), "LOC": ("place", "where"), "NUM": ("number", "when")}


SPECS: dict[str, ClassifyTaskSpec] = {
    "cola": ClassifyTaskSpec(("unacceptable", "acceptable"), "matthews",
                             (("wrong", "ungrammatical"), ("correct", "grammatical"))),
    "mrpc": ClassifyTaskSpec(("not_paraphrase", "paraphrase"), "accuracy+f1",
                             (("different",), ("same", "equivalent"))),
    "rte": ClassifyTaskSpec(("entailment", "not_entailment"), "accuracy",
                            (("entails", "follows"), ("contradicts", "unrelated"))),
    "wnli": ClassifyTaskSpec(("not_entailment", "entailment"), "accuracy",
                             (("false", "wrong"), ("true", "follows"))),
    "sst2": ClassifyTaskSpec(("negative", "positive"), "accuracy", (("bad", "terrible"), ("good", "great"))),
    "trec-coarse": ClassifyTaskSpec(tuple(sorted(TREC_COARSE_KEYWORDS)), "accuracy",
                                    tuple(TREC_COARSE_KEYWORDS[c] for c in sorted(TREC_COARSE_KEYWORDS))),
    # The 50 fine classes (and their keywords: the coarse ones plus the fine name) come from the file.
    "trec-fine": ClassifyTaskSpec((), "accuracy", ()),
    # Long texts (the course's IMDb subset; Usenet posts): where --truncation and --chunks matter.
    "cfimdb": ClassifyTaskSpec(("negative", "positive"), "accuracy",
                               (("bad", "boring"), ("great", "wonderful"))),
    # The 20 groups (and keywords: the parts of their names) come from the archive.
    "20newsgroups": ClassifyTaskSpec((), "accuracy", ()),
}


def read_task_data(root: Path, task: str, strict: bool) -> tuple[ClassifyTaskSpec, dict[str, list]]:
    """The task's spec and its train and dev examples (labels as class indices), reports printed.

    A missing or unreadable file raises DataFileError / FileNotFoundError naming it (the job's user_errors
    turns that into one line).
    """
    if task.startswith("trec"):
        return _read_trec_task(root, task, strict)
    if task == "cfimdb":
        return SPECS[task], {split: _report(read_split(root / "cs224n", "cfimdb", split, strict=strict))
                             for split in ("train", "dev")}
    if task == "20newsgroups":
        return _read_newsgroups_task(root)
    return SPECS[task], {split: _report(read_glue(root / "glue", task, split, strict=strict))
                         for split in ("train", "dev")}


def _report(result) -> list:
    print(result.report(), file=sys.stderr)
    return list(result.examples)


def _read_newsgroups_task(root: Path) -> tuple[ClassifyTaskSpec, dict[str, list]]:
    """The 20 groups as flat classes, with the train/dev split of tasks.data.hierarchy (90/10 of
    bydate-train)."""
    data = read_dataset(root, "20newsgroups")
    groups = tuple(sorted({max(d.labels, key=len) for d in data.splits["train"]}))
    spec = ClassifyTaskSpec(groups, "accuracy", tuple(tuple(g.split(".")) for g in groups))

    def convert(documents):
        return [SentenceExample(d.id, d.text, groups.index(max(d.labels, key=len))) for d in documents]

    print(label_statistics(data), file=sys.stderr)
    return spec, {"train": convert(data.splits["train"]), "dev": convert(data.splits["dev"])}


def _read_trec_task(root: Path, task: str, strict: bool) -> tuple[ClassifyTaskSpec, dict[str, list]]:
    examples, skipped = read_trec(root / TREC_FILE, strict=strict)
    print(f"read {len(examples)} questions from {root / TREC_FILE}" +
          "".join(f"\n  skipped {row}" for row in skipped), file=sys.stderr)
    train_part, dev_part = trec_split(examples, TREC_DEV_FRACTION, seed=0)
    print(f"TREC has no dev file: a fixed stratified split gives {len(train_part)} train / "
          f"{len(dev_part)} dev", file=sys.stderr)
    spec = SPECS[task]
    if task == "trec-fine":
        labels = tuple(sorted({e.fine for e in examples}))
        keywords = tuple(TREC_COARSE_KEYWORDS[label.split(":")[0]] + (label.split(":")[1],)
                         for label in labels)
        spec = ClassifyTaskSpec(labels, spec.metric, keywords)

    def convert(part):
        return [SentenceExample(e.id, e.sentence,
                                spec.labels.index(e.fine if task == "trec-fine" else e.coarse))
                for e in part]

    return spec, {"train": convert(train_part), "dev": convert(dev_part)}


def subsample(examples: Sequence, fraction: float, seed: int) -> list:
    """A stratified random `fraction` of the examples (at least one per class), in their original order.

    For low-resource curves: the subset depends on the seed, so several seeds also vary the sample.
    """
    if fraction >= 1.0:
        return list(examples)
    by_label: dict[int, list[int]] = {}
    for index, example in enumerate(examples):
        by_label.setdefault(example.label, []).append(index)
    rng = random.Random(f"subsample-{seed}")
    chosen: list[int] = []
    for label in sorted(by_label):
        indices = by_label[label]
        chosen.extend(rng.sample(indices, max(1, int(fraction * len(indices) + 0.5))))  # half rounds up
    return [examples[i] for i in sorted(chosen)]
