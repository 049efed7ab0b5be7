"""Span-based entity recognition: classify every span of words, then pick non-conflicting ones.

Every span of at most `max_width` words is classified over the entity types plus NULL (index 0), as in
span-based NER (Lee et al. 2017's span representations, used for NER by e.g. Fu et al. 2021):

    g(i, j) = [h_i ; h_j ; pool(h_i .. h_j)]      h: one vector per word (its first piece's final state)

pool: the mean of the span's word vectors or a learned self-attention pooling; a two-layer feed-forward
network scores g(i, j).

Decoding: the non-NULL spans, by descending probability, each kept unless it overlaps a kept one
(`nested=False`, BIO's flat decoding) or, with `nested=True`, crosses one. Nested entities
("[Bank of [America]]") are impossible with one BIO tag per word.

Shape legend: B batch, W words, S spans, C hidden size, K entity types.

Read next: ../tag.py.
"""

from __future__ import annotations

from typing import Sequence

import torch
from torch import nn


NULL = 0  # span class "not an entity"; entity type k is class k + 1
POOLINGS = ("mean", "attention")
Span = tuple[str, int, int]  # (type, start, end): words start..end-1, as tasks/evaluation/entities.py


def enumerate_spans(num_words: int, max_width: int) -> list[tuple[int, int]]:
    """Every (start, end) with 1 <= end - start <= max_width, by start then width."""
    return [(start, start + width) for start in range(num_words)
            for width in range(1, min(max_width, num_words - start) + 1)]


def span_labels(spans: Sequence[tuple[int, int]], gold: Sequence[Span], types: Sequence[str]) -> list[int]:
    """The class of each enumerated span: its type's index + 1 if it is a gold entity, else NULL."""
    lookup = {(start, end): types.index(kind) + 1 for kind, start, end in gold}
    return [lookup.get(span, NULL) for span in spans]


class SpanClassifier(nn.Module):
    """Scores spans of word vectors: [h_start; h_end; pooled content] -> feed-forward -> K + 1 classes."""

    def __init__(self, hidden_size: int, num_types: int, pooling: str = "mean", dropout: float = 0.1) -> None:
        super().__init__()
        if pooling not in POOLINGS:
            raise ValueError(f"span pooling must be one of {POOLINGS}, got {pooling!r}")
        self.pooling = pooling
        self.attention = nn.Linear(hidden_size, 1) if pooling == "attention" else None
        self.classifier = nn.Sequential(nn.Dropout(dropout), nn.Linear(3 * hidden_size, hidden_size),
                                        nn.GELU(), nn.Dropout(dropout), nn.Linear(hidden_size, num_types + 1))

    def forward(self, words: torch.Tensor, spans: torch.Tensor) -> torch.Tensor:
        """words: (B, W, C); spans: (B, S, 2) long (start, end), padding spans (0, 1). Returns logits
        (B, S, K+1)."""
        starts, ends = spans[..., 0], spans[..., 1]  # (B, S)
        batch = torch.arange(words.size(0), device=words.device)[:, None]
        first, last = words[batch, starts], words[batch, ends - 1]  # (B, S, C)
        positions = torch.arange(words.size(1), device=words.device)
        inside = ((positions[None, None, :] >= starts[..., None])
                  & (positions[None, None, :] < ends[..., None]))
        if self.pooling == "mean":
            weights = inside.to(words.dtype)
            weights = weights / weights.sum(dim=-1, keepdim=True)  # (B, S, W)
        else:
            scores = self.attention(words).squeeze(-1)[:, None, :]  # (B, 1, W)
            weights = scores.masked_fill(~inside, float("-inf")).softmax(dim=-1)  # (B, S, W)
        content = weights @ words  # (B, S, C)
        return self.classifier(torch.cat([first, last, content], dim=-1))


def decode_spans(probabilities: torch.Tensor, spans: Sequence[tuple[int, int]], types: Sequence[str],
                 nested: bool = False) -> list[Span]:
    """Entities of one sentence from its spans' class probabilities (S, K+1), greedily by probability."""
    best = probabilities.max(dim=-1)
    candidates = sorted(((p, span, k)
                         for p, span, k in zip(best.values.tolist(), spans, best.indices.tolist())
                         if k != NULL), key=lambda c: -c[0])
    kept: list[tuple[int, int, int]] = []
    for _, (start, end), k in candidates:
        if all(_compatible((start, end), (s, e), nested) for s, e, _ in kept):
            kept.append((start, end, k))
    return sorted((types[k - 1], start, end) for start, end, k in kept)


def _compatible(a: tuple[int, int], b: tuple[int, int], nested: bool) -> bool:
    disjoint = a[1] <= b[0] or b[1] <= a[0]
    if disjoint:
        return True
    contains = (a[0] <= b[0] and b[1] <= a[1]) or (b[0] <= a[0] and a[1] <= b[1])
    return nested and contains and a != b
