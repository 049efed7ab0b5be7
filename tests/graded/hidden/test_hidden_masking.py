"""Graded, hidden: masking a sequence with no maskable token, and the budget of whole words."""

from __future__ import annotations

import random

import pytest
from graded_helpers import check_equal, check_that, fail

from minbert.masking import IGNORE_INDEX, MaskingVocab, mask_tokens

pytestmark = [pytest.mark.component("mlm_masking"), pytest.mark.visibility("after_published"),
              pytest.mark.todo("mask_tokens")]

VOCAB = MaskingVocab(mask_id=4, vocab_size=60, special_ids=frozenset({0, 1, 2, 3, 4}),
                     is_continuation=tuple(i >= 40 for i in range(60)))


@pytest.mark.points(1)
def test_nothing_to_mask_and_whole_words_within_the_budget():
    out = mask_tokens([2, 3, 0, 0], VOCAB, random.Random(0))
    check_equal([out.input_ids, out.labels], [[2, 3, 0, 0], [IGNORE_INDEX] * 4], "[CLS] [SEP] [PAD] [PAD], "
                "which has nothing to mask: its input ids and labels")
    rng = random.Random(1)
    ids = [2] + [10, 41, 42, 43] * 10 + [3]  # 10 words of 4 pieces: 40 maskable, a budget of 6
    for _ in range(50):
        chosen = sum(label != IGNORE_INDEX for label in mask_tokens(ids, VOCAB, rng, whole_word=True).labels)
        if chosen == 0:
            fail("mask_tokens chose no position of 10 words of 4 pieces with a budget of 6 (a whole word, 4 "
                 "pieces, fits)")
        check_that(chosen <= 6, f"{chosen} positions were chosen with a budget of 6: a word that does "
                   "not fit whole is skipped")
