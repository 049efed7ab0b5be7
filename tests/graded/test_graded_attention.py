"""Graded: eager_attention, softmax(Q K^T / sqrt(D) + mask) V written out."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from graded_helpers import TOL, additive, check_close, fail, use_stand_ins

from minbert.attention import BertSelfAttention, eager_attention
from minbert.dropout import dropout

pytestmark = pytest.mark.component("attention")

SCALE_HINT = "did you scale by 1/sqrt(head size)?"
MASK_HINT = "the mask must be added before the softmax"
AXIS_HINT = "the softmax must run over the keys (the last axis), not the queries"


def qkv(B=3, H=2, T=7, D=8):
    return (torch.randn(B, H, T, D) for _ in range(3))


def sdpa_mistakes(q, k, v, mask):
    """What common mistakes return, computed with torch's kernel (or by hand)."""
    D = q.size(-1)
    scores = q @ k.transpose(-1, -2) / math.sqrt(D) + mask

    def over_queries():
        return scores.softmax(dim=-2) @ v

    return [(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=1.0),
             f"scores are sqrt(D) = {math.sqrt(D):.3g}x too large: {SCALE_HINT}"),
            (lambda: F.scaled_dot_product_attention(q, k, v),
             f"it equals attention with no mask: padding keys are attended; {MASK_HINT}"),
            (over_queries, f"probabilities sum to 1 over the queries: {AXIS_HINT}")]


def check_probabilities(probs: torch.Tensor, padding_mask: torch.Tensor) -> None:
    """Each query's probabilities sum to 1 over the keys, and padded keys get 0."""
    if probs is None:
        fail("eager_attention(..., return_probs=True) returned no probabilities")
    padded = (padding_mask == 0)[:, None, None, :].expand_as(probs)
    leaked = probs[padded].abs().max().item() if padded.any() else 0.0
    over_keys = probs.sum(dim=-1)
    if not torch.allclose(over_keys, torch.ones_like(over_keys), **TOL):
        if torch.allclose(probs.sum(dim=-2), torch.ones_like(over_keys), **TOL):
            fail(f"probabilities sum to 1 over the queries (axis -2), not over the keys: {AXIS_HINT}")
        fail(f"a query's probabilities sum to {over_keys.min().item():.4g}..{over_keys.max().item():.4g} "
             "over the keys, not 1: the softmax runs over the last axis, after adding the mask")
    if leaked > 0:
        fail(f"padding keys received probability {leaked:.2g}: {MASK_HINT}")


@pytest.mark.points(3)
def test_eager_attention_matches_torch_scaled_dot_product_attention(padding_mask):
    q, k, v = qkv()
    mask = additive(padding_mask)
    context, _ = eager_attention(q, k, v, mask)
    check_close(context, F.scaled_dot_product_attention(q, k, v, attn_mask=mask), "the context",
                sdpa_mistakes(q, k, v, mask))


@pytest.mark.points(2)
def test_worked_example_scores_are_scaled_by_one_over_sqrt_head_size():
    # One query, two keys, D = 4: scores (2, 0) / sqrt(4) = (1, 0), so probabilities (e, 1) / (e + 1).
    q = torch.tensor([1.0, 0.0, 0.0, 0.0]).view(1, 1, 1, 4)
    k = torch.tensor([[2.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]).view(1, 1, 2, 4)
    v = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]]).view(1, 1, 2, 4)
    context, probs = eager_attention(q, k, v, torch.zeros(1, 1, 1, 2), return_probs=True)
    if probs is None:
        fail("eager_attention(..., return_probs=True) returned no probabilities")
    p = probs.detach().view(2)
    gap = math.log(p[0] / p[1]) if p.min() > 0 else float("inf")  # the scores' difference, recovered
    if not math.isclose(gap, 1.0, rel_tol=1e-4):
        if gap > 1.0:
            fail(f"scores are {gap:.3g}x too large: {SCALE_HINT} (query (1,0,0,0), keys (2,0,0,0) and 0, "
                 f"D = 4: the scores must be (2, 0) / 2 = (1, 0); yours differ by {gap:.4g})")
        fail(f"scores are {1 / gap:.3g}x too small: scale by 1/sqrt(D) = 1/2 here, not by more (the scores "
             f"must be (1, 0); yours differ by {gap:.4g})")
    e = math.e
    check_close(probs.view(2), torch.tensor([e / (e + 1), 1 / (e + 1)]), "the probabilities")
    check_close(context.view(4), torch.tensor([e / (e + 1), 1 / (e + 1), 0.0, 0.0]),
                "the context (the probabilities times the values)")


@pytest.mark.points(2)
def test_probabilities_sum_to_one_over_the_keys_and_padding_gets_zero(padding_mask):
    q, k, v = qkv()
    _, probs = eager_attention(q, k, v, additive(padding_mask), return_probs=True)
    if probs is None or probs.shape != (3, 2, 7, 7):
        fail(f"the probabilities should have shape (B, H, T, T) = (3, 2, 7, 7), got "
             f"{None if probs is None else tuple(probs.shape)}")
    check_probabilities(probs, padding_mask)


@pytest.mark.points(1)
def test_padding_keys_do_not_change_real_queries(padding_mask):
    q, k, v = qkv(B=1, T=4)
    alone, _ = eager_attention(q, k, v, torch.zeros(1, 1, 1, 4))
    pad = torch.randn(1, 2, 3, 8) * 10
    padded, _ = eager_attention(torch.cat([q, pad], 2), torch.cat([k, pad], 2), torch.cat([v, pad], 2),
                                additive(torch.tensor([[1, 1, 1, 1, 0, 0, 0]])))
    check_close(padded[:, :, :4], alone, "the real tokens' context with three padding tokens appended "
                f"(it must equal their context without them: {MASK_HINT})")


@pytest.mark.points(1)
def test_dropout_is_applied_to_the_probabilities():
    q, k, v = qkv()
    torch.manual_seed(1)
    dropped, _ = eager_attention(q, k, v, torch.zeros(1, 1, 1, 7), dropout_p=0.5)
    torch.manual_seed(1)
    _, probs = eager_attention(q, k, v, torch.zeros(1, 1, 1, 7), return_probs=True)
    torch.manual_seed(1)
    with_torchs_mask = F.dropout(probs, p=0.5) @ v
    if torch.allclose(dropped, with_torchs_mask):
        return  # F.dropout also drops the probabilities (with a slower random mask on a CPU)
    torch.manual_seed(1)
    check_close(dropped, dropout(probs, 0.5) @ v, "the context with dropout_p=0.5",
                [(probs @ v, "no dropout was applied: drop the probabilities (dropout_p) before mixing the "
                  "values")])


@pytest.mark.points(1)
def test_self_attention_module_with_the_eager_kernel_equals_the_sdpa_kernel(config, padding_mask,
                                                                            monkeypatch):
    use_stand_ins(monkeypatch, "split_heads")
    eager = BertSelfAttention(config, attn_implementation="eager").eval()
    sdpa = BertSelfAttention(config, attn_implementation="sdpa").eval()
    sdpa.load_state_dict(eager.state_dict())
    hidden = torch.randn(3, 7, config.hidden_size)
    mask = additive(padding_mask)
    check_close(eager(hidden, mask).context, sdpa(hidden, mask).context,
                "BertSelfAttention's context with your kernel (compared with torch's)")
