"""Graded: R-Precision, the metric of hierarchical classification (Manginas et al. 2020).

For one document with R gold labels: rank the labels by score, take the R best, and count the fraction of
them that are gold.
"""

from __future__ import annotations

import numpy as np
import pytest

from tasks.evaluation.metrics import mean_r_precision, r_precision

pytestmark = pytest.mark.component("r_precision")


@pytest.mark.points(2)
def test_by_hand():
    scores = np.array([0.9, 0.1, 0.8, 0.3, 0.7])
    # R = 2: top 2 are labels 0, 2
    assert r_precision(scores, np.array([1, 0, 0, 1, 0])) == pytest.approx(0.5)
    assert r_precision(scores, np.array([0, 0, 1, 0, 0])) == pytest.approx(0.0)  # R = 1: top 1 is label 0
    assert r_precision(scores, np.array([1, 0, 1, 0, 1])) == pytest.approx(1.0)  # R = 3: top 3 are 0, 2, 4
    assert r_precision(scores, np.array([0, 1, 0, 1, 0])) == pytest.approx(0.0)


@pytest.mark.points(1)
def test_r_is_the_number_of_gold_labels_not_the_number_of_labels():
    scores = np.array([0.2, 0.9, 0.1, 0.3, 0.4, 0.5])
    assert r_precision(scores, np.array([0, 1, 0, 0, 0, 1])) == pytest.approx(1.0)
    assert r_precision(scores, np.array([0, 1, 0, 1, 0, 1])) == pytest.approx(2 / 3)  # top 3: 1, 5, 4


@pytest.mark.points(1)
def test_mean_over_documents_skips_those_without_gold_labels():
    scores = np.array([[0.9, 0.1, 0.5], [0.2, 0.8, 0.1], [0.3, 0.3, 0.9]])
    gold = np.array([[1, 0, 0], [1, 0, 0], [0, 0, 0]])
    assert mean_r_precision(scores, gold) == (pytest.approx(0.5), 2)
