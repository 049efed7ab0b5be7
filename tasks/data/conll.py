"""CoNLL files: one token per line with its tag ("token<TAB>tag"), sentences separated by blank lines.

The reader refuses, naming the file and line, what would silently corrupt training: a line without a tag,
a tag outside the tag set (`tags`: "B-persn"), and an I-x that does not continue an entity of type x
(IOB2 files never hold one; in a prediction file it is legal and scored by conlleval's convention, so
`check_iob2=False` accepts it). A line holding only whitespace is a sentence boundary: WNUT-17's training
file separates 2,394 of its 3,394 sentences with a single TAB (../shared/data/wnut17/SOURCE.txt).
`write_conll` writes "token<TAB>gold<TAB>predicted" (or without gold), which conlleval and seqeval read.

Read next: wordpieces.py.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from minbert.loading.atomic import atomic_write_text
from tasks.data.examples import DataFileError, decode_data_file

WNUT17_TYPES = ("corporation", "creative-work", "group", "location", "person", "product")


def bio_tags(types: Sequence[str]) -> tuple[str, ...]:
    """O, then B-x and I-x for each type: the tag set, index = class id."""
    return ("O", *(f"{prefix}-{t}" for t in types for prefix in ("B", "I")))


@dataclass(frozen=True)
class Sentence:
    tokens: tuple[str, ...]
    tags: tuple[str, ...] | None  # None when the file has no tag column
    line: int  # the line of its first token, for messages


def read_conll(path: str | os.PathLike, tags: Sequence[str] | None = None, tagged: bool = True,
               check_iob2: bool = True) -> list[Sentence]:
    """The sentences of a CoNLL file. tags: the allowed tag set (None: any). tagged=False reads tokens
    only (the first column), for files to predict."""
    path = Path(path)
    allowed = set(tags) if tags is not None else None
    sentences: list[Sentence] = []
    tokens: list[str] = []
    labels: list[str] = []
    first_line = 0
    text = decode_data_file(path)
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            if tokens:
                sentences.append(Sentence(tuple(tokens), tuple(labels) if tagged else None, first_line))
                tokens, labels = [], []
            continue
        fields = line.split("\t") if "\t" in line else line.split()
        if not tokens:
            first_line = number
        tokens.append(fields[0])
        if not tagged:
            continue
        if len(fields) < 2 or not fields[-1].strip():
            raise DataFileError(f"{path}:{number}: expected 'token<TAB>tag', got {line!r} (no tag)")
        tag = fields[-1].strip()
        if allowed is not None and tag not in allowed:
            raise DataFileError(f"{path}:{number}: unknown tag {tag!r}; the tag set is {sorted(allowed)}")
        if check_iob2 and tag.startswith("I-"):
            previous = labels[-1] if labels else "O"
            if previous == "O" or previous[2:] != tag[2:]:
                raise DataFileError(f"{path}:{number}: {tag} does not continue an entity of its type (the "
                                    f"previous tag is {previous if labels else 'the sentence start'}); IOB2 "
                                    "starts every entity with B-")
        labels.append(tag)
    if tokens:
        sentences.append(Sentence(tuple(tokens), tuple(labels) if tagged else None, first_line))
    if not sentences:
        raise DataFileError(f"{path}: no sentences")
    return sentences


def write_conll(path: str | os.PathLike, sentences: Sequence[Sentence],
                predicted: Sequence[Sequence[str]]) -> None:
    """token, gold (when the sentences have tags) and predicted tag per line; a blank line between
    sentences."""
    if len(sentences) != len(predicted):
        raise ValueError(f"{len(sentences)} sentences but {len(predicted)} predictions")
    blocks = []
    for sentence, tags in zip(sentences, predicted):
        if len(tags) != len(sentence.tokens):
            raise ValueError(f"the sentence at line {sentence.line} has {len(sentence.tokens)} tokens but "
                             f"{len(tags)} predicted tags")
        gold = sentence.tags or [None] * len(tags)
        blocks.append("".join(f"{token}\t{g}\t{p}\n" if g is not None else f"{token}\t{p}\n"
                              for token, g, p in zip(sentence.tokens, gold, tags)))
    atomic_write_text(Path(path), "\n".join(blocks))
