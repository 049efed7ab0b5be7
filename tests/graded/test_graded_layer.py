"""Graded: AddNorm.forward (post-LN add & norm) and BertLayer.forward, the latter against torch's own
nn.TransformerEncoderLayer (post-LN, exact GELU) with the same weights.

The attention kernel, the head split and the feed-forward expansion are stand-ins computed with torch
(graded_helpers.use_stand_ins), so these tests do not depend on those TODOs.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from graded_helpers import additive, check_close, fail, randomize, torch_encoder_layer, use_stand_ins

from minbert.layer import AddNorm, BertLayer

pytestmark = pytest.mark.component("layer")

POST_LN = "post-LN adds the residual first and normalises the sum: LayerNorm(x + Dropout(W h + b))"


@pytest.fixture(autouse=True)
def _stand_ins(monkeypatch):
    use_stand_ins(monkeypatch, "attention", "split_heads", "feed_forward")


def add_norm_by_definition(layer: AddNorm, hidden, residual):
    """LayerNorm(x + Dropout(W h + b)), dropout off (the module's docstring)."""
    ln = layer.LayerNorm
    projected = F.linear(hidden, layer.dense.weight, layer.dense.bias)
    return F.layer_norm(residual + projected, ln.normalized_shape, ln.weight, ln.bias, ln.eps)


def add_norm_mistakes(layer: AddNorm, hidden, residual):
    ln = layer.LayerNorm
    projected = F.linear(hidden, layer.dense.weight, layer.dense.bias)

    def norm(x):
        return F.layer_norm(x, ln.normalized_shape, ln.weight, ln.bias, ln.eps)

    return [(lambda: residual + norm(projected),
             f"the residual is added after the LayerNorm (pre-LN); {POST_LN}"),
            (lambda: norm(projected), f"the residual is missing; {POST_LN}"),
            (lambda: residual + projected, f"the LayerNorm is missing; {POST_LN}")]


@pytest.mark.points(2)
@pytest.mark.todo("AddNorm.forward")
@pytest.mark.parametrize("size", ["hidden", "intermediate"])
def test_add_norm_is_layernorm_of_residual_plus_projection(config, size):
    in_features = config.hidden_size if size == "hidden" else config.intermediate_size
    layer = randomize(AddNorm(in_features, config)).eval()
    hidden, residual = torch.randn(2, 5, in_features), torch.randn(2, 5, config.hidden_size)
    check_close(layer(hidden, residual), add_norm_by_definition(layer, hidden, residual), "AddNorm's output",
                add_norm_mistakes(layer, hidden, residual))


@pytest.mark.points(1)
@pytest.mark.todo("AddNorm.forward")
def test_add_norm_applies_dropout_in_training(config):
    layer = randomize(AddNorm(config.hidden_size, config.replace(hidden_dropout_prob=0.5)))
    hidden, residual = torch.randn(2, 5, config.hidden_size), torch.randn(2, 5, config.hidden_size)
    layer.train()
    if torch.allclose(layer(hidden, residual), layer(hidden, residual)):
        fail("AddNorm gives the same output twice in training mode with hidden_dropout_prob=0.5: apply "
             "self.dropout to the projection before the residual add")
    layer.eval()
    check_close(layer(hidden, residual), layer(hidden, residual), "AddNorm's output in eval mode (twice)")


@pytest.mark.points(3)
@pytest.mark.todo("BertLayer.forward")
def test_layer_matches_torch_transformer_encoder_layer(config, padding_mask):
    ours = randomize(BertLayer(config, attn_implementation="sdpa")).eval()
    theirs = torch_encoder_layer(ours, config)
    hidden = torch.randn(3, 7, config.hidden_size)
    out = ours(hidden, additive(padding_mask)).hidden_states
    with torch.no_grad():
        ref = theirs(hidden, src_key_padding_mask=padding_mask == 0)
    real = padding_mask.bool()  # padded positions' outputs mean nothing; compare the real tokens
    with torch.no_grad():  # the mistakes, from torch's layer's own pieces
        attended = theirs.norm1(hidden + theirs.self_attn(hidden, hidden, hidden,
                                                          key_padding_mask=padding_mask == 0)[0])
        wrong_residual = theirs.norm2(hidden + theirs.linear2(F.gelu(theirs.linear1(attended))))
    check_close(out[real], ref[real], "the layer's output at the real tokens", [
        (attended[real], "it is the attention sub-layer's output alone: the feed-forward sub-layer "
         "(intermediate, then output's add & norm with the attention output as residual) is missing"),
        (wrong_residual[real], "the feed-forward's residual is the layer's input; it must be the attention "
         "sub-layer's output"),
    ])


@pytest.mark.points(1)
@pytest.mark.todo("BertLayer.forward")
def test_layer_returns_the_attention_probabilities_when_asked(config, padding_mask):
    layer = randomize(BertLayer(config)).eval()
    hidden, mask = torch.randn(3, 7, config.hidden_size), additive(padding_mask)
    out = layer(hidden, mask, output_attentions=True)
    expected = layer.attention.self(hidden, mask, output_attentions=True).probs
    if out.attention_probs is None:
        fail("BertLayer(..., output_attentions=True) returned no attention probabilities: pass "
             "output_attentions to the self-attention and return its probabilities")
    check_close(out.attention_probs, expected, "the attention probabilities")
    if layer(hidden, mask).attention_probs is not None:
        fail("BertLayer returned attention probabilities without output_attentions=True")
