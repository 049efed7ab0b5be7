"""Graded, hidden: BertLayer written out with exact (erf) GELU, gradients, and gradcheck."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from graded_helpers import additive, check_close, fail, randomize, use_stand_ins

from minbert.layer import BertLayer

pytestmark = [pytest.mark.component("layer"), pytest.mark.visibility("after_published"),
              pytest.mark.todo("BertLayer.forward")]


@pytest.fixture(autouse=True)
def _stand_ins(monkeypatch):
    use_stand_ins(monkeypatch, "attention", "split_heads", "feed_forward")


def norm(x, ln):
    return F.layer_norm(x, (x.size(-1),), ln.weight, ln.bias, ln.eps)


@pytest.mark.points(2)
def test_layer_is_post_ln_with_exact_gelu(config, padding_mask):
    layer = randomize(BertLayer(config), std=0.7).eval()
    hidden, mask = torch.randn(3, 7, config.hidden_size), additive(padding_mask)
    context = layer.attention.self(hidden, mask).context
    a = layer.attention.output
    attended = norm(hidden + F.linear(context, a.dense.weight, a.dense.bias), a.LayerNorm)
    inner = F.gelu(F.linear(attended, layer.intermediate.dense.weight, layer.intermediate.dense.bias))
    o = layer.output
    expected = norm(attended + F.linear(inner, o.dense.weight, o.dense.bias), o.LayerNorm)
    check_close(layer(hidden, mask).hidden_states, expected, "the layer's output (post-LN, two sub-layers)")


@pytest.mark.points(1)
def test_layer_gradcheck_float64(config):
    layer = randomize(BertLayer(config)).double()
    hidden = torch.randn(2, 5, config.hidden_size, dtype=torch.float64, requires_grad=True)
    mask = additive(torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])).double()
    if not torch.autograd.gradcheck(lambda h: layer(h, mask).hidden_states, (hidden,), raise_exception=False):
        fail("the layer's gradient (float64) does not match finite differences: is some step done outside "
             "autograd (in place on a leaf, .data, .detach(), numpy)?")
