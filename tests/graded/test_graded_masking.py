"""Graded: BERT's masked-LM corruption (pretrain/masking.py): which positions, and what replaces them.

A toy vocabulary of 60 ids: 0-4 are [PAD] [UNK] [CLS] [SEP] [MASK], 5-39 ordinary words, 40-59 "##"
continuation pieces. Shares are measured on ~10k draws; the tolerances (0.02) are about 5 standard errors.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest

from pretrain.masking import (IGNORE_INDEX, MaskingVocab, choose_replacement, mask_tokens, maskable_units,
                              span_mask)

pytestmark = pytest.mark.component("mlm_masking")

PAD, CLS, SEP, MASK = 0, 2, 3, 4
VOCAB = MaskingVocab(mask_id=MASK, vocab_size=60, special_ids=frozenset({0, 1, 2, 3, 4}),
                     is_continuation=tuple(i >= 40 for i in range(60)))


def sequences(n: int, seed: int = 0) -> list[list[int]]:
    """[CLS] A [SEP] B [SEP] [PAD] [PAD] with 20 ordinary word ids per segment."""
    rng = random.Random(seed)
    return [[CLS] + [rng.randrange(5, 40) for _ in range(20)] + [SEP]
            + [rng.randrange(5, 40) for _ in range(20)]
            + [SEP, PAD, PAD] for _ in range(n)]


@pytest.mark.points(1)
def test_maskable_units_skip_special_tokens_and_group_words():
    ids = [CLS, 10, 41, 42, 11, SEP, 12, SEP, PAD]
    assert maskable_units(ids, VOCAB, whole_word=False) == [[1], [2], [3], [4], [6]]
    assert maskable_units(ids, VOCAB, whole_word=True) == [[1, 2, 3], [4], [6]]


@pytest.mark.points(1)
def test_replacement_rule_is_80_10_10():
    rng = random.Random(0)
    counts = Counter(choose_replacement(rng) for _ in range(10_000))
    assert set(counts) == {"mask", "random", "keep"}
    assert abs(counts["mask"] / 10_000 - 0.8) < 0.02
    assert abs(counts["random"] / 10_000 - 0.1) < 0.02
    assert abs(counts["keep"] / 10_000 - 0.1) < 0.02


@pytest.mark.points(2)
def test_special_tokens_and_padding_are_never_masked():
    rng = random.Random(1)
    for ids in sequences(300):
        out = mask_tokens(ids, VOCAB, rng)
        for original, seen, label in zip(ids, out.input_ids, out.labels):
            if original in VOCAB.special_ids:
                assert label == IGNORE_INDEX and seen == original


@pytest.mark.points(2)
def test_fifteen_percent_chosen_labels_hold_the_originals():
    rng = random.Random(2)
    chosen = mask_count = total = 0
    for ids in sequences(300):
        out = mask_tokens(ids, VOCAB, rng)
        assert len(out.input_ids) == len(out.labels) == len(ids)
        picked = [p for p, label in enumerate(out.labels) if label != IGNORE_INDEX]
        assert len(picked) == 6  # round(0.15 * 40) maskable positions
        for p in range(len(ids)):
            if p in picked:
                assert out.labels[p] == ids[p]
            else:
                assert out.input_ids[p] == ids[p], "an unchosen position changed"
        chosen += len(picked)
        mask_count += sum(out.input_ids[p] == MASK for p in picked)
        total += 1
    assert abs(mask_count / chosen - 0.8) < 0.03


@pytest.mark.points(1)
def test_at_most_max_predictions_and_at_least_one():
    rng = random.Random(3)
    long = [CLS] + [7] * 300 + [SEP]
    assert sum(label != IGNORE_INDEX
               for label in mask_tokens(long, VOCAB, rng, max_predictions=20).labels) == 20
    short = [CLS, 9, SEP]
    assert sum(label != IGNORE_INDEX for label in mask_tokens(short, VOCAB, rng).labels) == 1


@pytest.mark.points(1)
def test_whole_word_masking_takes_words_whole():
    rng = random.Random(4)
    for _ in range(200):
        ids = [CLS]
        for _ in range(15):
            ids += [rng.randrange(5, 40)] + [rng.randrange(40, 60) for _ in range(rng.randrange(3))]
        ids.append(SEP)
        out = mask_tokens(ids, VOCAB, rng, whole_word=True)
        for word in maskable_units(ids, VOCAB, whole_word=True):
            assert len({out.labels[p] == IGNORE_INDEX for p in word}) == 1, f"word {word} partly chosen"


@pytest.mark.points(2)
def test_span_masking_replaces_each_span_as_one_and_labels_only_its_positions():
    """SpanBERT §3.1: one 80/10/10 draw per span. A span is all [MASK], all kept, or (when random) has
    no [MASK] and no position outside it changed; labels hold the originals exactly on the spans."""
    rng = random.Random(5)
    kinds = Counter()
    for ids in sequences(400):
        out = span_mask(ids, VOCAB, rng)
        inside = {i for start, end in out.spans for i in range(start, end + 1)}
        assert inside, "span_mask chose no span"
        for i, (original, seen, label) in enumerate(zip(ids, out.input_ids, out.labels)):
            assert label == (original if i in inside else IGNORE_INDEX), f"label at position {i}"
            if i not in inside:
                assert seen == original, f"position {i} outside every span was changed"
        for start, end in out.spans:
            seen = out.input_ids[start:end + 1]
            if all(t == MASK for t in seen):
                kinds["mask"] += 1
            elif seen == ids[start:end + 1]:
                kinds["keep"] += 1
            else:
                assert MASK not in seen, f"span {start}-{end} mixes [MASK] with other replacements: {seen}"
                kinds["random"] += 1
    total = sum(kinds.values())
    assert abs(kinds["mask"] / total - 0.8) < 0.04, kinds  # ~1,500 spans: 0.04 is about 4 standard errors
    assert kinds["random"] and kinds["keep"], kinds

