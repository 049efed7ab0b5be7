"""Truncation: which word pieces survive when a text, or a pair of texts, is longer than the window.

Applied to word pieces; the special tokens ([CLS], [SEP]) are counted by the caller's budget.

Strategies:

    head       keep the first pieces (BERT's and Hugging Face's default)
    tail       keep the last pieces
    head+tail  keep the first and the last pieces (Sun et al. 2019, "How to Fine-Tune BERT for Text
               Classification?" §5.3.1: the first 128 and last 382 of a 512-token window were best on
               IMDb). `head_tail_truncate` scales the head to other windows: see its docstring.

A pair is cut like Hugging Face's "longest_first": one piece at a time from the longer segment (B on
a tie), so both segments keep as much as they can; each segment is then cut with the chosen strategy.
(That is the pure-Python tokenizer's rule. The `tokenizers`-backed one of transformers 5 differs when
both segments are cut to an odd budget and B is at least as long as A: it gives the odd piece to B.)

Read next: embeddings.py (ids to vectors).
"""

from __future__ import annotations

from typing import Sequence, TypeVar

T = TypeVar("T")

TRUNCATION_STRATEGIES = ("head", "tail", "head+tail")
# The window Sun et al. (2019) split into 128 head + 382 tail pieces: 512 minus [CLS] and [SEP].
SUN_ET_AL_BUDGET = 510


def head_tail_truncate(pieces: Sequence[T], budget: int, head_tokens: int = 128) -> list[T]:
    """Keep the first and last pieces of `pieces` so that at most `budget` remain (Sun et al. 2019).

    `head_tokens` is the head size at the paper's budget of 510 pieces (a 512 window less [CLS] and
    [SEP]); any other budget keeps the same proportion, rounded down: head = head_tokens * budget // 510,
    and the tail gets the rest. So max_length=512 keeps 128 + 382 pieces (the paper's best), and
    max_length=128 (budget 126) keeps 31 + 95. Scaling rather than clipping keeps the point of the
    method (most of the window on the ending, where reviews state their verdict) in small windows,
    where a clipped head of 128 would leave no tail at all. Pieces that fit are returned unchanged.
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
    """Cut `pieces` to at most `budget` with one of TRUNCATION_STRATEGIES (head, tail, head+tail)."""
    check_truncation(strategy)
    if budget < 0:
        raise ValueError(f"budget must be >= 0, got {budget}")
    if len(pieces) <= budget:
        return list(pieces)
    if strategy == "head":
        return list(pieces[:budget])
    if strategy == "tail":
        return list(pieces[len(pieces) - budget:])
    return head_tail_truncate(pieces, budget, head_tokens)


def pair_budgets(len_a: int, len_b: int, budget: int) -> tuple[int, int]:
    """How many pieces of A and of B survive "longest_first" truncation of the pair to `budget`.

    Equal to removing one piece at a time from the longer segment, B on a tie (Hugging Face's rule),
    in closed form: first shorten the longer one to the other's length, then take alternately.
    """
    excess = len_a + len_b - budget
    if excess <= 0:
        return len_a, len_b
    cut = min(abs(len_a - len_b), excess)
    if len_a > len_b:
        len_a -= cut
    else:
        len_b -= cut
    excess -= cut
    # Now the two are equal (or nothing is left to cut): B loses the odd piece because it goes first.
    return len_a - excess // 2, len_b - (excess + 1) // 2


def check_truncation(strategy: str) -> None:
    if strategy not in TRUNCATION_STRATEGIES:
        raise ValueError(f"truncation must be one of {TRUNCATION_STRATEGIES}, got {strategy!r}")
