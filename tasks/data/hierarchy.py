"""Label hierarchies and the documents labelled with them: HWV, 20 Newsgroups, Enron, TREC.

**A label's level is the length of its shortest path from the root** (top-level labels are on level 1), so
a label with several parents is predicted as early as any of its parents allows. Every document's label
set is augmented with every ancestor of its labels (`Hierarchy.augment`).

The datasets (read from $MINBERT_DATA; see each SOURCE.txt under ../shared/data):

- hwv: Hierarchical WikiVitals (depth up to 6). Only val and test files exist, so their 3,605 documents
  are pooled and split 70 / 10 / 20 by a fixed seed.
- 20newsgroups: the bydate posts; the hierarchy is the group names' dot prefixes (up to 5 levels);
  bydate-train is split 90 / 10 into train / dev. Headers (they name the group) and quoted replies dropped.
- enron: UC Berkeley's annotated Enron emails, 2 levels (4 facets, 53 categories); headers dropped but the
  subject; 70 / 10 / 20 by a fixed seed.
- trec: questions, coarse (6) -> fine (50); split 80 / 10 / 10, stratified by fine label.

Read next: ../models/structured.py.
"""

from __future__ import annotations

import random
import re
import tarfile
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from minbert.loading.files import loads
from tasks.data.examples import DataFileError, decode_data_file
from tasks.data.glue import read_trec, trec_split
from tasks.data.inputs import record_file

DATASETS = ("hwv", "20newsgroups", "enron", "trec")
SPLITS = ("train", "dev", "test")
NEWSGROUPS_ARCHIVE = "20newsgroups/20news-bydate.tar.gz"
NEWSGROUPS_SPLITS = {"train": "20news-bydate-train", "test": "20news-bydate-test"}
# A header line, also indented or quoted ("   Newsgroups: sci.med", "BR> From: ...").
HEADER_LINE = re.compile(r"^[\s~>|*-]*(?:[A-Za-z]{1,4}>\s*)?"
                         r"(From|Newsgroups|Subject|Organization|Message-I[Dd]|Date|Path|Lines|"
                         r"Sender|Reply-To|References|Distribution|Keywords|Summary|Article-I\.D\.|"
                         r"NNTP-Posting-Host|Followup-To|Expires|Approved|Xref|X-[A-Za-z-]+):")


@dataclass(frozen=True)
class LabelledDocument:
    id: str
    text: str
    labels: frozenset[str]  # ancestors included (see Hierarchy.augment)


class Hierarchy:
    """Labels, their parents, and the level of each (shortest path from the root; top level = 1)."""

    def __init__(self, parents: dict[str, Iterable[str]]) -> None:
        """parents: label -> its parent labels (empty for a top-level label)."""
        self.parents = {label: frozenset(ps) for label, ps in parents.items()}
        if not self.parents:
            raise ValueError("a hierarchy needs at least one label")
        unknown = {p for ps in self.parents.values() for p in ps} - set(self.parents)
        if unknown:
            raise ValueError(f"parent label(s) {sorted(unknown)[:5]} are not labels of the hierarchy")
        self.level = self._levels()
        self.num_levels = max(self.level.values())
        # Labels per level, sorted: the column order of each level's classifier.
        self.levels = [sorted(label for label, lv in self.level.items() if lv == n)
                       for n in range(1, self.num_levels + 1)]

    def _levels(self) -> dict[str, int]:
        children: dict[str, list[str]] = {label: [] for label in self.parents}
        for label, ps in self.parents.items():
            for p in ps:
                children[p].append(label)
        level = {label: 1 for label, ps in self.parents.items() if not ps}
        queue = deque(sorted(level))
        while queue:  # breadth first: the first time a label is reached is along a shortest path
            label = queue.popleft()
            for child in sorted(children[label]):
                if child not in level:
                    level[child] = level[label] + 1
                    queue.append(child)
        unreachable = set(self.parents) - set(level)
        if unreachable:
            raise ValueError(f"label(s) {sorted(unreachable)[:5]} are on a cycle with no top-level ancestor")
        return level

    def ancestors(self, label: str) -> set[str]:
        """Every label above `label` (parents, their parents, ...)."""
        found, stack = set(), list(self.parents[label])
        while stack:
            parent = stack.pop()
            if parent not in found:
                found.add(parent)
                stack.extend(self.parents[parent])
        return found

    def augment(self, labels: Iterable[str]) -> frozenset[str]:
        """The labels plus all their ancestors."""
        labels = set(labels)
        unknown = labels - set(self.parents)
        if unknown:
            raise ValueError(f"label(s) {sorted(unknown)[:5]} are not in the hierarchy")
        return frozenset(labels.union(*(self.ancestors(label) for label in labels)))

    def by_level(self, labels: Iterable[str]) -> list[set[str]]:
        """The labels split by level: index n - 1 holds level n's."""
        split: list[set[str]] = [set() for _ in range(self.num_levels)]
        for label in labels:
            split[self.level[label] - 1].add(label)
        return split

    @classmethod
    def from_paths(cls, paths: Iterable[Sequence[str]]) -> "Hierarchy":
        """From label paths, top level first: each label's parent is the one before it."""
        parents: dict[str, set[str]] = {}
        for path in paths:
            for depth, label in enumerate(path):
                parents.setdefault(label, set())
                if depth:
                    parents[label].add(path[depth - 1])
        return cls(parents)


@dataclass
class HierarchicalData:
    hierarchy: Hierarchy
    splits: dict[str, list[LabelledDocument]]  # train, dev, test
    description: str


def read_dataset(root: str | Path, name: str) -> HierarchicalData:
    """One of DATASETS from the shared data folder `root`; file problems raise DataFileError."""
    readers = {"hwv": read_hwv, "20newsgroups": read_newsgroups_hierarchy, "enron": read_enron,
               "trec": read_trec_hierarchy}
    if name not in readers:
        raise ValueError(f"unknown dataset {name!r}; choose from {DATASETS}")
    return readers[name](Path(root))


def seeded_split(documents: Sequence[LabelledDocument], fractions: Sequence[float],
                 name: str) -> list[list[LabelledDocument]]:
    """Cut documents (sorted by id, then shuffled with a fixed seed) into parts of the given fractions."""
    order = sorted(documents, key=lambda d: d.id)
    random.Random(f"{name}-split").shuffle(order)
    parts, start = [], 0
    for i, fraction in enumerate(fractions):
        end = len(order) if i == len(fractions) - 1 else start + round(fraction * len(order))
        parts.append(order[start:end])
        start = end
    return parts


# ----- HWV -----------------------------------------------------------------------------------------


def read_hwv(root: Path) -> HierarchicalData:
    folder = root / "hwv"
    taxonomy = folder / "hwv.taxonomy"
    parents: dict[str, set[str]] = {}
    for line_number, line in enumerate(decode_data_file(taxonomy).splitlines(), start=1):
        fields = line.split("\t")
        if len(fields) < 2:
            raise DataFileError(f"{taxonomy}:{line_number}: expected 'parent<TAB>child...', "
                                f"got {line[:40]!r}")
        parent, children = fields[0], fields[1:]
        parents.setdefault(parent, set())
        for child in children:
            parents.setdefault(child, set())
            if parent != "Root":
                parents[child].add(parent)
    parents.pop("Root", None)
    try:
        hierarchy = Hierarchy(parents)
    except ValueError as error:  # no labels, a cycle
        raise DataFileError(f"{taxonomy}: {error}") from None
    documents = []
    for file_name in ("hwv_val.json", "hwv_test.json"):
        path = folder / file_name
        for line_number, line in enumerate(decode_data_file(path).splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = loads(line, "the line", ValueError)  # at most MAX_JSON_DEPTH deep
                text, labels = " ".join(row["token"]), row["label"]
                if not labels or not isinstance(labels, list):
                    raise ValueError(f"expected a non-empty list of labels, got {labels!r}")
                augmented = hierarchy.augment(labels)
            except (KeyError, TypeError, ValueError) as error:
                problem = f"missing field {error}" if isinstance(error, KeyError) else str(error)
                raise DataFileError(f"{path}:{line_number}: {problem}") from None
            documents.append(LabelledDocument(f"{file_name.split('.')[0]}-{line_number}", text, augmented))
    return HierarchicalData(hierarchy, dict(zip(SPLITS, seeded_split(documents, (0.7, 0.1, 0.2), "hwv"))),
                            f"HWV: {len(documents)} documents from {folder} "
                            "(val + test pooled, split 70/10/20)")


# ----- 20 Newsgroups -------------------------------------------------------------------------------


def newsgroups_posts(archive: str | Path, split: str) -> list[tuple[str, str, str]]:
    """(file name, group, body) of each post of a bydate split, sorted by file name.

    The headers are dropped (they name the group), and so are quoted replies ("> ...") and their
    attribution lines ("... writes:"): someone else's text. Some bodies repeat a header block (a reposted
    message, 71 of 18,846 posts); its lines (From:, Newsgroups:, Subject:, ...) go too, since "Newsgroups:"
    would hand the label to a classifier.
    """
    archive = Path(archive)
    if not archive.is_file():
        raise FileNotFoundError(f"{archive}: the 20 Newsgroups archive is missing (set MINBERT_DATA to the "
                                "folder holding 20newsgroups/)")
    if split not in NEWSGROUPS_SPLITS:
        raise ValueError(f"20 Newsgroups has splits {sorted(NEWSGROUPS_SPLITS)}, not {split!r}")
    posts = []
    record_file(archive)  # the run folder's fingerprint of its inputs (inputs.py)
    with tarfile.open(archive, "r:gz") as tar:
        # In archive order: a gzip stream cannot seek back, so sorting the members first would
        # decompress the archive from the start for every post (minutes instead of seconds).
        for member in tar:
            if not member.isfile() or not member.name.startswith(NEWSGROUPS_SPLITS[split] + "/"):
                continue
            raw = tar.extractfile(member).read().decode("latin-1")  # Usenet predates UTF-8
            body = raw.split("\n\n", 1)[1] if "\n\n" in raw else ""
            lines = [line for line in body.splitlines() if not line.lstrip().startswith((">", "|"))
                     and not line.rstrip().endswith(("writes:", "wrote:")) and not HEADER_LINE.match(line)]
            posts.append((member.name, member.name.split("/")[1], "\n".join(lines)))
    return sorted(posts)


def read_newsgroups_hierarchy(root: Path) -> HierarchicalData:
    archive = root / NEWSGROUPS_ARCHIVE
    splits: dict[str, list[LabelledDocument]] = {}
    paths = set()
    for split in ("train", "test"):
        documents = []
        for name, group, body in newsgroups_posts(archive, split):
            text = " ".join(body.split())
            if not text:
                continue
            parts = group.split(".")
            path = tuple(".".join(parts[:n]) for n in range(1, len(parts) + 1))
            paths.add(path)
            documents.append(LabelledDocument(name, text, frozenset(path)))
        splits[split] = documents
    hierarchy = Hierarchy.from_paths(sorted(paths))
    train, dev = seeded_split(splits["train"], (0.9, 0.1), "20newsgroups")
    return HierarchicalData(hierarchy, {"train": train, "dev": dev, "test": splits["test"]},
                            f"20 Newsgroups: bydate train split 90/10 into train/dev, bydate test "
                            f"({archive})")


# ----- Enron ---------------------------------------------------------------------------------------


def read_enron(root: Path) -> HierarchicalData:
    archive = root / "enron" / "enron_with_categories.tar.gz"
    if not archive.is_file():
        raise DataFileError(f"{archive}: the Enron archive is missing")
    texts: dict[str, str] = {}
    categories: dict[str, set[str]] = {}
    record_file(archive)  # the run folder's fingerprint of its inputs (inputs.py)
    with tarfile.open(archive, "r:gz") as tar:
        for member in tar:
            if (not member.isfile() or not member.name.endswith((".txt", ".cats"))
                    or member.name.endswith("categories.txt")):
                continue
            stem, kind = member.name.rsplit(".", 1)
            content = tar.extractfile(member).read().decode("latin-1")
            if kind == "txt":
                texts[stem] = enron_text(content)
                continue
            labels = set()
            for line_number, line in enumerate(content.splitlines(), start=1):
                if not line.strip():
                    continue
                fields = line.split(",")
                if len(fields) != 3 or not all(f.strip().isdigit() for f in fields):
                    raise DataFileError(f"{archive}:{member.name}:{line_number}: expected 'top,sub,count', "
                                        f"got {line!r}")
                labels.add(f"{fields[0].strip()}.{fields[1].strip()}")
            categories[stem] = labels
    missing = sorted(set(texts) ^ set(categories))
    if missing:
        raise DataFileError(f"{archive}: {len(missing)} email(s) without both .txt and .cats, "
                            f"e.g. {missing[0]}")
    hierarchy = Hierarchy.from_paths(sorted({(label.split(".")[0], label) for labels in categories.values()
                                             for label in labels}))
    documents = [LabelledDocument(stem.split("/", 1)[1], texts[stem], hierarchy.augment(categories[stem]))
                 for stem in sorted(texts)]
    return HierarchicalData(hierarchy, dict(zip(SPLITS, seeded_split(documents, (0.7, 0.1, 0.2), "enron"))),
                            f"Enron: {len(documents)} emails from {archive} (split 70/10/20)")


def enron_text(raw: str) -> str:
    """An email without its headers, except the subject, which is part of what the writer wrote."""
    head, _, body = raw.partition("\n\n")
    subject = next((line[len("Subject:"):].strip() for line in head.splitlines()
                    if line.startswith("Subject:")), "")
    return " ".join(f"{subject}\n{body}".split())


# ----- TREC ----------------------------------------------------------------------------------------


def read_trec_hierarchy(root: Path) -> HierarchicalData:
    path = root / "trec" / "train_5500.label"
    examples, _ = read_trec(path)
    rest, dev = trec_split(examples, 0.1, seed=0)
    train, test = trec_split(rest, 1 / 9, seed=1)  # 10% of the whole file
    hierarchy = Hierarchy.from_paths(sorted({(e.coarse, e.fine) for e in examples}))

    def convert(part):
        return [LabelledDocument(e.id, e.sentence, frozenset((e.coarse, e.fine))) for e in part]

    return HierarchicalData(hierarchy, {"train": convert(train), "dev": convert(dev), "test": convert(test)},
                            f"TREC: {len(examples)} questions from {path} "
                            "(split 80/10/10, stratified by fine label)")


def label_statistics(data: HierarchicalData) -> str:
    """Labels per level and gold labels per document, for the start of a run."""
    levels = " / ".join(str(len(level)) for level in data.hierarchy.levels)
    sizes = " / ".join(f"{name} {len(docs)}" for name, docs in data.splits.items())
    mean_labels = sum(len(d.labels) for d in data.splits["train"]) / max(1, len(data.splits["train"]))
    return (f"{data.description}\n  labels per level {levels}; documents {sizes}; "
            f"{mean_labels:.2f} labels per training document")

