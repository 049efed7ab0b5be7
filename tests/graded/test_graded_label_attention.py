"""Graded: merge_label_scores, the heart of label-embedding attention (Wang et al. 2020, eq. 7-8).

The [CLS] query row's scores to every other token become the maximum of its own score and every label's
score for that token; the [CLS] -> [CLS] score and the other rows stay as they were.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from graded_helpers import check_close, fail
from safetensors.torch import load_file

from minbert.label_attention import merge_label_scores

pytestmark = pytest.mark.component("label_attention")

CLS_CLS = ("the [CLS] -> [CLS] score changed: only the [CLS] row's scores to the other tokens take the label "
           "maximum")
STORED = Path(__file__).resolve().parent / "reference" / "label_attention.safetensors"
SUMMED = "the scores were summed; each takes the maximum of the [CLS] score and the labels' scores (eq. 8)"


@pytest.mark.points(2)
def test_merge_by_hand():
    scores = torch.tensor([[0.0, 1.0, 2.0], [5.0, 6.0, 7.0], [8.0, 9.0, 10.0]])[None, None]  # (1, 1, 3, 3)
    labels = torch.tensor([[9.0, 0.5, 3.0], [9.0, 4.0, -1.0]])[None, None]  # (1, 1, M=2, 3)
    merged = merge_label_scores(scores, labels)
    check_close(merged, torch.tensor([[0.0, 4.0, 3.0], [5.0, 6.0, 7.0], [8.0, 9.0, 10.0]])[None, None],
                "the merged scores of a 3-token example with 2 labels", [
                    (torch.tensor([[9.0, 4.0, 3.0], [5.0, 6.0, 7.0], [8.0, 9.0, 10.0]])[None, None], CLS_CLS),
                    (torch.tensor([[0.0, 5.5, 4.0], [5.0, 6.0, 7.0], [8.0, 9.0, 10.0]])[None, None], SUMMED)])


@pytest.mark.points(1)
def test_only_the_cls_row_beyond_cls_changes_and_the_input_is_kept():
    t = load_file(str(STORED))  # made by a staff script
    scores, labels = t["scores"], t["label_scores"]
    original = scores.clone()
    merged = merge_label_scores(scores, labels)
    if not torch.equal(scores, original):
        fail("merge_label_scores changed its input scores in place: build a new tensor")
    check_close(merged[:, :, 1:], scores[:, :, 1:], "the rows of the other queries (they must not change)")
    if not torch.allclose(merged[:, :, 0, 0], scores[:, :, 0, 0]):
        fail(CLS_CLS)
    check_close(merged[:, :, 0, 1:], t["merged"][:, :, 0, 1:], "the [CLS] row's scores to the other tokens "
                "(stored scores of 6 tokens and 4 labels)", [
                    (t["summed"][:, :, 0, 1:], SUMMED),
                    (labels[:, :, :, 1:].max(dim=2).values, "they are the labels' maximum alone: S[0, j] "
                     "itself is one of the candidates, max(S[0, j], A_l[1, j], ..., A_l[M, j])")])


@pytest.mark.points(1)
def test_minus_infinity_labels_change_nothing():
    scores = torch.randn(2, 2, 5, 5)
    merged = merge_label_scores(scores, torch.full((2, 2, 3, 5), float("-inf")))
    check_close(merged, scores, "the scores merged with labels all at -inf (nothing may change)")


@pytest.mark.points(1)
def test_gradient_reaches_only_the_winning_label():
    scores = torch.zeros(1, 1, 3, 3, requires_grad=True)
    # label 0 wins key 1, 1 key 2
    labels = torch.tensor([[[[0.0, 2.0, -1.0], [0.0, 1.0, 3.0]]]], requires_grad=True)
    merge_label_scores(scores, labels)[0, 0, 0].sum().backward()
    check_close(labels.grad[0, 0], torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]),
                "the labels' gradient (only the winning label of each key gets one)")
    check_close(scores.grad[0, 0, 0], torch.tensor([1.0, 0.0, 0.0]), "the [CLS] row's gradient")
