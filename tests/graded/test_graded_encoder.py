"""Graded: BertEncoder.forward, the loop over layers, with stand-in layers whose outputs are known."""

from __future__ import annotations

import pytest
import torch
from graded_helpers import check_close, check_equal, check_that, expectation, fail
from torch import nn

from minbert.layer import LayerOutput
from minbert.encoder import BertEncoder

pytestmark = pytest.mark.component("encoder")

AXES = dict(B=2, T=4, C=32)  # the tests' sizes, for the crashes module

CHAIN = "each layer must read the previous layer's output (the first reads the embeddings)"


class AffineLayer(nn.Module):
    """h -> k h + k, with probabilities all equal to k: the order of layers shows in the result."""

    def __init__(self, k: float) -> None:
        super().__init__()
        self.k = k
        self.masks: list[torch.Tensor] = []

    def forward(self, hidden_states, attention_mask, output_attentions=False):
        self.masks.append(attention_mask)
        B, T, _ = hidden_states.shape
        probs = torch.full((B, 1, T, T), self.k) if output_attentions else None
        return LayerOutput(hidden_states * self.k + self.k, probs)


@expectation
def chained(x: torch.Tensor, layers: int, ks=(2.0, 3.0, 5.0)) -> torch.Tensor:
    """x after the first `layers` stand-in layers h -> k h + k, one after the other."""
    for k in ks[:layers]:
        x = x * k + k
    return x


def encoder(config, ks=(2.0, 3.0, 5.0)) -> BertEncoder:
    enc = BertEncoder(config.replace(num_hidden_layers=len(ks)))
    enc.layer = nn.ModuleList(AffineLayer(k) for k in ks)
    return enc


@pytest.mark.points(3)
def test_each_layer_reads_the_previous_layers_output(config):
    enc = encoder(config)
    x = torch.randn(2, 4, config.hidden_size)
    out = enc(x, torch.zeros(2, 1, 1, 4))
    check_close(out.last_hidden_state, chained(x, 3),
                "the output of three stand-in layers h -> k h + k (k = 2, 3, 5)",
                [(x, f"it is the embeddings, unchanged: {CHAIN}, and the encoder returns the last one's "
                  "output"),
                 (x * 5 + 5, f"it is the last layer applied to the embeddings: {CHAIN}"),
                 (x * 2 + 2, f"it is the first layer's output only: {CHAIN}")])
    if out.hidden_states is not None or out.attentions is not None:
        fail("hidden_states and attentions must be None unless asked for")
    # Training backpropagates through every layer to the embeddings: d out / d x = 2 * 3 * 5 = 30.
    x.requires_grad_(True)
    last = enc(x, torch.zeros(2, 1, 1, 4)).last_hidden_state
    if not isinstance(last, torch.Tensor) or not last.requires_grad:
        fail("the encoder's output does not require a gradient although its input does: no gradient "
             "reaches the embeddings (a .detach(), .data or torch.no_grad() between the layers)")
    last.sum().backward()
    check_close(x.grad, torch.full_like(x, 30.0), "the gradient of the summed output with respect to the "
                "embeddings, through layers h -> k h + k (k = 2, 3, 5: 30)")


@pytest.mark.points(2)
def test_hidden_states_are_the_embeddings_then_every_layers_output(config):
    enc = encoder(config)
    x = torch.randn(2, 4, config.hidden_size)
    out = enc(x, torch.zeros(2, 1, 1, 4), output_hidden_states=True)
    if out.hidden_states is None or len(out.hidden_states) != 4:
        fail("with 3 layers, output_hidden_states=True must give 4 tensors (the embeddings, then each "
             f"layer's output), got {None if out.hidden_states is None else len(out.hidden_states)}")
    if not all(isinstance(h, torch.Tensor) and h.shape == x.shape for h in out.hidden_states):
        got = [tuple(h.shape) if isinstance(h, torch.Tensor) else type(h).__name__ for h in out.hidden_states]
        fail(f"hidden_states should be 4 tensors of shape (B, T, C) = (2, 4, 32), got {got}")
    check_close(torch.stack(list(out.hidden_states)), torch.stack([chained(x, n) for n in range(4)]),
                "the 4 hidden states (the embeddings, then each layer's output)", [
                    (lambda: torch.stack([chained(x, max(n - 1, 0)) for n in range(4)]), "hidden_states came "
                     "back one layer late: the embeddings twice, then each layer's output but the last's; "
                     "collect each layer's output after the layer, not before it")],
                rows=["hidden_states[0] (the embeddings)"] + [f"hidden_states[{n}] (layer {n}'s output)"
                                                             for n in (1, 2, 3)])


@pytest.mark.points(1)
def test_attentions_are_collected_in_layer_order(config):
    enc = encoder(config)
    out = enc(torch.randn(2, 4, config.hidden_size), torch.zeros(2, 1, 1, 4), output_attentions=True)
    if out.attentions is None or len(out.attentions) != 3:
        fail("with 3 layers, output_attentions=True must give 3 tensors (each layer's probabilities), got "
             f"{None if out.attentions is None else len(out.attentions)}")
    if not all(isinstance(a, torch.Tensor) for a in out.attentions):
        fail(f"the attentions came back as {[type(a).__name__ for a in out.attentions]}, not tensors: "
             "output_attentions was not passed to the layers (a layer returns probabilities only when asked)")
    check_equal([float(a[0, 0, 0, 0]) for a in out.attentions], [2.0, 3.0, 5.0],
                "the attentions of layers with k = 2, 3, 5 (each layer's probabilities, in layer order)")


@pytest.mark.points(1)
def test_every_layer_gets_the_attention_mask(config):
    enc = encoder(config)
    mask = torch.zeros(2, 1, 1, 4)
    enc(torch.randn(2, 4, config.hidden_size), mask)
    check_equal([len(layer.masks) for layer in enc.layer], [1, 1, 1], "the number of times each of the 3 "
                "layers was called (once each)")
    for number, layer in enumerate(enc.layer):
        check_that(all(seen is mask for seen in layer.masks), f"layer {number} was called without the "
                   "encoder's attention mask: pass the mask to every layer")
