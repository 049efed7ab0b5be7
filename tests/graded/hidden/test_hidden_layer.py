"""Graded, hidden: BertLayer written out with exact (erf) GELU, and its gradient against torch's layer."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from graded_helpers import additive, check_close, expectation, randomize, torch_encoder_layer, use_stand_ins

from minbert.layer import BertLayer

pytestmark = [pytest.mark.component("layer"), pytest.mark.visibility("after_published"),
              pytest.mark.todo("BertLayer.forward")]


@pytest.fixture(autouse=True)
def _stand_ins(monkeypatch):
    use_stand_ins(monkeypatch, "attention", "split_heads", "feed_forward")


@expectation
def post_ln(layer, hidden, mask) -> torch.Tensor:
    """The layer written out from its parts' weights (the stand-in attention's context)."""
    def norm(x, ln):
        return F.layer_norm(x, (x.size(-1),), ln.weight, ln.bias, ln.eps)

    context = layer.attention.self(hidden, mask).context
    a = layer.attention.output
    attended = norm(hidden + F.linear(context, a.dense.weight, a.dense.bias), a.LayerNorm)
    inner = F.gelu(F.linear(attended, layer.intermediate.dense.weight, layer.intermediate.dense.bias))
    o = layer.output
    return norm(attended + F.linear(inner, o.dense.weight, o.dense.bias), o.LayerNorm)


@pytest.mark.points(2)
def test_layer_is_post_ln_with_exact_gelu(config, padding_mask):
    layer = randomize(BertLayer(config), std=0.7).eval()
    hidden, mask = torch.randn(3, 7, config.hidden_size), additive(padding_mask)
    check_close(layer(hidden, mask).hidden_states, post_ln(layer, hidden, mask),
                "the layer's output (post-LN, two sub-layers)")


@pytest.mark.points(1)
def test_layer_gradient_float64(config):
    layer = randomize(BertLayer(config)).double()
    hidden = torch.randn(2, 5, config.hidden_size, dtype=torch.float64)
    padding_mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    # the real rows' outputs only
    weights = torch.randn(2, 5, config.hidden_size, dtype=torch.float64) * padding_mask[..., None]
    leaf = hidden.clone().requires_grad_(True)
    (layer(leaf, additive(padding_mask).double()).hidden_states * weights).sum().backward()
    check_close(leaf.grad, torch_gradient(layer, config, hidden, padding_mask, weights), "the gradient of "
                "the layer's output at the real tokens with respect to its input (float64, against torch's "
                "nn.TransformerEncoderLayer)", atol=1e-9, rtol=1e-7)


@expectation
def torch_gradient(layer, config, hidden, padding_mask, weights):
    theirs = torch_encoder_layer(layer, config).double().train()  # train(): no fused path; dropout is 0
    leaf = hidden.clone().requires_grad_(True)
    (theirs(leaf, src_key_padding_mask=padding_mask == 0) * weights).sum().backward()
    return leaf.grad
