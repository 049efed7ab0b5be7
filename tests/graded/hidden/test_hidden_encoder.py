"""Graded, hidden: BertEncoder with one layer and with many, stand-in layers."""

from __future__ import annotations

import pytest
import torch
from graded_helpers import check_close
from torch import nn

from minbert.layer import LayerOutput
from minbert.encoder import BertEncoder

pytestmark = [pytest.mark.component("encoder"), pytest.mark.visibility("after_published")]


class Shift(nn.Module):
    def __init__(self, k: float) -> None:
        super().__init__()
        self.k = k

    def forward(self, hidden_states, attention_mask, output_attentions=False):
        return LayerOutput(hidden_states + self.k, None)


@pytest.mark.points(1)
def test_one_layer_and_twelve_layers(config):
    for ks in ((7.0,), tuple(float(k) for k in range(12))):
        enc = BertEncoder(config.replace(num_hidden_layers=len(ks)))
        enc.layer = nn.ModuleList(Shift(k) for k in ks)
        x = torch.randn(1, 3, config.hidden_size)
        out = enc(x, torch.zeros(1, 1, 1, 3), output_hidden_states=True)
        check_close(out.last_hidden_state, x + sum(ks), f"the output of {len(ks)} layers h -> h + k")
        check_close(out.hidden_states[-1], x + sum(ks), "the last of hidden_states (the output)")
