"""Graded: max_pool (the element-wise maximum over the real tokens) and pool's "cls" choice (the [CLS]
vector)."""

from __future__ import annotations

import pytest
import torch
from graded_helpers import check_close, fail, ragged_batch

from minbert.model import BertModelOutput
from minbert.pooling import max_pool, pool

pytestmark = pytest.mark.component("max_cls_pool")

AXES = dict(B=3, T=6, C=5)  # ragged_batch()'s sizes, for the crashes module

HIDDEN = torch.tensor([[[1.0, -2.0], [3.0, -4.0], [100.0, 0.0]],
                       [[-1.0, -5.0], [-3.0, -6.0], [-7.0, -8.0]]])  # (B=2, T=3, C=2)
MASK = torch.tensor([[1, 1, 0], [1, 1, 1]])


@pytest.mark.points(2)
@pytest.mark.todo("max_pool")
def test_max_pool_by_hand_with_negative_features_and_padding():
    what = "the maximum of [[1, -2], [3, -4], padding (100, 0)] and of a full row of negative values"
    check_close(max_pool(HIDDEN, MASK), torch.tensor([[3.0, -2.0], [-1.0, -5.0]]), what, [
        (torch.tensor([[100.0, 0.0], [-1.0, -5.0]]), "the padding token won the maximum: leave padding out"),
        (torch.tensor([[3.0, 0.0], [-1.0, -5.0]]), "row 0's second feature is 0.0, the value padding was "
         "given: padding must never win, even where every real value is negative"),
    ])


@pytest.mark.points(1)
@pytest.mark.todo("max_pool")
def test_max_pool_ignores_padding_values():
    hidden, mask, changed = ragged_batch()
    check_close(max_pool(changed, mask),
                torch.stack([row[:int(n)].amax(0) for row, n in zip(hidden, mask.sum(1))]),
                "the maximum with padding set to 1e4 (it must not change)",
                [(changed.amax(1), "the padding vectors (1e4) won the maximum: leave padding out")])
    check_close(max_pool(hidden, mask)[2], hidden[2, 0],
                "the maximum of a row with one real token (that token)")


@pytest.mark.points(1)
@pytest.mark.todo("max_pool")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_max_pool_in_half_precision_with_a_row_of_padding_only(dtype):
    # Mixed precision runs the pooling in these dtypes; a fill value written for float32 may not fit.
    hidden = torch.randn(3, 6, 5).to(dtype)
    mask = torch.tensor([[1] * 6, [1] * 2 + [0] * 4, [0] * 6])
    got = max_pool(hidden, mask)
    check_close(got[:2], torch.stack([hidden[0].amax(0), hidden[1, :2].amax(0)]),
                f"the maximum of the real tokens in {dtype}", atol=0, rtol=0)
    if got.dtype != dtype or not torch.isfinite(got[2]).all():
        fail(f"a row of padding only gave {got[2].tolist()} ({got.dtype}) from {dtype} vectors: it must "
             f"stay a finite {dtype} (fill padding with torch.finfo(dtype).min, which every dtype can hold)")


@pytest.mark.points(1)
@pytest.mark.todo("pool")
def test_cls_pooling_is_the_first_tokens_vector():
    hidden = torch.randn(3, 5, 4)
    output = BertModelOutput(hidden, torch.randn(3, 4), None, None)
    got = pool(output, torch.ones(3, 5, dtype=torch.long), "cls")
    for position in range(1, 5):
        if isinstance(got, torch.Tensor) and got.shape == (3, 4) and torch.equal(got, hidden[:, position]):
            fail(f'pool(..., "cls") returned token {position}\'s vector: [CLS] is the first token, '
                 'position 0')
    if isinstance(got, torch.Tensor) and got.shape == (3, 4) and torch.equal(got, output.pooler_output):
        fail('pool(..., "cls") returned the pooler output (that is "pooler"): "cls" is the [CLS] '
             'token\'s vector')
    check_close(got, hidden[:, 0], 'pool(output, mask, "cls")')
