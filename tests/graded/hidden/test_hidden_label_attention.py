"""Graded, hidden: merge_label_scores with many labels and heads against a loop written per key."""

from __future__ import annotations

import pytest
import torch
from graded_helpers import check_close, expectation

from minbert.label_attention import merge_label_scores

pytestmark = [pytest.mark.component("label_attention"), pytest.mark.visibility("after_published")]


@pytest.mark.points(1)
def test_many_labels_against_a_loop_over_keys():
    scores, labels = torch.randn(2, 4, 5, 5), torch.randn(2, 4, 9, 5)
    check_close(merge_label_scores(scores, labels), by_a_loop(scores, labels),
                "the merged scores of 9 labels over 4 heads")


@expectation
def by_a_loop(scores, labels):
    expected = scores.clone()
    for key in range(1, scores.size(-1)):
        for label in range(labels.size(2)):
            expected[:, :, 0, key] = torch.where(labels[:, :, label, key] > expected[:, :, 0, key],
                                                 labels[:, :, label, key], expected[:, :, 0, key])
    return expected
