"""Graded: BertEncoder.forward, the loop over layers, with stand-in layers whose outputs are known."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from minbert.layer import LayerOutput
from minbert.model import BertEncoder

pytestmark = pytest.mark.component("encoder")


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


def encoder(config, ks=(2.0, 3.0, 5.0)) -> BertEncoder:
    enc = BertEncoder(config.replace(num_hidden_layers=len(ks)))
    enc.layer = nn.ModuleList(AffineLayer(k) for k in ks)
    return enc


@pytest.mark.points(3)
def test_each_layer_reads_the_previous_layers_output(config):
    enc = encoder(config)
    x = torch.randn(2, 4, config.hidden_size)
    expected = ((x * 2 + 2) * 3 + 3) * 5 + 5
    out = enc(x, torch.zeros(2, 1, 1, 4))
    torch.testing.assert_close(out.last_hidden_state, expected)
    assert out.hidden_states is None and out.attentions is None


@pytest.mark.points(2)
def test_hidden_states_are_the_embeddings_then_every_layers_output(config):
    enc = encoder(config)
    x = torch.randn(2, 4, config.hidden_size)
    out = enc(x, torch.zeros(2, 1, 1, 4), output_hidden_states=True)
    expected = [x, x * 2 + 2, (x * 2 + 2) * 3 + 3, ((x * 2 + 2) * 3 + 3) * 5 + 5]
    assert len(out.hidden_states) == 4
    for mine, reference in zip(out.hidden_states, expected):
        torch.testing.assert_close(mine, reference)


@pytest.mark.points(1)
def test_attentions_are_collected_in_layer_order(config):
    enc = encoder(config)
    out = enc(torch.randn(2, 4, config.hidden_size), torch.zeros(2, 1, 1, 4), output_attentions=True)
    assert [float(a[0, 0, 0, 0]) for a in out.attentions] == [2.0, 3.0, 5.0]


@pytest.mark.points(1)
def test_every_layer_gets_the_attention_mask(config):
    enc = encoder(config)
    mask = torch.zeros(2, 1, 1, 4)
    enc(torch.randn(2, 4, config.hidden_size), mask)
    assert all(len(layer.masks) == 1 and layer.masks[0] is mask for layer in enc.layer)
