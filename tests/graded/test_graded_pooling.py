"""Graded: mean_pool, the average of the real tokens' vectors (padding excluded)."""

from __future__ import annotations

import pytest
import torch
from graded_helpers import check_close, check_that, fail, ragged_batch

from minbert.pooling import mean_pool

pytestmark = pytest.mark.component("mean_pool")

AXES = dict(B=3, T=6, C=5)  # ragged_batch()'s sizes, for the crashes module

HIDDEN = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]],
                       [[-1.0, 0.0], [5.0, 6.0], [7.0, -8.0]]])  # (B=2, T=3, C=2)
MASK = torch.tensor([[1, 1, 0], [1, 1, 1]])
COUNT = "divide by the number of real tokens, not the padded length"


def check_attached(pooled) -> None:
    """The mean of token vectors that require a gradient is a tensor that passes the gradient on."""
    __tracebackhide__ = True
    if not isinstance(pooled, torch.Tensor):
        fail(f"mean_pool should return a tensor (B, C), got {type(pooled).__name__}")
    if not pooled.requires_grad:
        fail("the mean of token vectors that require a gradient does not: no gradient reached the token "
             "vectors (a .detach(), .data, .item() or numpy on the way cuts the graph), so fine-tuning "
             "through mean pooling would never reach BERT")


@pytest.mark.points(2)
@pytest.mark.axes()  # HIDDEN is (2, 3, 2), not ragged_batch()'s sizes, and B = C: a crash shows plain numbers
def test_mean_pool_by_hand():
    what = "the mean of [[1, 2], [3, 4], padding] and of three tokens"
    check_close(mean_pool(HIDDEN, MASK), torch.tensor([[2.0, 3.0], [11 / 3, -2 / 3]]), what, [
        (torch.tensor([[4 / 3, 2.0], [11 / 3, -2 / 3]]), f"row 0 summed its 2 real tokens but divided by 3 "
         f"positions: {COUNT}"),
        (HIDDEN.mean(dim=1), "the padding token counted: leave it out of the sum and of the count"),
        (torch.tensor([[52.0, 53.0], [11 / 3, -2 / 3]]), "row 0 summed the padding vector (100, 100) and "
         "divided by its 2 real tokens: padding must count neither in the sum (multiply the vectors by the "
         "mask) nor in the count"),
        (torch.tensor([[2.0, 3.0], [11 / 2, -2 / 2]]), "row 1 was divided by 2: count each row's own real "
         "tokens")])


@pytest.mark.points(1)
def test_padding_vectors_do_not_matter():
    hidden, mask, changed = ragged_batch()
    check_that(torch.allclose(mean_pool(changed, mask), mean_pool(hidden, mask), atol=1e-5, rtol=1e-5),
               "setting the padding vectors to 1e4 changed the mean: padding must count neither in the sum "
               "(multiply the vectors by the mask) nor in the number of tokens")
    check_close(mean_pool(hidden, mask)[1], hidden[1, :4].mean(0), "the mean of a row with "
                                                                   "4 real tokens of 6",
                [(hidden[1, :4].sum(0) / 6, f"it was divided by 6: {COUNT}")])
    one = mean_pool(hidden[1:2], mask[1:2])  # a batch of one keeps its batch axis: (1, C)
    check_close(one, hidden[1, :4].mean(0)[None], "the mean of a batch of one sequence, (B, C) = (1, 5)",
                [(hidden[1, :4].mean(0), "a batch of one lost its batch axis (a .squeeze()?): mean_pool "
                  "returns (B, C), here (1, 5)")])


@pytest.mark.points(1)
def test_mean_pool_is_differentiable_and_skips_padding():
    hidden = torch.randn(2, 4, 3, requires_grad=True)
    pooled = mean_pool(hidden, torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1]]))
    check_attached(pooled)
    pooled.sum().backward()
    check_close(hidden.grad[0, :, 0], torch.tensor([0.5, 0.5, 0.0, 0.0]),
                "the gradient of a 2-token mean over its 4 positions (2 real)")
    check_close(hidden.grad[1, :, 0], torch.full((4,), 0.25), "the gradient of a 4-token mean")


@pytest.mark.points(1)
def test_a_row_of_padding_only_gives_the_zero_vector():
    hidden = torch.randn(3, 4, 2, requires_grad=True)
    mask = torch.tensor([[1, 1, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1]])  # row 1: no real token (an empty chunk)
    pooled = mean_pool(hidden, mask)
    check_attached(pooled)
    if not torch.isfinite(pooled).all():
        fail("a row with no real token gives NaN or inf: its count of real tokens is 0, and 0 / 0 is NaN; "
             "keep the count at least 1, so that the row's empty sum (the zero vector) comes out as it is")
    check_close(pooled, torch.stack([hidden[0, :2].mean(0), torch.zeros(2), hidden[2].mean(0)]),
                "the means of a batch whose row 1 is all padding (row 1: the zero vector)")
    pooled.sum().backward()
    if not torch.isfinite(hidden.grad).all():
        fail("the gradient through a row of padding only is NaN or inf: 0 / 0 in the backward pass")
