"""Graded: attention_scores, S = Q K^T / sqrt(D), and eager_attention, softmax(S + mask) V, written out.

attention_scores is pinned by torch's kernel too, without writing it: with a first key of zeros (score 0),
the probabilities P of torch's attention give every score as log(P_j / P_0).

Every test also asks for the probabilities (return_probs=True): they are what the exercise adds to
torch's fused kernel, which never returns them, so a kernel that only calls a fused one earns nothing.
The expected probabilities are pinned without writing the formula: with T = 7 keys and D = 8 value
dimensions, the probabilities P are the only (T, T) rows whose P @ V equals torch's context.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from graded_helpers import TOL, additive, check_close, expectation, fail
from torch import nn

from minbert.attention import attention_scores, eager_attention

pytestmark = [pytest.mark.component("attention"), pytest.mark.todo("eager_attention")]

AXES = dict(B=3, H=2, T=7, D=8)  # qkv()'s sizes: a crash names its shapes in these letters

SCALE_HINT = "did you scale by 1/sqrt(head size)?"
MASK_HINT = "the mask must be added before the softmax"
BY_KEYS = ("they were divided by sqrt(number of keys); divide by sqrt(D), the head size (the last axis of "
           "query and key)")
SUBTRACTED = ("the mask was subtracted from the scores: padding got a huge positive score (+inf for a -inf "
              "mask, NaN after the softmax); add the mask")
AXIS_HINT = "the softmax must run over the keys (the last axis), not the queries"


def qkv(B=3, H=2, T=7, D=8):
    return (torch.randn(B, H, T, D) for _ in range(3))


@expectation
def torch_attention(q, k, v, mask):
    """The context torch's fused kernel gives (it never returns the probabilities)."""
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


@expectation
def torch_heads(q, k, v, padding_mask) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(context, probabilities) of each head from torch's nn.MultiheadAttention: one head of D dimensions,
    identity projections, so that its weights are the head's attention probabilities."""
    D = q.size(-1)
    mha = nn.MultiheadAttention(D, 1, bias=False, batch_first=True).eval()
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.eye(D).repeat(3, 1))
        mha.out_proj.weight.copy_(torch.eye(D))
        return [mha(q[:, h], k[:, h], v[:, h], key_padding_mask=padding_mask == 0) for h in range(q.size(1))]


@expectation
def torch_probabilities(q, k, v, padding_mask) -> torch.Tensor:
    return torch.stack([probs for _, probs in torch_heads(q, k, v, padding_mask)], dim=1)


@expectation
def context_mistakes(q, k, v, mask):
    """What common mistakes return, from torch's kernel given the mistake's inputs."""
    D = q.size(-1)
    return [(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=1.0),
             f"scores are sqrt(D) = {D ** 0.5:.3g}x too large: {SCALE_HINT}"),
            (lambda: F.scaled_dot_product_attention(q, k, v),
             f"it equals attention with no mask: padding keys are attended; {MASK_HINT}"),
            (lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=k.size(-2) ** -0.5),
             BY_KEYS),
            (lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=-mask.nan_to_num(neginf=-1e4)),
             SUBTRACTED)]


def check_probabilities(probs, padding_mask: torch.Tensor, shape: tuple[int, ...], when: str = "") -> None:
    """Each query's probabilities sum to 1 over the keys, and padded keys get 0."""
    __tracebackhide__ = True
    if probs is None:
        fail(f"eager_attention(..., return_probs=True{when}) returned no probabilities")
    if not isinstance(probs, torch.Tensor) or probs.shape != shape:
        fail(f"the probabilities should be a tensor of shape (B, H, T, T) = {shape}, got "
             f"{tuple(probs.shape) if isinstance(probs, torch.Tensor) else type(probs).__name__}")
    if torch.isnan(probs).any():
        real_keys = padding_mask.bool()[:, None, :].expand(probs.shape[:2] + (-1,))  # (B, H, T)
        per_key = probs.nan_to_num(0.0).sum(dim=-2)[real_keys]
        if torch.allclose(per_key, torch.ones_like(per_key), **TOL):  # NaN only in the padding keys' columns
            fail(f"the probabilities{when} hold NaN in the padding keys' columns and sum to 1 over the "
                 f"queries in the others: {AXIS_HINT}")
        fail(f"the probabilities{when} hold NaN: add the mask to the scores (multiplying -inf or a large "
             "negative number into them gives NaN and infinities)")
    over_keys = probs.sum(dim=-1)
    if not torch.allclose(over_keys, torch.ones_like(over_keys), **TOL):
        if torch.allclose(probs.sum(dim=-2), torch.ones_like(over_keys), **TOL):
            fail(f"probabilities sum to 1 over the queries (axis -2), not over the keys: {AXIS_HINT}")
        if when:
            fail(f"the probabilities returned{when} sum to {over_keys.min().item():.4g}.."
                 f"{over_keys.max().item():.4g} over the keys: return them before dropout (the "
                 "docstring) and drop only the copy that mixes the values")
        fail(f"a query's probabilities sum to {over_keys.min().item():.4g}..{over_keys.max().item():.4g} "
             "over the keys, not 1: the softmax runs over the last axis, after adding the mask")
    padded = (padding_mask == 0)[:, None, None, :].expand_as(probs)
    leaked = probs[padded].abs().max().item() if padded.any() else 0.0
    if leaked > 0:
        fail(f"padding keys received probability {leaked:.2g}: {MASK_HINT}")


def check_attention(q, k, v, padding_mask: torch.Tensor, what: str) -> None:
    """eager_attention's probabilities and context against torch's fused kernel."""
    __tracebackhide__ = True
    mask = additive(padding_mask)
    context, probs = eager_attention(q, k, v, mask, return_probs=True)
    if isinstance(probs, torch.Tensor) and torch.isnan(probs).any():
        finite = torch.where(padding_mask.bool(), 0.0, -1e4)[:, None, None, :]
        if torch.allclose(eager_attention(q, k, v, finite)[0],
                          F.scaled_dot_product_attention(q, k, v, attn_mask=-finite), **TOL):
            fail(SUBTRACTED)
    check_probabilities(probs, padding_mask, (*q.shape[:-1], k.size(-2)))
    check_close(context, torch_attention(q, k, v, mask), what, context_mistakes(q, k, v, mask))
    check_close(probs @ v, torch_attention(q, k, v, mask),
                "your probabilities times the values "
                f"(they must give {what})", context_mistakes(q, k, v, mask))


@pytest.mark.points(2)
@pytest.mark.todo("attention_scores")
@pytest.mark.axes(D=4)
def test_attention_scores_worked_example_divides_by_sqrt_head_size():
    # One query (1, 0, 0, 0) against keys (2, 0, 0, 0), (0, 3, 0, 0), (1, 1, 1, 1): dot products 2, 0, 1;
    # divided by sqrt(D) = 2: (1, 0, 0.5).
    q = torch.tensor([1.0, 0.0, 0.0, 0.0]).view(1, 1, 1, 4)
    k = torch.tensor([[2.0, 0.0, 0.0, 0.0], [0.0, 3.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]]).view(1, 1, 3, 4)
    check_close(attention_scores(q, k), torch.tensor([1.0, 0.0, 0.5]).view(1, 1, 1, 3),
                "the scores of query (1,0,0,0) against keys (2,0,0,0), (0,3,0,0), (1,1,1,1) with D = 4", [
                    (torch.tensor([2.0, 0.0, 1.0]).view(1, 1, 1, 3),
                     f"they are the plain dot products: {SCALE_HINT}"),
                    (torch.tensor([0.5, 0.0, 0.25]).view(1, 1, 1, 3),
                     "they were divided by D = 4; divide by sqrt(D) = 2"),
                    (torch.tensor([2.0, 0.0, 1.0]).view(1, 1, 1, 3) / math.sqrt(3), BY_KEYS),
                    (torch.tensor([0.0, 1.5, 0.5]).view(1, 1, 1, 3),
                     "the query was scored against the keys' transposed rows: Q K^T "
                     "pairs query i with key j"),
                ])


@pytest.mark.points(1)
@pytest.mark.todo("attention_scores")
@pytest.mark.axes(B=2, H=3, T_q=5, T_k=4, D=9)
def test_attention_scores_of_every_query_and_key_agree_with_torchs_attention():
    q, k = torch.randn(2, 3, 5, 9), torch.randn(2, 3, 4, 9)
    k[:, :, 0] = 0.0  # every query scores 0 against key 0
    check_close(attention_scores(q, k), scores_from_torch(q, k),
                "the scores of 5 queries against 4 keys (B 2, H 3, D 9)",
                [(lambda: scores_from_torch(q, k) * 3 / 2, BY_KEYS)], atol=1e-4, rtol=1e-4)


@expectation
def scores_from_torch(q, k):
    """The scores, read off torch's probabilities: with values the identity the context is the
    probabilities, and with key 0 all zeros, log(P_j / P_0) = S_j - S_0 = S_j."""
    B, H, _, T = *k.shape[:2], None, k.size(-2)
    probs = F.scaled_dot_product_attention(q, k, torch.eye(T).expand(B, H, T, T))
    return probs.log() - probs[..., :1].log()  # (B, H, T_q, T_k)


@pytest.mark.points(2)
def test_eager_attention_matches_torch_scaled_dot_product_attention(padding_mask):
    check_attention(*qkv(), padding_mask, "the context")


@pytest.mark.points(2)
@pytest.mark.axes(D=4)
def test_worked_example_scores_are_scaled_by_one_over_sqrt_head_size():
    # One query, two keys, D = 4: scores (2, 0) / sqrt(4) = (1, 0), so probabilities (e, 1) / (e + 1).
    q = torch.tensor([1.0, 0.0, 0.0, 0.0]).view(1, 1, 1, 4)
    k = torch.tensor([[2.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]).view(1, 1, 2, 4)
    v = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]]).view(1, 1, 2, 4)
    context, probs = eager_attention(q, k, v, torch.zeros(1, 1, 1, 2), return_probs=True)
    check_probabilities(probs, torch.ones(1, 2), (1, 1, 1, 2))
    p = probs.detach().view(2)
    gap = math.log(p[0] / p[1]) if p.min() > 0 else float("inf")  # the scores' difference, recovered
    if not math.isclose(gap, 1.0, rel_tol=1e-4):
        if gap > 1.0:
            fail(f"scores are {gap:.3g}x too large: {SCALE_HINT} (query (1,0,0,0), keys (2,0,0,0) and 0, "
                 f"D = 4: the scores must be (2, 0) / 2 = (1, 0); yours differ by {gap:.4g})")
        fail(f"the scores of query (1,0,0,0) against keys (2,0,0,0) and 0 differ by {gap:.4g}; with D = 4 "
             "they must be (2, 0) / sqrt(4) = (1, 0), a difference of 1: scale by 1/sqrt(D), once")
    e = math.e
    check_close(probs.view(2), torch.tensor([e / (e + 1), 1 / (e + 1)]), "the probabilities")
    check_close(context.view(4), torch.tensor([e / (e + 1), 1 / (e + 1), 0.0, 0.0]),
                "the context (the probabilities times the values)")


@pytest.mark.points(2)
def test_probabilities_sum_to_one_over_the_keys_and_padding_gets_zero(padding_mask):
    q, k, v = qkv()
    _, probs = eager_attention(q, k, v, additive(padding_mask), return_probs=True)
    check_probabilities(probs, padding_mask, (3, 2, 7, 7))
    if eager_attention(q, k, v, additive(padding_mask))[1] is not None:
        fail("eager_attention returned probabilities without return_probs=True")
    # The model's mask is finite (extended_attention_mask), so that a row of all padding (an empty chunk)
    # stays finite: its query spreads over every key, as torch's kernel gives with the same mask.
    empty = torch.tensor([[1, 1, 1, 1, 0, 0, 0], [0] * 7, [1] * 7])
    finite = torch.where(empty.bool(), 0.0, torch.finfo(torch.float32).min)[:, None, None, :]
    context, probs = eager_attention(q, k, v, finite, return_probs=True)
    if isinstance(context, torch.Tensor) and not torch.isfinite(context).all():
        fail("with the model's finite mask, a sequence that is all padding gives NaN or inf: add the mask to "
             "the scores as it is (masked_fill with -inf, or any -inf, makes a row with no real key NaN)")
    check_close(context, F.scaled_dot_product_attention(q, k, v, attn_mask=finite),
                "the context with a finite mask and a row of all padding")


@pytest.mark.points(1)
@pytest.mark.axes(H=2, D=8)
def test_padding_keys_do_not_change_real_queries():
    q, k, v = qkv(B=1, T=4)
    pad = torch.randn(1, 2, 3, 8) * 10
    padding_mask = torch.tensor([[1, 1, 1, 1, 0, 0, 0]])
    padded, probs = eager_attention(torch.cat([q, pad], 2), torch.cat([k, pad], 2), torch.cat([v, pad], 2),
                                    additive(padding_mask), return_probs=True)
    check_probabilities(probs, padding_mask, (1, 2, 7, 7))
    check_close(padded[:, :, :4], torch_attention(q, k, v, None), "the real tokens' context with three "
                f"padding tokens appended (it must equal their context without them: {MASK_HINT})",
                [(lambda: F.scaled_dot_product_attention(torch.cat([q, pad], 2), torch.cat([k, pad], 2),
                                                         torch.cat([v, pad], 2))[:, :, :4],
                  f"it equals attention with no mask: the padding keys are attended; {MASK_HINT}")])


@pytest.mark.points(1)
def test_dropout_drops_the_mixed_probabilities_and_returns_them_undropped():
    q, k, v = qkv()
    everything = torch.ones(3, 7)
    dropout = nn.Dropout(0.5)  # in training mode, as a fresh module is
    torch.manual_seed(1)
    dropped, returned = eager_attention(q, k, v, torch.zeros(1, 1, 1, 7), dropout=dropout, return_probs=True)
    check_probabilities(returned, everything, (3, 2, 7, 7), when=" with dropout=nn.Dropout(0.5)")
    check_close(returned, torch_probabilities(q, k, v, everything), "the probabilities returned with "
                "dropout=nn.Dropout(0.5) (they are the ones before dropout: equal to those without it)")
    check_close(dropped, dropped_context(q, k, v, dropout), "the context with dropout=nn.Dropout(0.5)",
                [(lambda: torch_probabilities(q, k, v, everything) @ v, "no dropout was applied: apply "
                  "`dropout` to the probabilities before mixing the values")])


@expectation
def dropped_context(q, k, v, dropout):
    """torch's probabilities, dropped by `dropout` from the same seed (1), times the values."""
    probs = torch_probabilities(q, k, v, torch.ones(q.size(0), k.size(-2)))
    torch.manual_seed(1)
    return dropout(probs) @ v


@pytest.mark.points(1)
def test_each_head_matches_torch_multihead_attention_and_its_weights(padding_mask):
    q, k, v = qkv()
    context, probs = eager_attention(q, k, v, additive(padding_mask), return_probs=True)
    check_probabilities(probs, padding_mask, (3, 2, 7, 7))
    for h in range(q.size(1)):
        check_close(probs[:, h], torch_heads(q, k, v, padding_mask)[h][1], f"head {h}'s probabilities "
                    "(against nn.MultiheadAttention's weights)")
        check_close(context[:, h], torch_heads(q, k, v, padding_mask)[h][0], f"head {h}'s context (against "
                    "nn.MultiheadAttention)")
