"""Graded, hidden: BertSelfAttention (eager kernel) against torch's nn.MultiheadAttention; gradcheck."""

from __future__ import annotations

import pytest
import torch
from graded_helpers import TOL, additive, randomize

from minbert.attention import BertSelfAttention, eager_attention

pytestmark = [pytest.mark.component("attention"), pytest.mark.visibility("after_published")]


@pytest.mark.points(2)
def test_self_attention_and_probabilities_match_torch_multihead_attention(config, padding_mask):
    ours = randomize(BertSelfAttention(config, attn_implementation="eager")).eval()
    C = config.hidden_size
    theirs = torch.nn.MultiheadAttention(C, config.num_attention_heads, batch_first=True).eval()
    with torch.no_grad():
        theirs.in_proj_weight.copy_(torch.cat([ours.query.weight, ours.key.weight, ours.value.weight]))
        theirs.in_proj_bias.copy_(torch.cat([ours.query.bias, ours.key.bias, ours.value.bias]))
        theirs.out_proj.weight.copy_(torch.eye(C))  # ours stops before the output projection
        theirs.out_proj.bias.zero_()
    hidden = torch.randn(3, 7, C)
    out = ours(hidden, additive(padding_mask), output_attentions=True)
    with torch.no_grad():
        ref, ref_probs = theirs(hidden, hidden, hidden, key_padding_mask=padding_mask == 0,
                                average_attn_weights=False)
    torch.testing.assert_close(out.context, ref, **TOL)
    torch.testing.assert_close(out.probs, ref_probs, **TOL)


@pytest.mark.points(1)
def test_eager_attention_gradcheck_float64():
    q, k, v = (torch.randn(2, 2, 5, 3, dtype=torch.float64, requires_grad=True) for _ in range(3))
    mask = additive(torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]), torch.float64)
    assert torch.autograd.gradcheck(lambda q, k, v: eager_attention(q, k, v, mask)[0], (q, k, v))
