"""Graded: AddNorm.forward (post-LN add & norm) and BertLayer.forward, the latter against torch's own
nn.TransformerEncoderLayer (post-LN, exact GELU) with the same weights.

The attention kernel, the head split and the feed-forward expansion are stand-ins computed with torch
(graded_helpers.use_stand_ins), so these tests do not depend on those TODOs.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
from graded_helpers import (TOL, additive, check_close, expectation, fail, randomize, torch_encoder_layer,
                            use_stand_ins)
from safetensors.torch import load_file

from minbert.layer import AddNorm, BertLayer

pytestmark = pytest.mark.component("layer")

AXES = dict(B=3, T=7, C=32, I=37)  # the padding_mask fixture and the tiny model (the crashes module)

IN_PLACE = ("an in-place add (x += ..., add_) overwrites the caller's tensor, which the next layer, "
            "the residual or autograd still needs; write residual + ... so that a new tensor is made")
POST_LN = "post-LN adds the residual first and normalises the sum: LayerNorm(x + Dropout(W h + b))"
STORED = Path(__file__).resolve().parent / "reference" / "layer_add_norm.safetensors"


@pytest.fixture(autouse=True)
def _stand_ins(monkeypatch):
    use_stand_ins(monkeypatch, "attention", "split_heads", "feed_forward")


def stored_add_norm(config, size: str):
    """AddNorm with stored weights, its input and residual, and the stored tensors (made by a staff script;
    the output is f"{size}.output")."""
    tensors = load_file(str(STORED))
    layer = AddNorm(config.hidden_size if size == "hidden" else config.intermediate_size, config).eval()
    layer.load_state_dict({name: tensors[f"{size}.{name}"] for name in layer.state_dict()})
    return layer, tensors[f"{size}.hidden"], tensors[f"{size}.residual"], tensors


def normalised(x: torch.Tensor, variance: float = 1.0) -> bool:
    """Each vector has mean 0 and this variance (a LayerNorm's output with scale 1 and shift 0: 1)."""
    mean, var = x.mean(dim=-1), x.var(dim=-1, unbiased=False)
    return torch.allclose(mean, torch.zeros_like(mean), atol=1e-4) and torch.allclose(
        var, torch.full_like(var, variance), atol=1e-3)


def add_norm_mistake(layer: AddNorm, hidden, residual) -> str | None:
    """The mistake an AddNorm makes, read off its outputs with the LayerNorm's scale 1 and shift 0."""
    probe = copy.deepcopy(layer).eval()
    C = residual.size(-1)
    with torch.no_grad():
        probe.LayerNorm.weight.fill_(1.0)
        probe.LayerNorm.bias.zero_()
        out = probe(hidden, residual)
        moved = probe(hidden, residual + torch.randn_like(residual))
    if not normalised(out):
        if normalised(out - residual):
            return f"the residual is added after the LayerNorm (pre-LN); {POST_LN}"
        if normalised(out, (C - 1) / C):  # x / sqrt(var) with var divided by C - 1: variance (C - 1) / C
            return (f"the variance was computed unbiased (divided by C - 1 = {C - 1}): LayerNorm divides by "
                    f"C = {C} (var(unbiased=False)); the module self.LayerNorm does it for you")
        return f"its output is not normalised: the LayerNorm comes last; {POST_LN}"
    if torch.allclose(out, moved, **TOL):
        return f"the residual is missing (the output does not change with it); {POST_LN}"
    return None


@pytest.mark.points(2)
@pytest.mark.todo("AddNorm.forward")
@pytest.mark.parametrize("size", ["hidden", "intermediate"])
def test_add_norm_is_layernorm_of_residual_plus_projection(config, size):
    layer, hidden, residual, t = stored_add_norm(config, size)
    given = residual.clone()
    actual = layer(hidden, residual)
    if not torch.equal(residual, given):
        fail(f"AddNorm changed its input in place (the residual): {IN_PLACE}")
    mistake = add_norm_mistake(layer, hidden, residual)
    if mistake:
        fail(f"AddNorm's output is wrong: {mistake}")
    check_close(actual, t[f"{size}.output"], "AddNorm's output (stored weights and inputs)")
    # LayerNorm does not see a common scale: inputs and bias 100 times smaller give the same output, with
    # the module's eps (1e-12, the checkpoint's) as with none. A larger eps (torch's default, 1e-5) shows.
    small = copy.deepcopy(layer)
    with torch.no_grad():
        small.dense.bias.mul_(0.01)
    check_close(small(hidden * 0.01, residual * 0.01), t[f"{size}.output"], "AddNorm's output with its "
                "inputs and bias 100 times smaller (it must not change: LayerNorm is scale-free; only an eps "
                "larger than self.LayerNorm's own, 1e-12, changes it)", atol=1e-4, rtol=1e-4)


@pytest.mark.points(1)
@pytest.mark.todo("AddNorm.forward")
def test_add_norm_drops_only_the_projection_in_training(config):
    layer = randomize(AddNorm(config.hidden_size, config.replace(hidden_dropout_prob=0.5)))
    hidden, residual = torch.randn(2, 5, config.hidden_size), torch.randn(2, 5, config.hidden_size)
    layer.train()
    if torch.allclose(layer(hidden, residual), layer(hidden, residual)):
        fail("AddNorm gives the same output twice in training mode with hidden_dropout_prob=0.5: apply "
             "self.dropout to the projection before the residual add")
    with torch.no_grad():  # nothing left to drop: the output must be the residual, normalised, every time
        layer.dense.weight.zero_()
        layer.dense.bias.zero_()
    check_close(layer(hidden, residual), layer.LayerNorm(residual).detach(), "AddNorm's output in training "
                "mode with the projection W h + b zeroed (nothing left to drop: LayerNorm(x) every time; "
                "dropout belongs on the projection only, LayerNorm(x + Dropout(W h + b)), not on "
                "the residual or the sum)")
    layer.eval()
    check_close(layer(hidden, residual), layer.LayerNorm(residual).detach(), "AddNorm's output in eval mode "
                "with the projection zeroed")


def layer_mistake(ours: BertLayer, hidden, padding_mask) -> str | None:
    """The mistake a BertLayer makes, read off its outputs when its feed-forward's projection changes."""
    real, mask = padding_mask.bool(), additive(padding_mask)
    probe = copy.deepcopy(ours)
    with torch.no_grad():
        probe.output.dense.weight.add_(torch.randn_like(probe.output.dense.weight))
        if torch.allclose(probe(hidden, mask).hidden_states, ours(hidden, mask).hidden_states, **TOL):
            return ("its output does not depend on the feed-forward sub-layer: after the attention's add & "
                    "norm comes the feed-forward (intermediate, then output's add & norm)")
        probe.output.dense.weight.zero_()  # the feed-forward adds nothing: LayerNorm(residual)
        probe.output.dense.bias.zero_()
        residual_is_input = probe.output.LayerNorm(hidden)[real]
        if torch.allclose(probe(hidden, mask).hidden_states[real], residual_is_input, **TOL):
            return ("the feed-forward's residual is the layer's input; it must be the attention sub-layer's "
                    "output")
    return None


@expectation
def torch_layer(ours: BertLayer, config, hidden, padding_mask) -> torch.Tensor:
    """torch's nn.TransformerEncoderLayer with the same weights, on the same batch."""
    with torch.no_grad():
        return torch_encoder_layer(ours, config)(hidden, src_key_padding_mask=padding_mask == 0)


@expectation
def wiring_mistakes(ours: BertLayer, config, hidden, padding_mask) -> list[tuple[torch.Tensor, str]]:
    """What a layer wired wrongly gives at the real tokens, from torch's layer's parts (same weights)."""
    theirs, real = torch_encoder_layer(ours, config), padding_mask.bool()
    with torch.no_grad():
        context = ours.attention.self(hidden, additive(padding_mask)).context  # the stand-in: torch's kernel
        attention_output = theirs.norm1(hidden + theirs.self_attn.out_proj(context))

        def feed_forward(x, residual):
            return theirs.norm2(residual + theirs.linear2(theirs.activation(theirs.linear1(x))))

        return [(wrong[real], why) for wrong, why in [
                (feed_forward(context, attention_output), "the feed-forward read the attention's context "
                 "(self.attention.self's output); it reads the attention sub-layer's output, after its add & "
                 "norm (self.attention.output(context, hidden_states))"),
                (feed_forward(context, context), "the attention's add & norm (self.attention.output) was "
                 "skipped: the feed-forward got the bare context, without the output projection, the "
                 "residual and the LayerNorm"),
                (theirs(hidden), "the output is that of a layer attending to the padding too: "
                 "attention_mask was not passed to the self-attention")]]


@pytest.mark.points(3)
@pytest.mark.todo("BertLayer.forward")
def test_layer_matches_torch_transformer_encoder_layer(config, padding_mask):
    ours = randomize(BertLayer(config, attn_implementation="sdpa")).eval()
    hidden = torch.randn(3, 7, config.hidden_size)
    given = hidden.clone()
    out = ours(hidden, additive(padding_mask)).hidden_states
    if not torch.equal(hidden, given):
        fail(f"BertLayer changed its input in place (hidden_states): {IN_PLACE}")
    if not isinstance(out, torch.Tensor) or out.shape != hidden.shape:
        fail(f"the layer's output should be a tensor (B, T, C) = {tuple(hidden.shape)}, got "
             f"{tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__}")
    mistake = layer_mistake(ours, hidden, padding_mask)
    if mistake:
        fail(f"the layer's output is wrong: {mistake}")
    real = padding_mask.bool()  # padded positions' outputs mean nothing; compare the real tokens
    check_close(out[real], torch_layer(ours, config, hidden, padding_mask)[real], "the layer's output at the "
                "real tokens (against torch's nn.TransformerEncoderLayer)",
                wiring_mistakes(ours, config, hidden, padding_mask))


@pytest.mark.points(1)
@pytest.mark.todo("BertLayer.forward")
def test_layer_returns_the_attention_probabilities_when_asked(config, padding_mask):
    layer = randomize(BertLayer(config)).eval()
    hidden, mask = torch.randn(3, 7, config.hidden_size), additive(padding_mask)
    out = layer(hidden, mask, output_attentions=True)
    if out.attention_probs is None:
        fail("BertLayer(..., output_attentions=True) returned no attention probabilities: pass "
             "output_attentions to the self-attention and return its probabilities")
    check_close(out.attention_probs, layer.attention.self(hidden, mask, output_attentions=True).probs,
                "the attention probabilities")
    if layer(hidden, mask).attention_probs is not None:
        fail("BertLayer returned attention probabilities without output_attentions=True")
