"""Graded: top_labels and R-Precision, the metric of hierarchical classification (Manginas et al. 2020).

For one document with R gold labels: rank the labels by score, take the R best (top_labels), and count the
fraction of them that are gold (r_precision).
"""

from __future__ import annotations

import numpy as np
import pytest
from graded_helpers import check_equal, check_value, expectation, fail

from minbert.metrics import mean_r_precision, r_precision, top_labels

pytestmark = [pytest.mark.component("r_precision"), pytest.mark.todo("r_precision")]


TIES = ("ties must go to the lower label; reversing an ascending sort reverses the ties too (sort the "
        "negated scores, stably)")


@expectation
def mistakes(expected: float, r: int, k: int, low_first: float,
             positive: float = 1.0) -> list[tuple[float, str]]:
    """What the common mistakes give, from the answer worked by hand (and those of the R lowest-scored and
    of counting the R best whose score is positive, 1 where every score is)."""
    return [(low_first, "that is the R lowest-scored labels: rank the highest first"),
            (positive, "every one of the R best whose score is positive was counted: count the gold labels "
             "among the R best (gold[top] > 0), not their scores"),
            (1.0, "it is 1 whatever the scores: the R best were not taken by the scores (every gold label "
             "counted, or the labels ranked by the gold labels, top_labels of gold); count the gold labels "
             "among the R best-scored"),
            (expected * r / k, f"it was divided by the number of labels ({k}) instead of R ({r}), the "
             "number of gold labels"),
            (expected * r, "the count of gold labels among the R best was not divided by R"),
            (float(np.floor(expected)), "integer division (//) gives 0 unless every one of the R best is "
             "gold: R-Precision is a fraction in [0, 1]; divide with /")]


def check(scores, gold, what, *, expected, expected_low_first, expected_positive=1.0):
    """expected: worked by hand; expected_low_first: the answer for the R lowest-scored labels, also by hand;
    expected_positive: the count of the R best whose score is positive, over R."""
    scores, gold = np.array(scores), np.array(gold)
    check_value(r_precision(scores, gold), expected, f"R-Precision of {what}",
                mistakes(expected, int(gold.sum()), len(gold), expected_low_first, expected_positive))


def labels_of(top) -> list[int] | None:
    return [int(i) for i in np.asarray(top).reshape(-1)] if top is not None else None


def check_top(scores, r, what, *, expected, mistakes=()):
    check_equal(labels_of(top_labels(np.array(scores), r)), expected,
                f"top_labels of {what} (the {r} highest scores, best first)", mistakes)


@pytest.mark.points(1)
@pytest.mark.todo("top_labels")
def test_top_labels_by_hand_best_first():
    check_top([0.9, 0.1, 0.8, 0.3, 0.7], 3, "scores (0.9, 0.1, 0.8, 0.3, 0.7), r = 3", expected=[0, 2, 4],
              mistakes=[([1, 3, 4], "those are the lowest scores: rank the highest first"),
                        ([4, 2, 0], "the right labels, but worst first: the best comes first")])
    check_top([0.2, 0.6], 5, "scores (0.2, 0.6), r = 5 (more than there are labels)", expected=[1, 0])


@pytest.mark.points(1)
@pytest.mark.todo("top_labels")
def test_top_labels_takes_unsigned_integer_and_bool_scores():
    # The docstring's contract: any real dtype, compared as float64. Negated, uint8 scores wrap around
    # (-3 is 253) and bools raise a TypeError.
    check_top(np.array([3, 9, 3, 0], dtype=np.uint8), 2, "uint8 scores (3, 9, 3, 0), r = 2", expected=[1, 0],
              mistakes=[([3, 1], "negating unsigned integers wraps around (-3 is 253 in uint8): compare the "
                         "scores as float64, as the docstring says"), ([1, 2], TIES)])
    try:
        top = top_labels(np.array([False, True, True]), 2)
    except TypeError as error:
        fail(f"top_labels of bool scores (False, True, True) raised TypeError ({error}): bools cannot be "
             "negated; compare the scores as float64, as the docstring says")
    check_equal(labels_of(top), [1, 2], "top_labels of bool scores (False, True, True), r = 2")

@pytest.mark.points(1)
@pytest.mark.todo("top_labels")
def test_top_labels_breaks_ties_by_label_order():
    check_top([0.5, 0.9, 0.5, 0.5], 3, "scores (0.5, 0.9, 0.5, 0.5), r = 3", expected=[1, 0, 2],
              mistakes=[([1, 3, 2], TIES)])
    # numpy's default sort (introsort) keeps short runs of ties in order by chance, long ones not: 200
    # labels holding five scores, 40 ties each, as a label hierarchy's flat scores can. The best 40 (1.0) are
    # the labels i = 2 (mod 5), then 0.75 at i = 4 (mod 5)
    scores = (np.arange(200) * 7 % 5) / 4.0
    got = labels_of(top_labels(scores, 60))
    in_range = got is not None and len(got) == 60 and all(0 <= i < len(scores) for i in got)
    if in_range and got != sorted(got, key=lambda i: (-scores[i], i)) and all(
            scores[a] >= scores[b] for a, b in zip(got, got[1:])):
        fail("top_labels of 200 scores of five values (40 labels each), r = 60, gave the scores best first, "
             "but equal scores came out of label order: numpy's default sort is not stable on long arrays "
             "(it keeps a few ties in order by chance); pass kind=\"stable\"")
    check_top(scores, 60, "200 scores of five values (40 labels each), r = 60",
              expected=list(range(2, 200, 5)) + list(range(4, 100, 5)))


@pytest.mark.points(2)
def test_by_hand():
    # Every common mistake gives another number here: the top 3 are labels 0, 2, 1 (two gold), the lowest 3
    # labels 6, 3, 4 (one gold), and two of the top 3 scores are positive.
    check([0.6, -0.2, 0.1, -0.5, -0.4, -0.3, -0.6], [0, 1, 1, 0, 1, 0, 0],
          "scores (0.6, -0.2, 0.1, -0.5, -0.4, -0.3, -0.6), gold {1, 2, 4} (top 3: labels 0, 2, 1)",
          expected=2 / 3, expected_low_first=1 / 3, expected_positive=2 / 3)
    scores = [0.9, 0.1, 0.8, 0.3, 0.7]
    check(scores, [1, 0, 0, 1, 0], "scores (0.9, 0.1, 0.8, 0.3, 0.7), gold {0, 3} (top 2: labels 0, 2)",
          expected=0.5, expected_low_first=0.5)
    check(scores, [0, 0, 1, 0, 0], "the same scores, gold {2} (top 1: label 0)", expected=0.0,
          expected_low_first=0.0)
    check(scores, [1, 0, 1, 0, 1], "the same scores, gold {0, 2, 4} (top 3: labels 0, 2, 4)", expected=1.0,
          expected_low_first=1 / 3)
    check(scores, [0, 1, 0, 1, 0], "the same scores, gold {1, 3} (top 2: labels 0, 2)", expected=0.0,
          expected_low_first=1.0)


@pytest.mark.points(1)
def test_r_is_the_number_of_gold_labels_not_the_number_of_labels():
    scores = [0.2, 0.9, 0.1, 0.3, 0.4, 0.5]
    check(scores, [0, 1, 0, 0, 0, 1], "scores (0.2, 0.9, 0.1, 0.3, 0.4, 0.5), gold {1, 5}", expected=1.0,
          expected_low_first=0.0)
    check(scores, [0, 1, 0, 1, 0, 1], "the same scores, gold {1, 3, 5} (top 3: labels 1, 5, 4)",
          expected=2 / 3, expected_low_first=1 / 3)
    # Negative scores too: the top 3 are labels 4 (0.3), 2 (-0.1) and 1 (-0.2), two of them gold.
    scores, gold = np.array([-0.5, -0.2, -0.1, -0.9, 0.3]), np.array([1, 1, 1, 0, 0])
    check_value(r_precision(scores, gold), 2 / 3, "R-Precision of scores (-0.5, -0.2, -0.1, -0.9, 0.3), gold "
                "{0, 1, 2} (top 3: labels 4, 2, 1)", [
                    ] + mistakes(2 / 3, 3, 5, 2 / 3, positive=1 / 3))


@pytest.mark.points(1)
def test_mean_over_documents_skips_those_without_gold_labels():
    scores = np.array([[0.9, 0.1, 0.5], [0.2, 0.8, 0.1], [0.3, 0.3, 0.9]])
    gold = np.array([[1, 0, 0], [1, 0, 0], [0, 0, 0]])
    mean, count = mean_r_precision(scores, gold)
    check_value(count, 2, "the number of documents mean_r_precision counted (two of "
                          "the three have gold labels)")
    check_value(mean, 0.5, "the mean R-Precision of documents with R-Precision 1 and 0")
