"""Graded, hidden: eager_attention on other sizes against torch's nn.MultiheadAttention, and its gradients."""

from __future__ import annotations

import pytest
import torch
from graded_helpers import additive, check_close, expectation, fail
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
    check_close(context, torch_heads(q, k, v, padding_mask)[0], "the context of 3 heads of 5 "
                "dimensions over 9 tokens")
    check_close(probs, torch_heads(q, k, v, padding_mask)[1], "their attention probabilities")


@expectation
def torch_heads(q, k, v, padding_mask):
    """(context, probabilities) stacked over the heads, from nn.MultiheadAttention: one head, identity
    projections."""
    D = q.size(-1)
    mha = nn.MultiheadAttention(D, 1, bias=False, batch_first=True).eval()
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.eye(D).repeat(3, 1))
        mha.out_proj.weight.copy_(torch.eye(D))
        heads = [mha(q[:, h], k[:, h], v[:, h], key_padding_mask=padding_mask == 0) for h in range(q.size(1))]
    return torch.stack([c for c, _ in heads], dim=1), torch.stack([p for _, p in heads], dim=1)


@pytest.mark.points(1)
def test_eager_attention_gradients_match_torch_in_float64():
    q, k, v = (torch.randn(2, 2, 5, 3, dtype=torch.float64) for _ in range(3))
    padding_mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    weights = torch.randn(2, 2, 5, 3, dtype=torch.float64), torch.randn(2, 2, 5, 5, dtype=torch.float64)
    leaves = [x.clone().requires_grad_(True) for x in (q, k, v)]
    context, probs = eager_attention(*leaves, additive(padding_mask).double(), return_probs=True)
    shapes = [None if t is None else tuple(t.shape) for t in (context, probs)]
    if shapes != [(2, 2, 5, 3), (2, 2, 5, 5)]:
        fail(f"eager_attention(..., return_probs=True) of (2, 2, 5, 3) heads gave shapes {shapes}; expected "
             "the context (2, 2, 5, 3) and the probabilities (2, 2, 5, 5)")
    ((context * weights[0]).sum() + (probs * weights[1]).sum()).backward()
    for name, leaf, number in zip("qkv", leaves, range(3)):
        check_close(leaf.grad, torch_gradients(q, k, v, padding_mask, weights)[number],
                    f"the gradient with respect to {name} of a weighted sum of the context and the "
                    "probabilities (float64, against torch's nn.MultiheadAttention)", atol=1e-9, rtol=1e-7)


@expectation
def torch_gradients(q, k, v, padding_mask, weights):
    leaves = [x.clone().requires_grad_(True) for x in (q, k, v)]
    D = q.size(-1)
    mha = nn.MultiheadAttention(D, 1, bias=False, batch_first=True).double().eval()
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.eye(D, dtype=torch.float64).repeat(3, 1))
        mha.out_proj.weight.copy_(torch.eye(D, dtype=torch.float64))
    heads = [mha(*(x[:, h] for x in leaves), key_padding_mask=padding_mask == 0) for h in range(q.size(1))]
    context, probs = (torch.stack(parts, dim=1) for parts in zip(*heads))
    ((context * weights[0]).sum() + (probs * weights[1]).sum()).backward()
    return [leaf.grad for leaf in leaves]
