"""Entity-level evaluation for named-entity recognition, with the conventions of CoNLL's conlleval script.

NER is scored on whole entities, not tags: an entity counts as correct only if its type, first word and
last word all match a gold entity, so a wrong boundary is both a false positive and a false negative.
Token accuracy, dominated by the many "O" words, can look excellent while entity F1 is poor (tests show
accuracy 0.925 with F1 0.25).

The conventions of `conlleval` (CoNLL-2000/2003; Tjong Kim Sang & De Meulder 2003):

- Tags are IOB2: "O", "B-type", "I-type"; the type is what follows the first "-" ("B-creative-work" has
  type "creative-work"); "B" and "I" alone are untyped entities of type "".
- Invalid sequences are repaired, not dropped: an "I-x" that does not continue an entity of type x starts
  a new one; two adjacent "B-x" are two entities. (seqeval's default mode does the same; its strict IOB2
  mode discards such entities, and scores differ.)
- Scores are micro-averaged over the corpus' entities (precision = correct / predicted, recall = correct /
  gold, each 0.0 where its denominator is 0); per-type scores likewise; conlleval's "accuracy" is token
  accuracy over every word (`token_accuracy`).

Spans given directly are a set per sentence, so a duplicate predicted span cannot earn credit twice. A span
is (type, start, end) over words start .. end-1 (a one-word entity at word 3 is (type, 3, 4)).

Read next: ../../minbert/metrics.py (the sentence-level scores of the classification tasks).
"""

from __future__ import annotations

from collections import Counter
from typing import Sequence

Span = tuple[str, int, int]  # (type, start, end): words start..end-1

MISSED, SPURIOUS = "MISSED", "SPURIOUS"  # the extra column and row of type_confusion


def _split_tag(tag: str, position: int) -> tuple[str, str]:
    """("B" | "I" | "O", type) of one IOB2 tag; the type is everything after the first "-"."""
    prefix, _, type_ = tag.partition("-")
    if prefix not in ("B", "I", "O") or (prefix == "O" and tag != "O"):
        raise ValueError(f"tag {tag!r} at position {position} is not IOB2 (expected O, B-type or I-type)")
    return prefix, type_


def bio_entities(tags: Sequence[str]) -> list[Span]:
    """IOB2 tags of one sentence -> its entity spans, in order; invalid I- tags repaired as conlleval does."""
    spans: list[Span] = []
    current: tuple[str, int] | None = None  # (type, start) of the entity still open
    for i, tag in enumerate(tags):
        prefix, type_ = _split_tag(tag, i)
        # conlleval: only an I- of the open entity's own type extends it; anything else closes it
        continues = current is not None and prefix == "I" and type_ == current[0]
        if current is not None and not continues:
            spans.append((current[0], current[1], i))
            current = None
        if prefix != "O" and not continues:
            current = (type_, i)  # a B-x, or an I-x that continues nothing: a new entity either way
    if current is not None:
        spans.append((current[0], current[1], len(tags)))
    return spans


def spans_to_bio(spans: Sequence[Span], length: int) -> list[str]:
    """Non-overlapping spans of one sentence of `length` words -> IOB2 tags (the inverse of bio_entities)."""
    tags = ["O"] * length
    previous: Span | None = None
    for span in sorted(spans, key=lambda s: (s[1], s[2])):
        type_, start, end = span
        if not 0 <= start < end <= length:
            raise ValueError(f"span {span!r} does not fit a sentence of {length} words "
                             "(need 0 <= start < end <= length)")
        if previous is not None and start < previous[2]:
            raise ValueError(f"spans {previous!r} and {span!r} overlap; IOB2 tags cannot encode both")
        # untyped entities are written "B"/"I", as conlleval reads them, so the round trip is exact
        suffix = f"-{type_}" if type_ else ""
        tags[start] = "B" + suffix
        tags[start + 1:end] = ["I" + suffix] * (end - start - 1)
        previous = span
    return tags


def _prf(correct: int, gold: int, predicted: int) -> dict:
    precision = correct / predicted if predicted else 0.0
    recall = correct / gold if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1,
            "gold": gold, "predicted": predicted, "correct": correct}


def _check_sentences(gold: Sequence, predicted: Sequence) -> None:
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold sentences but {len(predicted)} predicted sentences")


def score_spans(gold: Sequence[Sequence[Span]], predicted: Sequence[Sequence[Span]]) -> dict:
    """Exact-match precision, recall and F1 of predicted entity spans, one list of spans per sentence.

    Returns {"micro": scores, "per_type": {type: scores}}, scores being a dict with precision, recall,
    f1 (floats) and gold, predicted, correct (counts). per_type covers every type seen on either side,
    sorted by name. Spans are a set per sentence: a repeated span counts once.
    """
    _check_sentences(gold, predicted)
    gold_counts, predicted_counts, correct_counts = Counter(), Counter(), Counter()
    for gold_spans, predicted_spans in zip(gold, predicted):
        g, p = set(map(tuple, gold_spans)), set(map(tuple, predicted_spans))
        gold_counts.update(span[0] for span in g)
        predicted_counts.update(span[0] for span in p)
        correct_counts.update(span[0] for span in g & p)  # same type, start and end
    types = sorted(set(gold_counts) | set(predicted_counts))
    return {
        "micro": _prf(sum(correct_counts.values()), sum(gold_counts.values()),
                      sum(predicted_counts.values())),
        "per_type": {t: _prf(correct_counts[t], gold_counts[t], predicted_counts[t]) for t in types},
    }


def _check_tag_lengths(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> None:
    _check_sentences(gold, predicted)
    for i, (g, p) in enumerate(zip(gold, predicted)):
        if len(g) != len(p):
            raise ValueError(f"sentence {i} has {len(g)} gold tags but {len(p)} predicted tags")


def score_bio(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> dict:
    """score_spans on the entities of IOB2 tag sequences (one per sentence); conlleval's numbers."""
    _check_tag_lengths(gold, predicted)
    return score_spans([bio_entities(g) for g in gold], [bio_entities(p) for p in predicted])


def token_accuracy(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> float:
    """Fraction of words whose predicted tag equals the gold tag, over all sentences ("O" words included)."""
    _check_tag_lengths(gold, predicted)
    total = sum(len(g) for g in gold)
    if total == 0:
        raise ValueError("cannot score an empty set of tags")
    return sum(a == b for g, p in zip(gold, predicted) for a, b in zip(g, p)) / total


def type_confusion(gold: Sequence[Sequence[Span]],
                   predicted: Sequence[Sequence[Span]]) -> dict[tuple[str, str], int]:
    """Counts of (gold type, predicted type) for spans with the same boundaries; the diagonal is correct.

    A gold span with no prediction at its (start, end) counts as (gold type, "MISSED"); a prediction with
    no gold span at its (start, end) as ("SPURIOUS", predicted type). A row sums to that type's gold
    count, a column to its predicted count. Spans are a set per sentence, as in score_spans. Should one
    boundary carry several types (never from tags), equal types pair first, then the rest in sorted order.
    """
    _check_sentences(gold, predicted)
    counts: Counter = Counter()
    for gold_spans, predicted_spans in zip(gold, predicted):
        by_boundary: dict[tuple[int, int], tuple[set, set]] = {}
        for side, spans in ((0, gold_spans), (1, predicted_spans)):
            for type_, start, end in set(map(tuple, spans)):
                by_boundary.setdefault((start, end), (set(), set()))[side].add(type_)
        for g, p in by_boundary.values():
            for t in g & p:
                counts[t, t] += 1
            g_rest, p_rest = sorted(g - p), sorted(p - g)
            for a, b in zip(g_rest, p_rest):
                counts[a, b] += 1
            for a in g_rest[len(p_rest):]:
                counts[a, MISSED] += 1
            for b in p_rest[len(g_rest):]:
                counts[SPURIOUS, b] += 1
    return dict(counts)


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    # first column left-aligned (names), the rest right-aligned (numbers)
    widths = [max(len(row[c]) for row in [header] + rows) for c in range(len(header))]

    def line(row: list[str]) -> str:
        cells = zip(row, widths)
        return "  ".join(cell.ljust(w) if c == 0 else cell.rjust(w) for c, (cell, w) in enumerate(cells))

    return [line(row).rstrip() for row in [header] + rows]


def format_report(scores: dict, confusion: dict | None = None) -> str:
    """A text table of score_spans/score_bio output: per type, then micro; then the confusion table if given.

    Precision, recall and F1 are printed as percentages with two decimals, as conlleval prints them;
    support is the number of gold entities.
    """
    def row(name: str, s: dict) -> list[str]:
        return [name, f"{100 * s['precision']:.2f}", f"{100 * s['recall']:.2f}", f"{100 * s['f1']:.2f}",
                str(s["gold"]), str(s["predicted"]), str(s["correct"])]

    header = ["type", "precision", "recall", "f1", "support", "predicted", "correct"]
    rows = [row(t, s) for t, s in scores["per_type"].items()] + [row("micro", scores["micro"])]
    lines = _table(header, rows)
    if confusion:
        gold_types = sorted({g for g, _ in confusion} - {SPURIOUS}) + [SPURIOUS]
        predicted_types = sorted({p for _, p in confusion} - {MISSED}) + [MISSED]
        cells = [[g] + [str(confusion.get((g, p), 0)) for p in predicted_types] for g in gold_types]
        lines += ["", "confusion (rows: gold type, columns: predicted type, same boundaries)"]
        lines += _table(["gold \\ predicted"] + predicted_types, cells)
    return "\n".join(lines)
