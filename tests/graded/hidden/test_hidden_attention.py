"""Graded, hidden: eager_attention on other sizes against torch's nn.MultiheadAttention; gradcheck."""

from __future__ import annotations

import pytest
import torch
from graded_helpers import additive, check_close, fail
from torch import nn

from minbert.attention import eager_attention

pytestmark = [pytest.mark.component("attention"), pytest.mark.visibility("after_published"),
              pytest.mark.todo("eager_attention")]


@pytest.mark.points(2)
def test_heads_and_probabilities_match_torch_multihead_attention_head_by_head():
    B, H, T, D = 2, 3, 9, 5  # fewer value dimensions than keys: P @ V alone no longer pins P
    q, k, v = (torch.randn(B, H, T, D) * 2 for _ in range(3))
    padding_mask = torch.tensor([[1] * 9, [1] * 6 + [0] * 3])
    context, probs = eager_attention(q, k, v, additive(padding_mask), return_probs=True)
    if probs is None:
        fail("eager_attention(..., return_probs=True) returned no probabilities")
    mha = nn.MultiheadAttention(D, 1, bias=False, batch_first=True).eval()  # one head, projections I
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.eye(D).repeat(3, 1))
        mha.out_proj.weight.copy_(torch.eye(D))
        reference = [mha(q[:, h], k[:, h], v[:, h], key_padding_mask=padding_mask == 0) for h in range(H)]
    check_close(context, torch.stack([c for c, _ in reference], dim=1),
                "the context of 3 heads of 5 dimensions over 9 tokens")
    check_close(probs, torch.stack([p for _, p in reference], dim=1), "their attention probabilities")


@pytest.mark.points(1)
def test_eager_attention_gradcheck_float64():
    q, k, v = (torch.randn(2, 2, 5, 3, dtype=torch.float64, requires_grad=True) for _ in range(3))
    mask = additive(torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])).double()

    def attend(q, k, v):
        context, probs = eager_attention(q, k, v, mask, return_probs=True)
        shapes = [None if t is None else tuple(t.shape) for t in (context, probs)]
        if shapes != [(2, 2, 5, 3), (2, 2, 5, 5)]:
            fail(f"eager_attention(..., return_probs=True) of (2, 2, 5, 3) heads gave shapes {shapes}; "
                 "expected the context (2, 2, 5, 3) and the probabilities (2, 2, 5, 5)")
        return context, probs

    if not torch.autograd.gradcheck(attend, (q, k, v), raise_exception=False):
        fail("the gradient of eager_attention (float64) does not match finite differences: is some step "
             "done outside autograd (in place on an input, .data, .detach())?")
