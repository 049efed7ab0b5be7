"""Graded, hidden: BertSelfAttention (eager kernel) against torch's nn.MultiheadAttention; gradcheck."""

from __future__ import annotations

import pytest
import torch
from graded_helpers import additive, check_close, fail, randomize, torch_multihead_attention, use_stand_ins

from minbert.attention import BertSelfAttention, eager_attention

pytestmark = [pytest.mark.component("attention"), pytest.mark.visibility("after_published")]


@pytest.mark.points(2)
def test_self_attention_and_probabilities_match_torch_multihead_attention(config, padding_mask, monkeypatch):
    use_stand_ins(monkeypatch, "split_heads")
    ours = randomize(BertSelfAttention(config, attn_implementation="eager")).eval()
    theirs = torch_multihead_attention(ours, config)
    hidden = torch.randn(3, 7, config.hidden_size)
    out = ours(hidden, additive(padding_mask), output_attentions=True)
    with torch.no_grad():
        ref, ref_probs = theirs(hidden, hidden, hidden, key_padding_mask=padding_mask == 0,
                                average_attn_weights=False)
    check_close(out.context, ref, "the context of a whole self-attention module (tiny config)")
    check_close(out.probs, ref_probs, "its attention probabilities")


@pytest.mark.points(1)
def test_eager_attention_gradcheck_float64():
    q, k, v = (torch.randn(2, 2, 5, 3, dtype=torch.float64, requires_grad=True) for _ in range(3))
    mask = additive(torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]), torch.float64)
    if not torch.autograd.gradcheck(lambda q, k, v: eager_attention(q, k, v, mask)[0], (q, k, v),
                                    raise_exception=False):
        fail("the gradient of eager_attention (float64) does not match finite differences: is some step "
             "done outside autograd (in place on an input, .data, .detach())?")
