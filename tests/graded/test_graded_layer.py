"""Graded: AddNorm.forward (post-LN add & norm) and BertLayer.forward, the latter against torch's own
nn.TransformerEncoderLayer (post-LN, exact GELU) with the same weights.

The attention kernel is torch's (graded_helpers.reference_attention), so these tests do not depend on
your eager_attention.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from graded_helpers import TOL, additive, randomize, reference_attention, torch_encoder_layer

import minbert.attention
from minbert.layer import AddNorm, BertLayer

pytestmark = pytest.mark.component("layer")


@pytest.fixture(autouse=True)
def _reference_kernel(monkeypatch):
    monkeypatch.setitem(minbert.attention.ATTENTION_KERNELS, "eager", reference_attention)


def add_norm_by_definition(layer: AddNorm, hidden, residual):
    """LayerNorm(x + Dropout(W h + b)), dropout off (the module's docstring)."""
    ln = layer.LayerNorm
    projected = F.linear(hidden, layer.dense.weight, layer.dense.bias)
    return F.layer_norm(residual + projected, ln.normalized_shape, ln.weight, ln.bias, ln.eps)


@pytest.mark.points(2)
@pytest.mark.parametrize("size", ["hidden", "intermediate"])
def test_add_norm_is_layernorm_of_residual_plus_projection(config, size):
    in_features = config.hidden_size if size == "hidden" else config.intermediate_size
    layer = randomize(AddNorm(in_features, config)).eval()
    hidden, residual = torch.randn(2, 5, in_features), torch.randn(2, 5, config.hidden_size)
    expected = add_norm_by_definition(layer, hidden, residual)
    torch.testing.assert_close(layer(hidden, residual), expected, **TOL)


@pytest.mark.points(1)
def test_add_norm_applies_dropout_in_training(config):
    layer = randomize(AddNorm(config.hidden_size, config.replace(hidden_dropout_prob=0.5)))
    hidden, residual = torch.randn(2, 5, config.hidden_size), torch.randn(2, 5, config.hidden_size)
    layer.train()
    assert not torch.allclose(layer(hidden, residual), layer(hidden, residual)), "no dropout in training"
    layer.eval()
    torch.testing.assert_close(layer(hidden, residual), layer(hidden, residual), atol=0, rtol=0)


@pytest.mark.points(3)
def test_layer_matches_torch_transformer_encoder_layer(config, padding_mask):
    ours = randomize(BertLayer(config, attn_implementation="sdpa")).eval()
    theirs = torch_encoder_layer(ours, config)
    hidden = torch.randn(3, 7, config.hidden_size)
    out = ours(hidden, additive(padding_mask)).hidden_states
    with torch.no_grad():
        ref = theirs(hidden, src_key_padding_mask=padding_mask == 0)
    real = padding_mask.bool()  # padded positions' outputs mean nothing; compare the real tokens
    torch.testing.assert_close(out[real], ref[real], **TOL)


@pytest.mark.points(1)
def test_layer_returns_the_attention_probabilities_when_asked(config, padding_mask):
    layer = randomize(BertLayer(config)).eval()
    hidden, mask = torch.randn(3, 7, config.hidden_size), additive(padding_mask)
    out = layer(hidden, mask, output_attentions=True)
    expected = layer.attention.self(hidden, mask, output_attentions=True).probs
    assert out.attention_probs is not None
    assert out.attention_probs.shape == (3, config.num_attention_heads, 7, 7)
    torch.testing.assert_close(out.attention_probs, expected, **TOL)
    assert layer(hidden, mask).attention_probs is None
