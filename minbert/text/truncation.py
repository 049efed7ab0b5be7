"""Truncation: which word pieces survive when a text, or a pair of texts, is longer than the window.

Applied to word pieces; the special tokens ([CLS], [SEP]) are counted by the caller's budget.

What one segment keeps (TRUNCATION_STRATEGIES): head (BERT's and Hugging Face's default), tail, or
head+tail (Sun et al. 2019 §5.3.1: the first 128 and last 382 of a 512-token window were best on IMDb;
`head_tail_truncate` scales the head to other windows).

How a pair shares its budget (PAIR_STRATEGIES, `transformers`' names and the rule of `tokenizers`, behind
BertTokenizerFast and transformers 5's BertTokenizer):

    longest_first  cut the longer segment first, at most down to the shorter one's length; if that is
                   not enough, each keeps half the budget, the odd piece going to the longer one (to B
                   on a tie). (Hugging Face's older pure-Python tokenizer gives the odd piece to A.)
    only_first     cut only A; only_second: cut only B. The cut segment must keep at least one piece,
                   else it is an error rather than a pair with an empty segment.

A pair cut with head, tail or head+tail gets longest_first's budgets, then each segment is cut its way. A
single text: longest_first and only_first cut its head, and only_second, having nothing to cut, is an
error when the text does not fit, as in `transformers`.

Read next: ../sentence_encoder.py (sentence embeddings in one call).
"""

from __future__ import annotations

from typing import Sequence, TypeVar

T = TypeVar("T")

TRUNCATION_STRATEGIES = ("head", "tail", "head+tail")
PAIR_STRATEGIES = ("longest_first", "only_first", "only_second")
ALL_STRATEGIES = TRUNCATION_STRATEGIES + PAIR_STRATEGIES
# The window Sun et al. (2019) split into 128 head + 382 tail pieces: 512 minus [CLS] and [SEP].
SUN_ET_AL_BUDGET = 510


def head_tail_truncate(pieces: Sequence[T], budget: int, head_tokens: int = 128) -> list[T]:
    """Keep the first and last pieces of `pieces` so that at most `budget` remain (Sun et al. 2019).

    `head_tokens` is the head at the paper's budget of 510; another budget keeps the proportion, rounded
    down (max_length=512: 128 + 382, the paper's best; max_length=128: 31 + 95), so a small window still
    spends most of itself on the ending, where reviews state their verdict. Pieces that fit are unchanged.
    """
    if budget < 0:
        raise ValueError(f"budget must be >= 0, got {budget}")
    if head_tokens < 0 or head_tokens > SUN_ET_AL_BUDGET:
        raise ValueError(f"head_tokens must be in [0, {SUN_ET_AL_BUDGET}], got {head_tokens}")
    if len(pieces) <= budget:
        return list(pieces)
    head = head_tokens * budget // SUN_ET_AL_BUDGET
    tail = budget - head
    return list(pieces[:head]) + list(pieces[len(pieces) - tail:])


def truncate(pieces: Sequence[T], budget: int, strategy: str = "head", head_tokens: int = 128) -> list[T]:
    """Cut one segment to at most `budget` pieces with any of ALL_STRATEGIES (see the module docstring)."""
    check_truncation(strategy)
    if budget < 0:
        raise ValueError(f"budget must be >= 0, got {budget}")
    if len(pieces) <= budget:
        return list(pieces)
    if strategy == "only_second" and budget > 0:  # budget 0 empties everything, as in `tokenizers`
        raise ValueError("truncation='only_second' cuts the second text of a pair, and this text has none: "
                         "use 'head' (or 'only_first') for single texts")
    if strategy == "tail":
        return list(pieces[len(pieces) - budget:])
    if strategy == "head+tail":
        return head_tail_truncate(pieces, budget, head_tokens)
    return list(pieces[:budget])


def truncate_pair(a: Sequence[T], b: Sequence[T], budget: int, strategy: str = "longest_first",
                  head_tokens: int = 128) -> tuple[list[T], list[T]]:
    """Cut a pair to at most `budget` pieces in all: `pair_budgets`, then each segment cut its way."""
    keep_a, keep_b = pair_budgets(len(a), len(b), budget, strategy)  # the strategy checked there
    if strategy in PAIR_STRATEGIES:
        strategy = "head"
    return truncate(a, keep_a, strategy, head_tokens), truncate(b, keep_b, strategy, head_tokens)


def pair_budgets(len_a: int, len_b: int, budget: int, strategy: str = "longest_first") -> tuple[int, int]:
    """How many pieces of A and of B survive truncation of the pair to `budget` (`tokenizers`' rule).

    head, tail and head+tail share the budget as longest_first does. A pair that only_first or
    only_second cannot fit (the cut segment would keep no piece) is a ValueError, as in `transformers`.
    """
    check_truncation(strategy)
    if budget < 0:
        raise ValueError(f"budget must be >= 0, got {budget}")
    excess = len_a + len_b - budget
    if excess <= 0:
        return len_a, len_b
    if budget == 0:  # `tokenizers` empties both segments here, whatever the strategy
        return 0, 0
    if strategy in ("only_first", "only_second"):
        cut = len_a if strategy == "only_first" else len_b
        if cut <= excess:
            segment = "first (A)" if strategy == "only_first" else "second (B)"
            raise ValueError(f"truncation={strategy!r} must remove {excess} pieces from the {segment} "
                             f"segment, which has {cut}; a pair of {len_a} + {len_b} pieces does not fit "
                             f"{budget} that way ('longest_first' cuts both)")
        return (len_a - excess, len_b) if strategy == "only_first" else (len_a, len_b - excess)
    shorter = min(len_a, len_b)
    if 2 * shorter <= budget:
        keep_shorter, keep_longer = shorter, budget - shorter  # only the longer one is cut
    else:
        keep_shorter, keep_longer = budget // 2, budget - budget // 2  # both: the odd piece to the longer
    # On a tie B counts as the longer one, so B gets the odd piece.
    return (keep_longer, keep_shorter) if len_a > len_b else (keep_shorter, keep_longer)


def check_truncation(strategy: str) -> None:
    if strategy not in ALL_STRATEGIES:
        raise ValueError(f"truncation must be one of {ALL_STRATEGIES}, got {strategy!r}")
