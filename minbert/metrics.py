"""Evaluation metrics: accuracy, F1, Matthews correlation, Pearson and Spearman correlation, R-Precision.

Plain NumPy, so a student can check each against its textbook definition; tests compare them with
hand-worked examples and with SciPy/scikit-learn formulas.

Read next: ../optim/adamw.py (the optimizer that trains all of it).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

ArrayLike = Sequence[float] | np.ndarray


def _pair(predictions: ArrayLike, gold: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    p, g = np.asarray(predictions), np.asarray(gold)
    if p.shape != g.shape:
        raise ValueError(f"predictions have shape {p.shape} but gold labels {g.shape}")
    if p.size == 0:
        raise ValueError("cannot score an empty set of predictions")
    return p, g


def accuracy(predictions: ArrayLike, gold: ArrayLike) -> float:
    """Fraction of predictions equal to the gold label."""
    p, g = _pair(predictions, gold)
    return float((p == g).mean())


def f1_binary(predictions: ArrayLike, gold: ArrayLike, positive: int = 1) -> float:
    """F1 of the positive class: 2 P R / (P + R); 0 when there are no true positives."""
    p, g = _pair(predictions, gold)
    tp = float(np.sum((p == positive) & (g == positive)))
    if tp == 0:
        return 0.0
    precision, recall = tp / np.sum(p == positive), tp / np.sum(g == positive)
    return float(2 * precision * recall / (precision + recall))


def matthews_corrcoef(predictions: ArrayLike, gold: ArrayLike) -> float:
    """Matthews correlation for binary labels (GLUE's CoLA metric); 0 when a margin is empty."""
    p, g = _pair(predictions, gold)
    tp = float(np.sum((p == 1) & (g == 1)))
    tn = float(np.sum((p == 0) & (g == 0)))
    fp = float(np.sum((p == 1) & (g == 0)))
    fn = float(np.sum((p == 0) & (g == 1)))
    denominator = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    return float((tp * tn - fp * fn) / denominator) if denominator else 0.0


def pearson(predictions: ArrayLike, gold: ArrayLike) -> float:
    """Pearson's r; 0 when either side is constant (r is undefined there)."""
    p, g = _pair(predictions, gold)
    p, g = p.astype(np.float64) - p.mean(), g.astype(np.float64) - g.mean()
    denominator = np.sqrt((p * p).sum() * (g * g).sum())
    return float((p * g).sum() / denominator) if denominator else 0.0


def rank_with_ties(values: np.ndarray) -> np.ndarray:
    """Ranks 1..n, tied values sharing the mean of their ranks (as Spearman's rho requires)."""
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values), dtype=np.float64)
    ranks[order] = np.arange(1, len(values) + 1)
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=ranks)
    return sums[inverse] / counts[inverse]


def spearman(predictions: ArrayLike, gold: ArrayLike) -> float:
    """Spearman's rho: Pearson's r of the ranks."""
    p, g = _pair(predictions, gold)
    return pearson(rank_with_ties(p), rank_with_ties(g))


def confusion_matrix(predictions: ArrayLike, gold: ArrayLike, num_classes: int) -> np.ndarray:
    """(num_classes, num_classes) counts; row = gold class, column = predicted class."""
    p, g = _pair(predictions, gold)
    matrix = np.zeros((num_classes, num_classes), dtype=np.int64)
    np.add.at(matrix, (g.astype(int), p.astype(int)), 1)
    return matrix


def top_labels(scores: ArrayLike, r: int) -> np.ndarray:
    """The indices of the r highest scores, best first; ties go to the lower index (a stable order, so the
    result does not depend on the platform). scores: (K,) real numbers of any dtype (floats of any
    precision, integers, bools), compared as float64: negating unsigned integers would wrap around and
    bools cannot be negated. Returns (min(r, K),) integers."""
    # Hint: sort the labels by score, highest first, keeping equal scores in label order; negating the
    # scores turns numpy's ascending sort into a descending one without reversing the order of ties.
    # BEGIN SOLUTION
    return np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")[:r]
    # END SOLUTION


def r_precision(scores: ArrayLike, gold: ArrayLike) -> float:
    """R-Precision of one document: of the R labels scored highest, the fraction that are gold.

    scores: (K,) a score per label; gold: (K,) 1 for the document's gold labels, else 0; R = the number
    of gold labels. Undefined when R = 0 (callers leave such documents out). Ties in the scores are broken
    by label order (a stable sort), so the result does not depend on the platform.
    """
    s, g = _pair(scores, gold)
    r = int(np.sum(g > 0))
    if r == 0:
        raise ValueError("R-Precision is undefined for a document without gold labels")
    # Hints: 1. R is the number of gold labels (r above), not the number of labels K.
    #        2. take the R labels scored highest (`top_labels`, with its tie rule) and count the gold ones
    #           among them; the result is that count over R, a float in [0, 1].
    # BEGIN SOLUTION
    return float(np.sum(g[top_labels(s, r)] > 0) / r)  # of the R best-scored labels, the gold ones
    # END SOLUTION


def mean_r_precision(scores: ArrayLike, gold: ArrayLike) -> tuple[float, int]:
    """Mean R-Precision over the documents (rows) that have a gold label, and how many those are.

    scores, gold: (N, K). Rows with no gold label (a document with no label on this level) are left
    out; the mean is 0.0 when no row is left (with count 0, so a caller can tell).
    """
    if len(scores) == 0 and len(gold) == 0:
        return 0.0, 0
    s, g = _pair(scores, gold)
    rows = [i for i in range(len(g)) if np.any(g[i] > 0)]
    if not rows:
        return 0.0, 0
    return float(np.mean([r_precision(s[i], g[i]) for i in rows])), len(rows)

