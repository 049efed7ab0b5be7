"""Masked-LM corruption: which positions BERT must predict, and what it sees there instead.

BERT paper §3.1 ("Task #1: Masked LM") and Google's `create_pretraining_data.py`:

- 15% of the positions of a sequence are chosen for prediction (at least one, at most
  `max_predictions`: 20 for 128-token windows in BERT's recipe). Special tokens ([CLS], [SEP], [PAD])
  are never chosen. We count the 15% over the maskable positions, not over all positions as Google's
  code does, so a short sequence is not over-masked because of its [CLS] and [SEP].
- Each chosen position becomes [MASK] 80% of the time, a random token 10% of the time (we draw it from
  the non-special vocabulary; Google draws from all of it), and stays unchanged 10% of the time, so the
  model cannot learn that only [MASK] positions matter.
- Labels hold the original token at chosen positions and -100 (ignored by the loss) elsewhere.

Options:
- whole-word masking (Google's later release): the pieces of one word ("em", "##bed", "##ding") are
  chosen together, so the model cannot guess a piece from its neighbours; 80/10/10 still per piece.
- span masking (Joshi et al. 2020, "SpanBERT" §3.1): spans of whole words whose length is drawn from a
  geometric distribution Geo(p = 0.2) clipped to 10 words (mean 3.8), at uniformly random starts, until
  the 15% budget is spent; the 80/10/10 decision is made once per span. Spans never cross [SEP] and never
  touch another span, so the tokens just outside each span (what the span-boundary objective reads,
  see pretrain.span_boundary) are never masked.

Everything works on Python lists of ids for one sequence, with a `random.Random` passed in, so a run
masks the same way every time it is given the same seed.

Read next: pooling.py (one vector per sentence, for the fine-tuning heads).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import NamedTuple, Sequence

IGNORE_INDEX = -100  # the loss skips these labels (PyTorch's cross_entropy default)

MASK_PROB = 0.15
MAX_PREDICTIONS = 20  # BERT's max_predictions_per_seq for 128-token windows
SPAN_P = 0.2  # SpanBERT's geometric parameter
MAX_SPAN_WORDS = 10  # SpanBERT's clip

MASKING_STRATEGIES = ("token", "whole-word", "span")


@dataclass(frozen=True)
class MaskingVocab:
    """What masking needs to know about the vocabulary."""

    mask_id: int
    vocab_size: int
    special_ids: frozenset[int]  # never masked, never drawn as a random replacement
    is_continuation: tuple[bool, ...]  # per id: a "##" piece that continues the previous word

    @classmethod
    def from_tokenizer(cls, tokenizer) -> "MaskingVocab":
        tokens = tokenizer.convert_ids_to_tokens(list(range(tokenizer.vocab_size)))
        special = frozenset(i for i, t in enumerate(tokens) if t.startswith("[") and t.endswith("]")
                            and not t.startswith("[unused"))
        return cls(mask_id=tokenizer.convert_tokens_to_ids(["[MASK]"])[0], vocab_size=len(tokens),
                   special_ids=special, is_continuation=tuple(t.startswith("##") for t in tokens))

    def random_token(self, rng: random.Random) -> int:
        while True:  # the specials are a handful out of ~30k ids: this loop ends at once
            token = rng.randrange(self.vocab_size)
            if token not in self.special_ids:
                return token


class MaskedSequence(NamedTuple):
    input_ids: list[int]  # the corrupted sequence the model reads
    labels: list[int]  # original ids at chosen positions, IGNORE_INDEX elsewhere
    spans: list[tuple[int, int]]  # (first, last) position of each chosen unit or span, inclusive


def maskable_units(input_ids: Sequence[int], vocab: MaskingVocab, whole_word: bool) -> list[list[int]]:
    """The positions that may be masked, grouped: one position per unit, or one word per unit.

    A word is a piece followed by its "##" continuations. Special tokens belong to no unit.
    Example (whole_word=True): [CLS] em ##bed the [SEP] -> [[1, 2], [3]].
    """
    # Hints: 1. walk the positions in order; skip special tokens (vocab.special_ids): they are never
    #           predicted.
    #        2. with whole_word, a continuation piece (vocab.is_continuation[token]) joins the unit of the
    #           piece just before it, but only if that piece sits at the previous position; otherwise
    #           (or without whole_word) every position is a unit of its own.
    # BEGIN SOLUTION
    units: list[list[int]] = []
    for position, token in enumerate(input_ids):
        if token in vocab.special_ids:
            continue
        continues_word = (whole_word and vocab.is_continuation[token] and units
                          and units[-1][-1] == position - 1)
        if continues_word:
            units[-1].append(position)
        else:
            units.append([position])
    return units
    # END SOLUTION


def number_to_predict(input_ids: Sequence[int], vocab: MaskingVocab, mask_prob: float,
                      max_predictions: int) -> int:
    """round(15% of the maskable positions), at least 1 (if any), at most `max_predictions`."""
    maskable = sum(1 for token in input_ids if token not in vocab.special_ids)
    if maskable == 0:
        return 0
    return min(max_predictions, max(1, round(maskable * mask_prob)))


def choose_replacement(rng: random.Random) -> str:
    """BERT's 80/10/10 rule: "mask", "random" or "keep"."""
    # Hints: 1. draw from `rng` (never from the module `random`: a seeded run must repeat).
    #        2. "mask" 80% of the time, "random" 10%, "keep" 10% (BERT §3.1): for one, split [0, 1) into
    #           intervals of those widths, and where one draw falls picks the replacement.
    # BEGIN SOLUTION
    draw = rng.random()
    if draw < 0.8:
        return "mask"
    return "random" if draw < 0.9 else "keep"
    # END SOLUTION


def corrupt(token: int, replacement: str, vocab: MaskingVocab, rng: random.Random) -> int:
    """What the model sees at a chosen position."""
    if replacement == "mask":
        return vocab.mask_id
    if replacement == "random":
        return vocab.random_token(rng)
    return token


def mask_tokens(input_ids: Sequence[int], vocab: MaskingVocab, rng: random.Random,
                mask_prob: float = MASK_PROB, max_predictions: int = MAX_PREDICTIONS,
                whole_word: bool = False) -> MaskedSequence:
    """BERT's masking of one sequence (token or whole-word units); 80/10/10 per position."""
    units = maskable_units(input_ids, vocab, whole_word)
    budget = number_to_predict(input_ids, vocab, mask_prob, max_predictions)
    masked, labels = list(input_ids), [IGNORE_INDEX] * len(input_ids)
    spans: list[tuple[int, int]] = []
    # Hints: 1. visit the units in a random order (rng.shuffle); 2. take a unit only if it still fits
    # in the budget (a whole word is all or nothing); 3. at each position of a taken unit, the label is
    # the original token and the input is decided by choose_replacement / corrupt.
    # BEGIN SOLUTION
    rng.shuffle(units)
    chosen = 0
    for unit in units:
        if chosen == budget:
            break
        if chosen + len(unit) > budget:
            continue  # a word that does not fit whole is skipped, as in Google's whole-word masking
        chosen += len(unit)
        for position in unit:
            labels[position] = input_ids[position]
            masked[position] = corrupt(input_ids[position], choose_replacement(rng), vocab, rng)
        spans.append((unit[0], unit[-1]))
    # END SOLUTION
    return MaskedSequence(masked, labels, sorted(spans))


def sample_span_length(rng: random.Random, p: float = SPAN_P, max_words: int = MAX_SPAN_WORDS) -> int:
    """A span length in words: Geo(p) on 1, 2, ... clipped to max_words (SpanBERT §3.1).

    Clipping here means resampling, as SpanBERT's code does (it draws from the geometric probabilities
    of 1..max renormalised), so lengths above `max_words` never occur and the rest keep their ratios.
    """
    weights = [p * (1 - p) ** (length - 1) for length in range(1, max_words + 1)]
    return rng.choices(range(1, max_words + 1), weights=weights)[0]


def span_mask(input_ids: Sequence[int], vocab: MaskingVocab, rng: random.Random, mask_prob: float = MASK_PROB,
              max_predictions: int = MAX_PREDICTIONS, p: float = SPAN_P,
              max_words: int = MAX_SPAN_WORDS) -> MaskedSequence:
    """SpanBERT's masking of one sequence: spans of whole words, 80/10/10 decided once per span."""
    words = maskable_units(input_ids, vocab, whole_word=True)
    budget = number_to_predict(input_ids, vocab, mask_prob, max_predictions)
    masked, labels = list(input_ids), [IGNORE_INDEX] * len(input_ids)
    taken = [False] * len(input_ids)
    spans: list[tuple[int, int]] = []
    chosen = 0
    for _ in range(10 * len(words)):  # enough tries to spend the budget; a crowded sequence may not
        if chosen == budget or not words:
            break
        length = sample_span_length(rng, p, max_words)
        start = rng.randrange(len(words))
        span: list[int] = []
        for word in words[start:start + length]:
            adjacent = word[0] == (span[-1] + 1 if span else word[0])
            if not adjacent or chosen + len(span) + len(word) > budget:
                break  # a span stops at [SEP] (non-adjacent word) or when the budget is spent
            span.extend(word)
        if not span or any(taken[i] for i in range(max(span[0] - 1, 0), min(span[-1] + 2, len(taken)))):
            continue  # no room, or it would touch another span: draw again
        # Hints: SpanBERT draws the 80/10/10 decision once for the whole span (§3.1) and applies it to
        # every position of the span; mark those positions taken, then record the span and its size.
        # BEGIN SOLUTION
        replacement = choose_replacement(rng)
        for position in span:
            taken[position] = True
            labels[position] = input_ids[position]
            masked[position] = corrupt(input_ids[position], replacement, vocab, rng)
        spans.append((span[0], span[-1]))
        chosen += len(span)
        # END SOLUTION
    return MaskedSequence(masked, labels, sorted(spans))


def mask_sequence(input_ids: Sequence[int], vocab: MaskingVocab, rng: random.Random, strategy: str = "token",
                  mask_prob: float = MASK_PROB, max_predictions: int = MAX_PREDICTIONS) -> MaskedSequence:
    """Dispatch on the strategy name ("token", "whole-word", "span")."""
    if strategy == "span":
        return span_mask(input_ids, vocab, rng, mask_prob, max_predictions)
    if strategy in ("token", "whole-word"):
        return mask_tokens(input_ids, vocab, rng, mask_prob, max_predictions,
                           whole_word=strategy == "whole-word")
    raise ValueError(f"masking strategy must be one of {MASKING_STRATEGIES}, got {strategy!r}")
