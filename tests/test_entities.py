"""Entity-level NER scores (tasks/evaluation/entities.py): conlleval's chunking of IOB2 tags, worked examples
by hand, and parity with a port of conlleval's chunk rules (and with seqeval when it is installed)."""

from __future__ import annotations

import random

import pytest

from tasks.evaluation.entities import (bio_entities, format_report, score_bio, score_spans, spans_to_bio,
                                       token_accuracy, type_confusion)

# ----- tags -> spans ---------------------------------------------------------------------------------


def test_bio_entities_on_valid_iob2():
    # Alice works at Acme Corp in New York City
    tags = ["B-per", "O", "O", "B-org", "I-org", "O", "B-loc", "I-loc", "I-loc"]
    assert bio_entities(tags) == [("per", 0, 1), ("org", 3, 5), ("loc", 6, 9)]
    assert bio_entities([]) == []
    assert bio_entities(["O", "O"]) == []


def test_bio_entities_repairs_invalid_sequences_like_conlleval():
    # I- after O starts a new entity
    assert bio_entities(["O", "I-per", "I-per", "O"]) == [("per", 1, 3)]
    # I- at the start of the sentence starts a new entity
    assert bio_entities(["I-loc", "O"]) == [("loc", 0, 1)]
    # I-x after B-y (or I-y) ends the y entity and starts an x entity
    assert bio_entities(["B-org", "I-per", "I-per"]) == [("org", 0, 1), ("per", 1, 3)]
    assert bio_entities(["B-org", "I-org", "I-loc"]) == [("org", 0, 2), ("loc", 2, 3)]
    # two adjacent B- of the same type are two entities; B-x after I-x too
    assert bio_entities(["B-per", "B-per"]) == [("per", 0, 1), ("per", 1, 2)]
    assert bio_entities(["B-per", "I-per", "B-per", "I-per"]) == [("per", 0, 2), ("per", 2, 4)]


def test_types_may_contain_hyphens_and_may_be_empty():
    tags = ["B-creative-work", "I-creative-work", "I-creative", "B-per"]
    # the type is everything after the first "-": "creative" differs from "creative-work"
    assert bio_entities(tags) == [("creative-work", 0, 2), ("creative", 2, 3), ("per", 3, 4)]
    # untyped B/I (conlleval reads "B" as prefix B, type ""); "B-" is the same tag
    assert bio_entities(["B", "I", "O", "B-", "I"]) == [("", 0, 2), ("", 3, 5)]


def test_bio_entities_rejects_other_schemes():
    with pytest.raises(ValueError, match=r"'E-per' at position 1"):
        bio_entities(["B-per", "E-per"])
    with pytest.raises(ValueError, match="'O-per'"):
        bio_entities(["O-per"])


def test_spans_to_bio_round_trips_with_bio_entities():
    tags = ["B-per", "O", "B-creative-work", "I-creative-work", "B-creative-work", "O", "B", "I"]
    assert spans_to_bio(bio_entities(tags), len(tags)) == tags
    rng = random.Random(0)
    vocabulary = ["O", "B-per", "I-per", "B-creative-work", "I-creative-work", "B", "I"]
    for _ in range(300):
        # random tags include invalid I- sequences: their repaired spans still round-trip as spans
        tags = [rng.choice(vocabulary) for _ in range(rng.randint(0, 12))]
        spans = bio_entities(tags)
        assert bio_entities(spans_to_bio(spans, len(tags))) == spans
    # spans given out of order come back as sorted tags
    assert spans_to_bio([("loc", 3, 4), ("per", 0, 2)], 5) == ["B-per", "I-per", "O", "B-loc", "O"]


def test_spans_to_bio_rejects_overlapping_or_out_of_range_spans():
    with pytest.raises(ValueError, match="overlap"):
        spans_to_bio([("per", 0, 2), ("loc", 1, 3)], 4)
    with pytest.raises(ValueError, match="overlap"):
        spans_to_bio([("per", 0, 2), ("per", 0, 2)], 4)
    with pytest.raises(ValueError, match="does not fit"):
        spans_to_bio([("per", 2, 5)], 4)
    with pytest.raises(ValueError, match="does not fit"):
        spans_to_bio([("per", 2, 2)], 4)


# ----- scores by hand ----------------------------------------------------------------------------------

# Four sentences. Gold spans / predicted spans:
#   0: Alice works at Acme Corp in Paris
#      gold (per,0,1) (org,3,5) (loc,6,7); predicted (per,0,1) correct, (org,3,4) wrong boundary,
#      (org,6,7) wrong type
#   1: no gold entity; predicted (loc,2,3) spurious
#   2: Bob met Carol: gold (per,0,1) (per,2,3); predicted (per,0,1) correct, Carol missed
#   3: gold (misc,1,2); predicted nothing
GOLD_TAGS = [
    ["B-per", "O", "O", "B-org", "I-org", "O", "B-loc"],
    ["O", "O", "O", "O"],
    ["B-per", "O", "B-per"],
    ["O", "B-misc", "O"],
]
PREDICTED_TAGS = [
    ["B-per", "O", "O", "B-org", "O", "O", "B-org"],
    ["O", "O", "B-loc", "O"],
    ["B-per", "O", "O"],
    ["O", "O", "O"],
]


def test_score_bio_by_hand():
    scores = score_bio(GOLD_TAGS, PREDICTED_TAGS)
    micro = scores["micro"]
    # gold 3 + 0 + 2 + 1 = 6, predicted 3 + 1 + 1 + 0 = 5, correct 1 + 0 + 1 + 0 = 2
    assert (micro["gold"], micro["predicted"], micro["correct"]) == (6, 5, 2)
    # P = 2/5 = 0.4, R = 2/6 = 1/3, F1 = 2PR / (P + R) = (4/15) / (11/15) = 4/11
    assert micro["precision"] == pytest.approx(0.4)
    assert micro["recall"] == pytest.approx(1 / 3)
    assert micro["f1"] == pytest.approx(4 / 11)
    per = scores["per_type"]
    assert list(per) == ["loc", "misc", "org", "per"]  # every type seen on either side, sorted
    # per: gold 3, predicted 2, correct 2: P = 1, R = 2/3, F1 = (4/3) / (5/3) = 0.8
    assert per["per"] == pytest.approx({"precision": 1.0, "recall": 2 / 3, "f1": 0.8,
                                        "gold": 3, "predicted": 2, "correct": 2})
    # org: the wrong boundary (3,4) is a false positive AND (3,5) a false negative; the wrong type at
    # word 6 is a second false positive: gold 1, predicted 2, correct 0
    assert per["org"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "gold": 1, "predicted": 2, "correct": 0}
    # loc: gold 1 (Paris, typed org), predicted 1 (the spurious one in sentence 1)
    assert per["loc"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "gold": 1, "predicted": 1, "correct": 0}
    # misc: nothing predicted, so precision is 0.0 by convention (not a division by zero)
    assert per["misc"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0,
                           "gold": 1, "predicted": 0, "correct": 0}


def test_score_spans_treats_spans_as_sets_and_handles_empty_sides():
    gold = [[("per", 0, 2)], []]
    # the duplicate prediction counts once: predicted 1, correct 1
    scores = score_spans(gold, [[("per", 0, 2), ("per", 0, 2)], []])
    assert scores["micro"] == {"precision": 1.0, "recall": 1.0, "f1": 1.0,
                               "gold": 1, "predicted": 1, "correct": 1}
    # nothing predicted: P = 0.0, R = 0/1 = 0.0, F1 = 0.0
    assert score_spans(gold, [[], []])["micro"]["precision"] == 0.0
    # no gold at all, one prediction: R = 0.0 by convention, P = 0/1
    nothing = score_spans([[]], [[("loc", 1, 2)]])
    assert nothing["micro"]["recall"] == 0.0 and nothing["per_type"]["loc"]["predicted"] == 1
    # an empty corpus scores 0 everywhere and has no types
    assert score_spans([], []) == {"micro": {"precision": 0.0, "recall": 0.0, "f1": 0.0,
                                             "gold": 0, "predicted": 0, "correct": 0}, "per_type": {}}


def test_score_bio_names_the_sentence_with_mismatched_lengths():
    with pytest.raises(ValueError, match="sentence 2 has 3 gold tags but 2 predicted"):
        score_bio(GOLD_TAGS, PREDICTED_TAGS[:2] + [["B-per", "O"]] + PREDICTED_TAGS[3:])
    with pytest.raises(ValueError, match="4 gold sentences but 3 predicted"):
        score_bio(GOLD_TAGS, PREDICTED_TAGS[:3])
    with pytest.raises(ValueError, match="sentence 0"):
        token_accuracy([["O"]], [["O", "O"]])


def test_token_accuracy_by_hand():
    # equal tags: sentence 0 5 of 7 (words 4 and 6 differ), 1: 3 of 4, 2: 2 of 3, 3: 2 of 3 -> 12/17
    assert token_accuracy(GOLD_TAGS, PREDICTED_TAGS) == pytest.approx(12 / 17)
    with pytest.raises(ValueError, match="empty"):
        token_accuracy([[]], [[]])


def test_token_accuracy_looks_good_while_entity_f1_does_not():
    # 10 sentences of 40 words, each with four two-word entities among 32 O's. The model finds the
    # first entity of each sentence exactly and misses the last word of the other three.
    gold, predicted = [], []
    for _ in range(10):
        g = ["O"] * 40
        for start, type_ in ((2, "per"), (10, "org"), (20, "loc"), (30, "org")):
            g[start:start + 2] = [f"B-{type_}", f"I-{type_}"]
        p = list(g)
        for start in (10, 20, 30):
            p[start + 1] = "O"  # last word missed: a one-word entity with the wrong boundary
        gold.append(g)
        predicted.append(p)
    # 3 wrong tags of 40 per sentence: 37/40 = 0.925
    assert token_accuracy(gold, predicted) == pytest.approx(0.925)
    # gold 40 entities, predicted 40, correct 10: P = R = F1 = 10/40 = 0.25
    micro = score_bio(gold, predicted)["micro"]
    assert (micro["gold"], micro["predicted"], micro["correct"]) == (40, 40, 10)
    assert micro["f1"] == pytest.approx(0.25)
    assert token_accuracy(gold, predicted) > 0.9 and micro["f1"] < 0.3


def test_type_confusion_by_hand():
    gold = [bio_entities(tags) for tags in GOLD_TAGS]
    predicted = [bio_entities(tags) for tags in PREDICTED_TAGS]
    confusion = type_confusion(gold, predicted)
    # sentence 0: (0,1) per/per; (3,5) org missed; (3,4) org spurious; (6,7) gold loc predicted org
    # sentence 1: (2,3) loc spurious; sentence 2: (0,1) per/per, (2,3) per missed; 3: (1,2) misc missed
    assert confusion == {("per", "per"): 2, ("org", "MISSED"): 1, ("SPURIOUS", "org"): 1,
                         ("loc", "org"): 1, ("SPURIOUS", "loc"): 1, ("per", "MISSED"): 1,
                         ("misc", "MISSED"): 1}
    # rows sum to the gold counts, columns to the predicted counts, the diagonal to the correct count
    per_type = score_spans(gold, predicted)["per_type"]
    for t, s in per_type.items():
        assert sum(n for (g, _), n in confusion.items() if g == t) == s["gold"]
        assert sum(n for (_, p), n in confusion.items() if p == t) == s["predicted"]
        assert confusion.get((t, t), 0) == s["correct"]


def test_format_report_contains_the_numbers():
    scores = score_bio(GOLD_TAGS, PREDICTED_TAGS)
    confusion = type_confusion([bio_entities(t) for t in GOLD_TAGS],
                               [bio_entities(t) for t in PREDICTED_TAGS])
    report = format_report(scores, confusion)
    score_table, confusion_table = report.split("\n\n")
    lines = score_table.splitlines()
    # per: P 100.00, R 66.67, F1 80.00, support 3, predicted 2, correct 2
    assert next(line for line in lines if line.startswith("per ")).split() == \
        ["per", "100.00", "66.67", "80.00", "3", "2", "2"]
    # micro: P 40.00, R 33.33, F1 4/11 = 36.36, support 6, predicted 5, correct 2
    assert next(line for line in lines if line.startswith("micro")).split() == \
        ["micro", "40.00", "33.33", "36.36", "6", "5", "2"]
    # confusion: columns are the predicted types loc, org, per, then MISSED (misc was never predicted)
    lines = confusion_table.splitlines()
    assert lines[1].split()[3:] == ["loc", "org", "per", "MISSED"]  # after the corner label
    rows = {line.split()[0]: line.split()[1:] for line in lines[2:]}
    assert rows == {"loc": ["0", "1", "0", "0"], "misc": ["0", "0", "0", "1"], "org": ["0", "0", "0", "1"],
                    "per": ["0", "0", "2", "1"], "SPURIOUS": ["1", "1", "0", "0"]}
    assert "confusion" not in format_report(scores)


# ----- parity with conlleval's chunk rules and with seqeval ---------------------------------------------


def _conlleval_chunks(tags: list[str]) -> list[tuple[str, int, int]]:
    """A line-by-line port of conlleval.pl's startOfChunk/endOfChunk (IOB2 cases), our reference."""

    def end_of_chunk(prev_tag, tag, prev_type, type_):
        if (prev_tag, tag) in {("B", "B"), ("B", "O"), ("I", "B"), ("I", "O")}:
            return True
        return prev_tag != "O" and prev_type != type_

    def start_of_chunk(prev_tag, tag, prev_type, type_):
        if (prev_tag, tag) in {("B", "B"), ("I", "B"), ("O", "B"), ("O", "I")}:
            return True
        return tag != "O" and prev_type != type_

    chunks, start = [], None
    prev_tag, prev_type = "O", ""
    for i, full in enumerate(tags + ["O"]):  # conlleval closes a sentence with an implicit O
        tag, _, type_ = full.partition("-")
        if start is not None and end_of_chunk(prev_tag, tag, prev_type, type_):
            chunks.append((prev_type, start, i))
            start = None
        if start_of_chunk(prev_tag, tag, prev_type, type_):
            start = i
        prev_tag, prev_type = tag, type_
    return chunks


def _random_tags(rng: random.Random, n_sentences: int) -> list[list[str]]:
    vocabulary = ["O", "O", "O", "B-per", "I-per", "B-org", "I-org", "B-creative-work", "I-creative-work"]
    return [[rng.choice(vocabulary) for _ in range(rng.randint(0, 15))] for _ in range(n_sentences)]


def test_bio_entities_matches_a_port_of_conlleval_on_random_tags():
    rng = random.Random(1)
    for tags in _random_tags(rng, 2000) + [["B", "I", "I-x", "I", "B-", "O", "I"]]:
        assert bio_entities(tags) == _conlleval_chunks(tags), tags


def test_score_bio_matches_seqeval_default_mode():
    seqeval_metrics = pytest.importorskip("seqeval.metrics",
                                          reason="seqeval is not installed (optional reference)")
    rng = random.Random(2)
    for _ in range(20):
        gold = _random_tags(rng, 30)
        vocabulary = ["O", "B-per", "I-per", "B-org", "I-org", "B-creative-work", "I-creative-work"]
        predicted = [[rng.choice(vocabulary) for _ in sentence] for sentence in gold]
        micro = score_bio(gold, predicted)["micro"]
        # seqeval with mode=None chunks like conlleval (invalid I- starts an entity); tolerance float rounding
        assert micro["f1"] == pytest.approx(seqeval_metrics.f1_score(gold, predicted), abs=1e-12)
        assert micro["precision"] == pytest.approx(seqeval_metrics.precision_score(gold, predicted),
                                                   abs=1e-12)
        assert micro["recall"] == pytest.approx(seqeval_metrics.recall_score(gold, predicted), abs=1e-12)
