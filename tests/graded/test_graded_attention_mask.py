"""Graded: extended_attention_mask, the (B, T) 1/0 padding mask made additive and broadcastable once."""

from __future__ import annotations

import pytest
import torch
from graded_helpers import check_close, expectation, fail

from minbert.model import extended_attention_mask

pytestmark = pytest.mark.component("attention_mask")

MASK = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])  # (B=2, T=4)
INVERTED = ("real tokens got the large negative number and padding got 0: a 1 (token) must become 0, a 0 "
            "(padding) the most negative number")


MINUS_INF = ("padding got -inf: use the dtype's most negative finite number, not -inf (a row of all padding "
             "would be NaN after the softmax)")


@expectation
def by_hand(dtype: torch.dtype) -> torch.Tensor:
    low = torch.finfo(dtype).min
    return torch.tensor([[0.0, 0.0, 0.0, low], [0.0, 0.0, low, low]], dtype=dtype).view(2, 1, 1, 4)


@pytest.mark.points(2)
def test_mask_by_hand_is_zero_for_tokens_and_most_negative_for_padding():
    mask = extended_attention_mask(MASK, torch.float32)
    if isinstance(mask, torch.Tensor) and mask.shape == (2, 1, 4):
        fail("the mask has shape (B, 1, T) = (2, 1, 4): the heads axis is missing. Against the scores (B, H, "
             "T, T) it lines up from the right as (1, B, 1, T), so the batch falls on the heads; it must be "
             "(B, 1, 1, T), one axis of size 1 for the heads and one for the queries")
    if isinstance(mask, torch.Tensor) and mask.shape != (2, 1, 1, 4) and mask.numel() == 8:
        fail(f"the mask has shape {tuple(mask.shape)}, expected (B, 1, 1, T) = (2, 1, 1, 4): the keys are "
             "the last axis, so one row of key scores broadcasts over every head and every query")
    low = torch.finfo(torch.float32).min
    check_close(mask, by_hand(torch.float32), "the additive mask of [[1, 1, 1, 0], [1, 1, 0, 0]]", [
        ((MASK * low).view(2, 1, 1, 4).float(), INVERTED),
        ((MASK - 1).view(2, 1, 1, 4).float(), "padding got -1, far too little to silence it after the "
         "softmax: use the most negative finite number of the dtype"),
        (torch.zeros(2, 1, 1, 4).masked_fill(MASK.view(2, 1, 1, 4) == 0, float("-inf")), MINUS_INF),
    ], atol=0, rtol=1e-6)


@pytest.mark.points(1)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_mask_is_in_the_requested_dtype_with_its_own_minimum(dtype):
    mask = extended_attention_mask(MASK, dtype)
    if not isinstance(mask, torch.Tensor) or mask.dtype != dtype:
        fail(f"asked for {dtype}, got {getattr(mask, 'dtype', type(mask).__name__)}: build the mask in the "
             "dtype the scores will have")
    if torch.isinf(mask).any() and torch.isinf(extended_attention_mask(MASK, torch.float64)).any():
        fail(f"the {dtype} mask holds -inf, as it does in float64: {MINUS_INF}")
    if torch.isinf(mask).any():
        fail(f"the {dtype} mask holds -inf: float32's minimum does not fit in {dtype}; use the minimum of "
             f"{dtype} itself")
    check_close(mask, by_hand(dtype), f"the {dtype} mask", atol=0, rtol=1e-3)


@pytest.mark.points(1)
def test_after_the_softmax_padding_gets_zero_and_an_all_padding_row_no_nan():
    mask = extended_attention_mask(torch.tensor([[1, 1, 0], [0, 0, 0]]), torch.float32)
    scores = torch.randn(2, 2, 3, 3) * 5  # (B, H, T, T)
    probs = (scores + mask).softmax(dim=-1)
    if torch.isnan(probs).any():
        fail("a sequence that is all padding gives NaN after the softmax: use a finite number (not -inf) for "
             "padding, and 0 (not NaN) for tokens")
    if probs[0, :, :, 2].max() > 0:
        fail(f"the padding key received probability {probs[0, :, :, 2].max().item():.2g} after the softmax: "
             "the mask must be large and negative there")
    check_close(probs[0, :, :, :2].sum(-1), torch.ones(2, 3),
                "the real keys' share of each query's probability")
