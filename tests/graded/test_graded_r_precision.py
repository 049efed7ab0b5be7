"""Graded: R-Precision, the metric of hierarchical classification (Manginas et al. 2020).

For one document with R gold labels: rank the labels by score, take the R best, and count the fraction of
them that are gold.
"""

from __future__ import annotations

import numpy as np
import pytest
from graded_helpers import check_value, fail

from tasks.evaluation.metrics import mean_r_precision, r_precision

pytestmark = pytest.mark.component("r_precision")


def mistakes(scores: np.ndarray, gold: np.ndarray) -> list[tuple[float, str]]:
    """What the common mistakes give on this document, computed with np.sort-free ranking."""
    r = int(gold.sum())
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    low_first = sorted(range(len(scores)), key=lambda i: (scores[i], i))
    hits = sum(gold[i] for i in order[:r])
    return [(sum(gold[i] for i in low_first[:r]) / r,
             "that is the R lowest-scored labels: rank the highest first"),
            (hits / len(scores), f"it was divided by the number of labels ({len(scores)}) instead of R "
             f"({r}), the number of gold labels"),
            (hits, "the count of gold labels among the R best was not divided by R")]


def check(scores, gold, expected, what):
    scores, gold = np.array(scores), np.array(gold)
    check_value(r_precision(scores, gold), expected, f"R-Precision of {what}", mistakes(scores, gold))


@pytest.mark.points(2)
def test_by_hand():
    scores = [0.9, 0.1, 0.8, 0.3, 0.7]
    check(scores, [1, 0, 0, 1, 0], 0.5, "scores (0.9, 0.1, 0.8, 0.3, 0.7), gold {0, 3} (top 2: labels 0, 2)")
    check(scores, [0, 0, 1, 0, 0], 0.0, "the same scores, gold {2} (top 1: label 0)")
    check(scores, [1, 0, 1, 0, 1], 1.0, "the same scores, gold {0, 2, 4} (top 3: labels 0, 2, 4)")
    check(scores, [0, 1, 0, 1, 0], 0.0, "the same scores, gold {1, 3} (top 2: labels 0, 2)")


@pytest.mark.points(1)
def test_r_is_the_number_of_gold_labels_not_the_number_of_labels():
    scores = [0.2, 0.9, 0.1, 0.3, 0.4, 0.5]
    check(scores, [0, 1, 0, 0, 0, 1], 1.0, "scores (0.2, 0.9, 0.1, 0.3, 0.4, 0.5), gold {1, 5}")
    check(scores, [0, 1, 0, 1, 0, 1], 2 / 3, "the same scores, gold {1, 3, 5} (top 3: labels 1, 5, 4)")


@pytest.mark.points(1)
def test_mean_over_documents_skips_those_without_gold_labels():
    scores = np.array([[0.9, 0.1, 0.5], [0.2, 0.8, 0.1], [0.3, 0.3, 0.9]])
    gold = np.array([[1, 0, 0], [1, 0, 0], [0, 0, 0]])
    mean, count = mean_r_precision(scores, gold)
    if count != 2:
        fail(f"mean_r_precision counted {count} documents; two of the three have gold labels")
    check_value(mean, 0.5, "the mean R-Precision of documents with R-Precision 1 and 0")
