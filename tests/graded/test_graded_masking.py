"""Graded: BERT's masked-LM corruption (minbert/masking.py): which positions, and what replaces them.

A toy vocabulary of 60 ids: 0-4 are [PAD] [UNK] [CLS] [SEP] [MASK], 5-39 ordinary words, 40-59 "##"
continuation pieces. Shares are measured on ~10k draws; the tolerances (0.02) are about 5 standard errors.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest
from graded_helpers import check_equal, check_that, check_value, expectation, fail

from minbert.masking import (IGNORE_INDEX, MaskingVocab, choose_replacement, mask_tokens, maskable_units,
                              span_mask)
from pretrain.span_boundary import span_targets

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


NAMES = {PAD: "[PAD]", 1: "[UNK]", CLS: "[CLS]", SEP: "[SEP]", MASK: "[MASK]"}


@pytest.mark.points(1)
@pytest.mark.todo("maskable_units")
def test_maskable_units_skip_special_tokens_and_group_words():
    ids = [CLS, 10, 41, 42, 11, SEP, 12, SEP, PAD]
    for whole_word in (False, True):
        got = maskable_units(ids, VOCAB, whole_word=whole_word)
        special = sorted({p for unit in got or () for p in unit if ids[p] in VOCAB.special_ids})
        if special:
            fail(f"maskable_units([CLS] w ##a ##b w [SEP] w [SEP] [PAD], whole_word={whole_word}) gave "
                 f"{got}: positions {special} hold special tokens, which belong to no unit")
        check_equal(got, units_by_hand(whole_word), f"maskable_units([CLS] w ##a ##b w [SEP] w [SEP] [PAD], "
                    f"whole_word={whole_word}) (" + ("a word is a piece followed by its '##' continuations)"
                                                     if whole_word else "with whole_word=False every "
                                                                        "position is a unit of its own)"))
    # A continuation right after a special token starts a unit of its own: [CLS] w ##a [SEP] ##b w [SEP].
    check_equal(maskable_units([CLS, 10, 41, SEP, 42, 11, SEP], VOCAB, whole_word=True), [[1, 2], [4], [5]],
                "maskable_units([CLS] w ##a [SEP] ##b w [SEP], whole_word=True) (a continuation joins the "
                "piece before it only if that piece sits at the previous position; here [SEP] is in between)")


@expectation
def units_by_hand(whole_word: bool) -> list[list[int]]:
    return [[1, 2, 3], [4], [6]] if whole_word else [[1], [2], [3], [4], [6]]


@pytest.mark.points(1)
@pytest.mark.todo("choose_replacement")
def test_replacement_rule_is_80_10_10():
    rng = random.Random(0)
    counts = Counter(choose_replacement(rng) for _ in range(10_000))
    check_equal(sorted(counts), ["keep", "mask", "random"], "the answers choose_replacement gave in 10,000 "
                "draws (BERT's rule is 80% / 10% / 10%: mask, random, keep)")
    for kind, share in (("mask", 0.8), ("random", 0.1), ("keep", 0.1)):
        check_value(counts[kind] / 10_000, share, f"the share of {kind!r} in 10,000 draws (BERT's "
                    "rule is 80% / 10% / 10%)", tolerance=0.02)


@pytest.mark.points(1)
@pytest.mark.todo("choose_replacement")
def test_replacement_is_drawn_from_the_rng_it_is_given():
    # A seeded run repeats: the answers follow the rng argument, whatever of its methods they use (random,
    # choices, randrange, one draw or two), and nothing else (the module `random`, reseeded in between).
    state, runs = random.getstate(), []
    try:
        for global_seed in (1, 2):
            random.seed(global_seed)
            rng = random.Random(7)
            before = rng.getstate()
            runs.append([choose_replacement(rng) for _ in range(200)])
            check_that(rng.getstate() != before, "choose_replacement drew nothing from the rng it was given: "
                       "draw from `rng` (rng.random(), rng.choices, ...), so that a seeded run repeats")
    finally:
        random.setstate(state)
    check_equal(sorted(set(runs[0])), ["keep", "mask", "random"], "the answers in 200 draws")
    check_that(runs[0] == runs[1], "two runs of 200 draws with random.Random(7) gave different answers when "
               "only the module `random` was reseeded in between: draw from the rng argument, never from the "
               "module `random`, so that a seed reproduces a run")


@pytest.mark.points(2)
@pytest.mark.todo("mask_tokens")
def test_special_tokens_and_padding_are_never_masked():
    rng = random.Random(1)
    chosen = 0
    for ids in sequences(300):
        out = mask_tokens(ids, VOCAB, rng)
        chosen += sum(label != IGNORE_INDEX for label in out.labels)
        for position, (original, seen, label) in enumerate(zip(ids, out.input_ids, out.labels)):
            if original in VOCAB.special_ids and (label != IGNORE_INDEX or seen != original):
                fail(f"position {position} ({NAMES[original]}) was chosen for prediction (label {label}, "
                     f"input {seen}): special tokens ([CLS], [SEP], [PAD]) are never masked")
    check_value(chosen, 300 * 6, "the number of positions chosen in 300 sequences of 40 maskable tokens (6 "
                "each: round(15% of 40))")


@pytest.mark.points(2)
@pytest.mark.todo("mask_tokens")
def test_fifteen_percent_chosen_labels_hold_the_originals():
    rng = random.Random(2)
    chosen = mask_count = total = 0
    for ids in sequences(300):
        out = mask_tokens(ids, VOCAB, rng)
        if not len(out.input_ids) == len(out.labels) == len(ids):
            fail(f"a sequence of {len(ids)} ids gave {len(out.input_ids)} inputs and {len(out.labels)} "
                 "labels")
        picked = [p for p, label in enumerate(out.labels) if label != IGNORE_INDEX]
        if len(picked) != 6:
            fail(f"{len(picked)} positions of a sequence with 40 maskable tokens were chosen; the budget is "
                 "round(15% of 40) = 6")
        for p in range(len(ids)):
            if p in picked and out.labels[p] != ids[p]:
                fail(f"the label at chosen position {p} is {out.labels[p]}, not the original token {ids[p]}")
            if p not in picked and out.input_ids[p] != ids[p]:
                fail(f"position {p} was not chosen (its label is IGNORE_INDEX) but its input changed")
        chosen += len(picked)
        mask_count += sum(out.input_ids[p] == MASK for p in picked)
        total += 1
    check_value(mask_count / chosen, 0.8, f"the share of the {chosen} chosen positions that became [MASK] "
                "(BERT's rule is 80% / 10% / 10%: the rest a random token or kept)", tolerance=0.03)


@pytest.mark.points(1)
@pytest.mark.todo("mask_tokens")
def test_every_position_is_equally_likely_and_only_the_given_rng_decides():
    ids = sequences(1)[0]
    state = random.getstate()
    try:
        outs = []
        for global_seed in (1, 2):
            random.seed(global_seed)  # a masking that draws from the module `random` changes with it
            outs.append(mask_tokens(ids, VOCAB, random.Random(7)))
    finally:
        random.setstate(state)
    check_that(outs[0] == outs[1], "two calls with random.Random(7) masked the same sequence differently "
               "(only the global `random` was reseeded in between): draw every random choice from the rng "
               "argument (rng.shuffle, rng.random), never from the module `random`, "
               "so a seed reproduces a run")
    rng, counts = random.Random(8), Counter()
    for ids in sequences(300):
        labels = mask_tokens(ids, VOCAB, rng).labels
        counts.update(p for p, label in enumerate(labels) if label != IGNORE_INDEX)
    check_value(sum(counts.values()), 300 * 6, "the number of positions chosen in 300 sequences of 40 "
                "maskable tokens (6 each: round(15% of 40))")
    shares = {p: counts[p] / 300 for p, token in enumerate(ids) if token not in VOCAB.special_ids}
    low, high = min(shares, key=shares.get), max(shares, key=shares.get)
    # each 6 / 40 = 15%, with a standard error of 2% over 300
    check_that(shares[high] - shares[low] <= 0.15, f"position {high} was chosen in {counts[high]} of 300 "
               f"sequences and position {low} in {counts[low]}: every maskable position must be equally "
               "likely (15%); visit the units in a random order (rng.shuffle) before spending the budget")


@pytest.mark.points(1)
@pytest.mark.todo("mask_tokens")
def test_at_most_max_predictions_and_at_least_one():
    rng = random.Random(3)
    long = [CLS] + [7] * 300 + [SEP]
    labels = mask_tokens(long, VOCAB, rng, max_predictions=20).labels
    check_value(sum(label != IGNORE_INDEX for label in labels),
                20, "the number of positions chosen of 300 maskable ones with max_predictions=20")
    check_value(sum(label != IGNORE_INDEX for label in mask_tokens([CLS, 9, SEP], VOCAB, rng).labels), 1,
                "the number of positions of [CLS] w [SEP] chosen (at least one, when any can be)")


@pytest.mark.points(1)
@pytest.mark.todo("mask_tokens")
def test_whole_word_masking_takes_words_whole():
    rng, taken, partly = random.Random(4), 0, 0
    for _ in range(200):
        ids = [CLS]
        for _ in range(15):
            ids += [rng.randrange(5, 40)] + [rng.randrange(40, 60) for _ in range(rng.randrange(3))]
        ids.append(SEP)
        out = mask_tokens(ids, VOCAB, rng, whole_word=True)
        words = [word for word in maskable_units(ids, VOCAB, whole_word=True) if len(word) > 1]
        taken += sum(out.labels[word[0]] != IGNORE_INDEX for word in words)
        for word in words:
            partly += len({out.labels[p] == IGNORE_INDEX for p in word}) != 1
            if len({out.labels[p] == IGNORE_INDEX for p in word}) != 1:
                fail(f"the word at positions {word} was partly chosen: with whole_word=True a unit is taken "
                     "whole or not at all")
    check_value(partly, 0, "the number of words of several pieces partly chosen in 200 sequences")
    check_that(taken > 0, "no word of several pieces was chosen in 200 sequences: with whole_word=True a "
               "unit is a word, and words are chosen like single positions")


def words_of_one_to_four_pieces(rng: random.Random) -> list[int]:
    """[CLS], 30 words of 1 to 4 pieces (one in five of a single piece), [SEP]."""
    ids = [CLS]
    for _ in range(30):
        ids += [rng.randrange(5, 40)] + [rng.randrange(40, 60) for _ in range(rng.choice([0, 1, 1, 2, 3]))]
    return ids + [SEP]


@pytest.mark.points(1)
@pytest.mark.todo("mask_tokens")
def test_whole_word_masking_spends_the_budget_and_decides_each_position():
    rng = random.Random(6)
    chosen = budget = pairs = both_masked = 0
    for _ in range(400):
        ids = words_of_one_to_four_pieces(rng)
        out = mask_tokens(ids, VOCAB, rng, whole_word=True)
        chosen += sum(label != IGNORE_INDEX for label in out.labels)
        budget += round(0.15 * (len(ids) - 2))
        for p in range(1, len(ids) - 1):  # a chosen [MASK] piece followed by a chosen continuation
            if out.input_ids[p] == MASK and out.labels[p] != IGNORE_INDEX and ids[p + 1] >= 40:
                pairs += 1
                both_masked += out.input_ids[p + 1] == MASK
    # A word that does not fit the budget is skipped and the next ones tried, so the budget is spent unless
    # no word left fits; single-piece words almost always fill the rest (the reference: 4,316 of 4,316).
    # Stopping at the first word that does not fit spends about 92% here (12.6% of tokens instead of 15%
    # with longer words).
    if chosen < 0.98 * budget:
        fail(f"{chosen} positions were chosen in 400 sequences with a budget of {budget} in all "
             f"({chosen / budget:.1%} of it): a word that does not fit must be skipped, not end the masking; "
             "the next words may still fit")
    check_value(chosen / budget, 1.0, "the share of the budget spent in 400 sequences (a word that does not "
                "fit is skipped, and the next words tried)", tolerance=0.02)
    # 80/10/10 per position, even inside a word: the piece after a [MASK]ed piece is [MASK] 80% of the
    # time. Over ~1,850 such pairs the binomial standard error is sqrt(0.8 * 0.2 / 1850) = 0.009; the
    # tolerance is 4 of them, 0.037. Deciding once per word gives 100%.
    share = both_masked / max(pairs, 1)
    if abs(share - 0.8) > 0.04:
        fail(f"after a [MASK]ed piece, the next piece of the same word was [MASK] in {share:.1%} of {pairs} "
             "cases, expected 80%: BERT decides 80/10/10 per position (choose_replacement for each position "
             "of a taken word), not once per word as SpanBERT does per span")
    check_value(share, 0.8, "the share of [MASK]ed pieces followed by a [MASK]ed piece of the same "
                "word (80/10/10 per position)", tolerance=0.04)  # ~1,850 pairs: 4.3 standard errors


@pytest.mark.points(2)
@pytest.mark.todo("span_mask")
def test_span_masking_replaces_each_span_as_one_and_labels_only_its_positions():
    """SpanBERT §3.1: one 80/10/10 draw per span. A span is all [MASK], all kept, or (when random) has
    no [MASK] and no position outside it changed; labels hold the originals exactly on the spans."""
    rng = random.Random(5)
    kinds = Counter()
    spent = copied = long_random = 0
    for ids in sequences(400):
        out = span_mask(ids, VOCAB, rng)
        if not out.spans:
            fail("span_mask chose no span in a sequence of 40 maskable tokens")
        for start, end in out.spans:
            if end < start:
                fail(f"span ({start}, {end}) ends before it starts: a span is the (first, last) positions it "
                     "covers, both ends inclusive (span[0], span[-1])")
        inside = {i for start, end in out.spans for i in range(start, end + 1)}
        ordered = sorted(out.spans)
        for (_, end), (start, _) in zip(ordered, ordered[1:]):
            if start <= end + 1:
                fail(f"the spans {ordered} overlap or touch: mark a span's positions taken, so that a later "
                     "span is drawn again when it would overlap or touch one already chosen")
        labelled = sum(label != IGNORE_INDEX for label in out.labels)
        if labelled > 6:
            fail(f"span_mask chose {labelled} positions, more positions than the budget of round(15% of 40) "
                 "= 6: count every position of a span against the budget")
        for i, (original, seen, label) in enumerate(zip(ids, out.input_ids, out.labels)):
            if label != (original if i in inside else IGNORE_INDEX):
                fail(f"the label at position {i} is {label}: a position inside a span holds its original "
                     "token and every other one IGNORE_INDEX")
            if i not in inside and seen != original:
                fail(f"position {i}, outside every span, was changed")
        for start, end in out.spans:
            seen = out.input_ids[start:end + 1]
            if all(t == MASK for t in seen):
                kinds["mask"] += 1
            elif seen == ids[start:end + 1]:
                kinds["keep"] += 1
            elif MASK in seen:
                fail(f"span {start}-{end} mixes [MASK] with other replacements ({seen}): SpanBERT draws the "
                     "80/10/10 decision once per span")
            else:
                kinds["random"] += 1
                if end > start:  # each position draws its own random token: all equal is a 1-in-55 chance
                    copied += len(set(seen)) == 1
                    long_random += 1
        spent += labelled
    check_value(spent, 400 * 6, "the number of positions span_mask chose in 400 sequences with a budget of "
                "round(15% of 40) = 6 each (the budget counts word pieces: add each span's number of "
                "positions, not its number of words, and keep drawing spans until the budget is spent)")
    check_that(not long_random or copied <= long_random / 2, f"in {copied} of {long_random} randomly "
               "replaced spans of several positions every position holds the same token: one random token "
               "was copied over the whole span; the decision (mask, random, keep) is made once per span, but "
               "each position draws its own random token (corrupt per position)")
    total = sum(kinds.values())
    check_that(abs(kinds["mask"] / total - 0.8) < 0.04 and kinds["random"] and kinds["keep"],  # ~1,500 spans
               f"of {total} spans, {kinds['mask'] / total:.1%} became [MASK], {kinds['random']} random and "
               f"{kinds['keep']} kept; the rule is 80% / 10% / 10% per span")



@pytest.mark.points(1)
@pytest.mark.todo("mask_tokens")
@pytest.mark.parametrize("whole_word", [False, True])
def test_spans_are_first_and_last_positions_as_pre_training_reads_them(whole_word):
    """mask_tokens' spans feed the span-boundary targets (pretrain.span_boundary), which read each as (first,
    last), both ends inclusive: first..last is one taken unit, and together they are the labelled
    positions."""
    rng, spans, agree = random.Random(10), 0, 0
    for _ in range(100):
        ids = words_of_one_to_four_pieces(rng)
        out = mask_tokens(ids, VOCAB, rng, whole_word=whole_word)
        labelled = {p for p, label in enumerate(out.labels) if label != IGNORE_INDEX}
        units = {tuple(unit) for unit in maskable_units(ids, VOCAB, whole_word=whole_word)}
        for first, last in out.spans:
            read = tuple(range(first, last + 1))  # as span_targets reads a span
            if read not in units or not set(read) <= labelled:
                fail(f"span ({first}, {last}) covers positions {list(read)}, read with both ends inclusive "
                     f"as pre-training's span-boundary targets read it, but the labelled positions there are "
                     f"{sorted(set(read) & labelled)}: a span is (first, last) of one taken unit, its last "
                     "position included (unit[0], unit[-1]), not one past the end")
        covered = set(span_targets([out.spans])[4].tolist())  # the positions pre-training's targets read
        if covered != labelled:
            fail(f"the spans {out.spans} cover positions {sorted(covered)} but the labelled ones are "
                 f"{sorted(labelled)}: record one (first, last) span per taken unit")
        spans += len(out.spans)
        agree += covered == labelled
    check_value(agree, 100, "the number of the 100 sequences whose spans, read as pre-training reads them, "
                "cover the labelled positions")
    check_that(spans > 0, "mask_tokens recorded no span in 100 sequences: one (first, last) per taken unit")
