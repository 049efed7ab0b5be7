"""Structured (layer-wise guided) classifiers for label hierarchies (Manginas et al. 2020).

A classification function f_i = sigmoid(W_i c_i + b_i) reads c_i, the [CLS] vector after layer i, and
predicts the labels of one hierarchy level: the lower levels of the hierarchy are read from lower layers
of the encoder. Which layers feed which level is plain data, a **layer map**: level n (1-based) -> the
layers (1-based; layer 0 would be the embeddings) whose [CLS] vectors are concatenated into that level's
classifier. The five variants of the paper, for 12 layers and 6 levels:

    FLAT        every level from layer 12 (one classifier over all labels, cut by level)
    LAST-SIX    L1..L6 from layers 7..12
    ONE-BY-ONE  L1..L6 from layers 2, 4, ..., 12 (odd layers only trained indirectly)
    IN-PAIRS    L1..L6 from the pairs (1,2), (3,4), ..., (11,12), concatenated
    HYBRID      layers 1-3 untied; L1 from 4, L2 from 5, L3..L5 from (6,7), (8,9), (10,11), L6 from 12

The rule for other depths (N layers, K levels), which gives exactly the table above at N = 12, K = 6:
`spread(layers, K)` cuts N layers into K consecutive groups as equal as possible (group k holds layers
ceil((k-1) N / K) + 1 .. ceil(k N / K); with fewer layers than levels, group k is the single layer
ceil(k N / K)). FLAT: every level reads layer N. LAST-SIX: the last min(K, N) layers spread over the
levels, each its group's last layer. ONE-BY-ONE: all N layers spread, each level its group's last layer.
IN-PAIRS: all N spread, each level its whole group. HYBRID: the first N // 4 layers untied; L1 reads the
first of the rest, L2 the second, the last level layer N, and the levels between spread the layers between
(IN-PAIRS-style); fewer than 3 levels: L1 the first, then layer N; nothing between: layer N; a 1-layer
model: the first again.

Each level's loss is its mean binary cross-entropy weighted by |L_n| / |L|, so with one classifier per
level the weighted sum is exactly the flat mean BCE over all labels (tests/test_structured.py checks it).

Shape legend: B batch, C hidden size, K_n labels on level n.

Read next: ../hierarchical.py.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from minbert import metrics

VARIANTS = ("flat", "last-six", "one-by-one", "in-pairs", "hybrid")
LayerMap = tuple[tuple[int, ...], ...]  # index n - 1: the layers (1-based) that level n reads


def spread(layers: Sequence[int], k: int) -> list[tuple[int, ...]]:
    """Cut `layers` into k consecutive groups as equal as possible (shared single layers if too few)."""
    n = len(layers)
    if n == 0 or k < 1:
        raise ValueError(f"cannot spread {n} layer(s) over {k} group(s)")
    if n < k:
        return [(layers[math.ceil(j * n / k) - 1],) for j in range(1, k + 1)]
    return [tuple(layers[math.ceil((j - 1) * n / k):math.ceil(j * n / k)]) for j in range(1, k + 1)]


def layer_map(variant: str, num_layers: int, num_levels: int) -> LayerMap:
    """The layers each level reads, for a named variant (see the module docstring for the rule)."""
    layers = list(range(1, num_layers + 1))
    if num_layers < 1 or num_levels < 1:
        raise ValueError(f"need at least one layer and one level, got {num_layers} and {num_levels}")
    if variant == "flat":
        return tuple((num_layers,) for _ in range(num_levels))
    if variant == "last-six":
        return tuple(group[-1:] for group in spread(layers[-num_levels:], num_levels))
    if variant == "one-by-one":
        return tuple(group[-1:] for group in spread(layers, num_levels))
    if variant == "in-pairs":
        return tuple(spread(layers, num_levels))
    if variant == "hybrid":
        rest = layers[num_layers // 4:]
        if num_levels == 1:
            return ((num_layers,),)
        if num_levels == 2:
            return ((rest[0],), (num_layers,))
        middle = rest[2:-1]
        between = (spread(middle, num_levels - 3) if middle and num_levels > 3
                   else [(num_layers,)] * (num_levels - 3))
        second = rest[1] if len(rest) > 1 else rest[0]
        return ((rest[0],), (second,), *between, (num_layers,))
    raise ValueError(f"unknown variant {variant!r}; choose from {VARIANTS}")


def parse_layer_map(text: str, num_layers: int, num_levels: int) -> LayerMap:
    """--layer-map "1:4;2:5;3:6,7": level:layers for every level, layers 1-based."""
    found: dict[int, tuple[int, ...]] = {}
    try:
        for item in text.split(";"):
            level, layers = item.split(":")
            if int(level) in found:
                raise ValueError(f"the layer map names level {int(level)} twice")
            found[int(level)] = tuple(int(x) for x in layers.split(","))
    except ValueError as error:
        if "twice" in str(error):
            raise
        raise ValueError(f"a layer map is 'level:layer,layer;level:layer...', got {text!r}") from None
    if sorted(found) != list(range(1, num_levels + 1)):
        raise ValueError(f"the layer map must name each level 1..{num_levels} once, "
                         f"got levels {sorted(found)}")
    bad = sorted({x for layers in found.values() for x in layers if not 1 <= x <= num_layers})
    if bad:
        raise ValueError(f"layers {bad} do not exist: the model has layers 1..{num_layers}")
    return tuple(found[n] for n in range(1, num_levels + 1))


def describe_layer_map(layers: LayerMap) -> str:
    return ", ".join(f"L{n}<-{'+'.join(map(str, group))}" for n, group in enumerate(layers, start=1))


class StructuredClassifier(nn.Module):
    """One linear classifier per level over the concatenated [CLS] vectors of its layers."""

    def __init__(self, hidden_size: int, level_sizes: Sequence[int], layers: LayerMap,
                 dropout: float = 0.1) -> None:
        super().__init__()
        if len(level_sizes) != len(layers):
            raise ValueError(f"{len(level_sizes)} levels but a layer map for {len(layers)}")
        self.layers = layers
        self.dropout = nn.Dropout(dropout)
        self.classifiers = nn.ModuleList(nn.Linear(len(group) * hidden_size, size)
                                         for group, size in zip(layers, level_sizes))

    @torch.no_grad()
    def init_biases_to_priors(self, targets: Sequence[torch.Tensor]) -> None:
        """Start each label's bias at the log-odds of its training frequency, so that sigmoid(b_k) = p_k.

        With nn.Linear's near-zero biases, the first many steps of BCE over hundreds of rare labels only learn
        that every label is rare (the same push for every document); starting at the priors leaves the
        gradient with what tells documents apart (Lin et al. 2017, "Focal Loss", section 4.1, use the same
        start). targets: per level, the training set's (N, K_n) multi-hot matrix. Frequencies are smoothed
        ((count + 0.5) / (N + 1)) so that a label never seen in training gets a finite bias.
        """
        for classifier, t in zip(self.classifiers, targets):
            p = (t.sum(dim=0) + 0.5) / (t.size(0) + 1)
            classifier.bias.copy_(torch.log(p) - torch.log1p(-p))

    def forward(self, hidden_states: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """hidden_states: the encoder's L + 1 outputs (B, T, C), embeddings first. Returns logits per level
        (B, K_n)."""
        cls = [h[:, 0] for h in hidden_states]  # c_i: (B, C) per layer
        return [classifier(self.dropout(torch.cat([cls[i] for i in group], dim=-1)))
                for classifier, group in zip(self.classifiers, self.layers)]


def level_weighted_bce(logits: Sequence[torch.Tensor], targets: Sequence[torch.Tensor]) -> torch.Tensor:
    """sum over levels of |L_n| / |L| times the level's mean BCE. logits, targets: (B, K_n) per level."""
    total = sum(t.size(-1) for t in targets)
    return sum(t.size(-1) / total * F.binary_cross_entropy_with_logits(x, t.to(x.dtype))
               for x, t in zip(logits, targets))


def level_targets(label_sets: Sequence[frozenset[str]],
                  levels: Sequence[Sequence[str]]) -> list[torch.Tensor]:
    """Multi-hot targets per level: (B, K_n), column order = the level's sorted labels."""
    targets = []
    for level in levels:
        index = {label: k for k, label in enumerate(level)}
        t = torch.zeros(len(label_sets), len(level))
        for row, labels in enumerate(label_sets):
            for label in labels:
                if label in index:
                    t[row, index[label]] = 1.0
        targets.append(t)
    return targets


def r_precision_report(scores: Sequence[np.ndarray], targets: Sequence[np.ndarray]) -> dict[str, float]:
    """R-Precision per level (documents with a gold label on it), micro (all labels flat), macro (mean of
    levels).

    scores, targets: per level, (N, K_n). Also reports how many documents each level's number averages.
    """
    report: dict[str, float] = {}
    levels = []
    for n, (s, t) in enumerate(zip(scores, targets), start=1):
        value, count = metrics.mean_r_precision(s, t)
        report[f"level{n}"] = value
        report[f"level{n}_documents"] = count
        if count:
            levels.append(value)
    report["micro"], _ = metrics.mean_r_precision(np.concatenate(scores, axis=1),
                                                  np.concatenate(targets, axis=1))
    report["macro"] = float(np.mean(levels)) if levels else 0.0
    return report
