"""Graded: LoRALinear.forward, a frozen linear layer plus the low-rank update (alpha / r) B A (Hu et al.).

y = W x + b + (alpha / r) B A dropout(x) while the adapter is separate; once merge() has added
(alpha / r) B A into W, y = W x + b alone. Only A and B learn.
"""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F
from graded_helpers import check_close, check_that, expectation, fail, randomize
from torch import nn

from minbert.lora import LoRALinear

pytestmark = pytest.mark.component("lora")

MERGED_AGAIN = ("after merge() the base weight already holds (alpha / r) B A: a merged layer must not add "
                "the update again (check self.merged)")


def lora_layer(in_features: int, out_features: int, r: int, alpha: float, dropout: float = 0.0) -> LoRALinear:
    """A LoRALinear on a random base layer, with random A and B (B is zero only when fresh)."""
    layer = LoRALinear(randomize(nn.Linear(in_features, out_features)), r, alpha, dropout)
    with torch.no_grad():
        layer.lora_A.normal_()
        layer.lora_B.normal_()
    return layer


@pytest.mark.points(2)
def test_forward_by_hand():
    layer = LoRALinear(nn.Linear(3, 2), r=2, alpha=4.0)  # alpha / r = 2
    with torch.no_grad():
        layer.base_layer.weight.copy_(torch.tensor([[1.0, 0.0, -1.0], [2.0, 1.0, 0.0]]))
        layer.base_layer.bias.copy_(torch.tensor([0.5, -1.0]))
        layer.lora_A.copy_(torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 1.0]]))  # A x = (1, 5)
        layer.lora_B.copy_(torch.tensor([[1.0, 0.0], [1.0, -1.0]]))  # B A x = (1, -4)
    x = torch.tensor([[1.0, 2.0, 3.0]])  # W x + b = (-1.5, 3)
    check_close(layer(x), torch.tensor([[0.5, -5.0]]), "the output of a 3 -> 2 layer with r = 2, alpha = 4", [
        (torch.tensor([[2.5, -13.0]]), "the update was scaled by alpha instead of alpha / r (§4.1)"),
        (torch.tensor([[-0.5, -1.0]]), "the update (alpha / r) B A x was not multiplied by alpha / r"),
        (torch.tensor([[-1.5, 3.0]]), "the output is the base layer's alone: the update B A x is missing"),
        (torch.tensor([[0.0, -4.0]]), "the base layer's bias b is missing"),
    ])


@pytest.mark.points(1)
def test_a_fresh_adapter_changes_nothing():
    layer = LoRALinear(randomize(nn.Linear(7, 5)), r=3, alpha=6.0)
    if layer.lora_B.abs().max() != 0:
        fail("a fresh LoRALinear's B must start at zero, so that B A = 0 and the adapted model begins as "
             "exactly the pretrained one (§4.1)")
    x = torch.randn(2, 4, 7)
    check_close(layer(x), layer.base_layer(x), "a fresh LoRALinear's output on (2, 4, 7) inputs (B = 0, so "
                "it must equal the base layer's)")


@pytest.mark.points(1)
def test_only_a_and_b_learn_with_the_right_gradients():
    layer = lora_layer(5, 4, r=2, alpha=3.0)
    x, weights = torch.randn(6, 5), torch.randn(6, 4)
    (layer(x) * weights).sum().backward()
    base = layer.base_layer
    if base.weight.requires_grad or base.bias.requires_grad or base.weight.grad is not None:
        fail("the base layer's weight got a gradient: the base layer must stay frozen (requires_grad False); "
             "only A and B train (§4.1)")
    check_close(layer.lora_B.grad, 3.0 / 2 * weights.T @ (x @ layer.lora_A.detach().T), "B's gradient")
    check_close(layer.lora_A.grad, 3.0 / 2 * (weights @ layer.lora_B.detach()).T @ x, "A's gradient")


@pytest.mark.points(2)
def test_a_merged_layer_gives_the_same_output_once():
    layer = lora_layer(6, 3, r=2, alpha=4.0)
    x = torch.randn(5, 6)
    start = {name: p.detach().clone() for name, p in layer.named_parameters()}
    with torch.no_grad():
        check_close(layer(x), adapted(x, start, 2.0), "the output before merge() "
                                                      "(W x + b + (alpha / r) B A x)")
        layer.merge()
        check_close(layer(x), adapted(x, start, 2.0), "the output after merge()",
                    [(lambda: adapted(x, start, 2.0, updates=2), MERGED_AGAIN)])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            layer.merge()
        check_close(layer(x), adapted(x, start, 2.0), "the output after merge() twice", [
            (lambda: adapted(x, start, 2.0, updates=2), "merging twice added the update twice: merge() on a "
             "merged layer must change nothing"),
            (lambda: adapted(x, start, 2.0, updates=3), MERGED_AGAIN)])
        layer.unmerge()
        check_close(layer(x), adapted(x, start, 2.0), "the output after merge() and unmerge()")


@expectation
def adapted(x, start: dict, scaling: float, updates: int = 1) -> torch.Tensor:
    """W x + b + updates (alpha / r) B A x, from the layer's parameters at the start."""
    update = scaling * start["lora_B"] @ start["lora_A"]
    return F.linear(x, start["base_layer.weight"] + updates * update, start["base_layer.bias"])


@pytest.mark.points(1)
def test_dropout_acts_on_the_adapters_input():
    torch.manual_seed(0)
    layer = LoRALinear(randomize(nn.Linear(4, 4)), r=4, alpha=4.0, dropout=0.5)  # alpha / r = 1
    mixing = torch.eye(4) + 0.3 * torch.randn(4, 4)
    with torch.no_grad():
        layer.lora_A.copy_(mixing)  # B A = A: the update is A dropout(x)
        layer.lora_B.copy_(torch.eye(4))
    x = torch.randn(300, 4)
    with torch.no_grad():
        update = layer(x) - layer.base_layer(x)
        undone = torch.linalg.solve(mixing, update.T).T  # dropout(x), if all is well
        ratio = undone / x  # each element 0 (dropped) or 1 / (1 - p) = 2 (kept and scaled)
        dropped_or_kept = ((ratio.abs() < 1e-3) | ((ratio - 2).abs() < 1e-3)).float().mean()
        if torch.allclose(ratio, torch.ones_like(ratio), atol=1e-3):
            fail("no dropout in training mode: the adapter's input must go through self.lora_dropout")
        check_that(dropped_or_kept >= 0.99, "in training mode the update is not (alpha / r) B A dropout(x): "
                   "dropout belongs on the adapter's input x, not on its output or on the base layer's path")
        layer.eval()
        check_close(layer(x) - layer.base_layer(x), x @ mixing.T, "the update in eval mode (no dropout)")
