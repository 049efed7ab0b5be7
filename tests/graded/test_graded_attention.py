"""Graded: eager_attention, softmax(Q K^T / sqrt(D) + mask) V written out."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from graded_helpers import TOL, additive

from minbert.attention import BertSelfAttention, eager_attention

pytestmark = pytest.mark.component("attention")


def qkv(B=3, H=2, T=7, D=8):
    return (torch.randn(B, H, T, D) for _ in range(3))


@pytest.mark.points(3)
def test_eager_attention_matches_torch_scaled_dot_product_attention(padding_mask):
    q, k, v = qkv()
    mask = additive(padding_mask)
    context, _ = eager_attention(q, k, v, mask)
    torch.testing.assert_close(context, F.scaled_dot_product_attention(q, k, v, attn_mask=mask), **TOL)


@pytest.mark.points(2)
def test_worked_example_scores_are_scaled_by_one_over_sqrt_head_size():
    # One query, two keys, D = 4: scores (2, 0) / sqrt(4) = (1, 0), so probabilities (e, 1) / (e + 1).
    q = torch.tensor([1.0, 0.0, 0.0, 0.0]).view(1, 1, 1, 4)
    k = torch.tensor([[2.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]).view(1, 1, 2, 4)
    v = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]]).view(1, 1, 2, 4)
    context, probs = eager_attention(q, k, v, torch.zeros(1, 1, 1, 2), return_probs=True)
    e = math.e
    torch.testing.assert_close(probs.view(2), torch.tensor([e / (e + 1), 1 / (e + 1)]), **TOL)
    torch.testing.assert_close(context.view(4), torch.tensor([e / (e + 1), 1 / (e + 1), 0.0, 0.0]), **TOL)


@pytest.mark.points(2)
def test_probabilities_sum_to_one_over_the_keys_and_padding_gets_zero(padding_mask):
    q, k, v = qkv()
    _, probs = eager_attention(q, k, v, additive(padding_mask), return_probs=True)
    assert probs.shape == (3, 2, 7, 7)
    torch.testing.assert_close(probs.sum(dim=-1), torch.ones(3, 2, 7), **TOL)
    assert probs[1, :, :, 5:].abs().max() == 0 and probs[2, :, :, 3:].abs().max() == 0, \
        "padded keys must get zero probability"


@pytest.mark.points(1)
def test_padding_keys_do_not_change_real_queries(padding_mask):
    q, k, v = qkv(B=1, T=4)
    alone, _ = eager_attention(q, k, v, torch.zeros(1, 1, 1, 4))
    pad = torch.randn(1, 2, 3, 8) * 10
    padded, _ = eager_attention(torch.cat([q, pad], 2), torch.cat([k, pad], 2), torch.cat([v, pad], 2),
                                additive(torch.tensor([[1, 1, 1, 1, 0, 0, 0]])))
    torch.testing.assert_close(padded[:, :, :4], alone, **TOL)


@pytest.mark.points(1)
def test_dropout_is_applied_to_the_probabilities():
    q, k, v = qkv()
    torch.manual_seed(1)
    dropped, _ = eager_attention(q, k, v, torch.zeros(1, 1, 1, 7), dropout_p=0.5)
    torch.manual_seed(1)
    _, probs = eager_attention(q, k, v, torch.zeros(1, 1, 1, 7), return_probs=True)
    torch.manual_seed(1)
    torch.testing.assert_close(dropped, F.dropout(probs, p=0.5) @ v, **TOL)


@pytest.mark.points(1)
def test_self_attention_module_with_the_eager_kernel_equals_the_sdpa_kernel(config, padding_mask):
    eager = BertSelfAttention(config, attn_implementation="eager").eval()
    sdpa = BertSelfAttention(config, attn_implementation="sdpa").eval()
    sdpa.load_state_dict(eager.state_dict())
    hidden = torch.randn(3, 7, config.hidden_size)
    mask = additive(padding_mask)
    torch.testing.assert_close(eager(hidden, mask).context, sdpa(hidden, mask).context, **TOL)
