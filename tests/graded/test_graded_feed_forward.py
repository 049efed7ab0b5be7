"""Graded: BertIntermediate.forward, the feed-forward network's expansion GELU(h W^T + b), exact GELU."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from graded_helpers import check_close, expectation
from safetensors.torch import load_file

from minbert.layer import BertIntermediate

pytestmark = pytest.mark.component("feed_forward")

TANH = ("this is the tanh approximation of GELU (off by up to ~1e-3): BERT uses the exact form "
        "x Phi(x), Phi the standard normal CDF (erf)")
RELU = "this is ReLU; BERT uses GELU, x Phi(x)"
NO_ACTIVATION = "the activation is missing: GELU(h W^T + b)"
STORED = Path(__file__).resolve().parent / "reference" / "feed_forward.safetensors"


@pytest.mark.points(2)
def test_intermediate_is_exact_gelu_of_the_expansion(config):
    t = load_file(str(STORED))  # made by a staff script
    ffn = BertIntermediate(config).eval()
    ffn.load_state_dict({name: t[name] for name in ffn.state_dict()})
    check_close(ffn(t["hidden"]), t["output"], "the intermediate output (B, T, I) = (3, 7, 37)",
                [(t["tanh_gelu"], TANH), (t["relu"], RELU), (t["no_activation"], NO_ACTIVATION)])


@pytest.mark.points(1)
def test_gelu_by_hand_at_a_few_points(config):
    ffn = BertIntermediate(config.replace(hidden_size=4, intermediate_size=4, num_attention_heads=1)).eval()
    with torch.no_grad():  # W = I, b = 0: the output is GELU of the input itself
        ffn.dense.weight.copy_(torch.eye(4))
        ffn.dense.bias.zero_()
    x = torch.tensor([[[-1.0, 0.0, 1.0, 2.0]]])
    check_close(ffn(x), gelu_by_hand(x), "GELU(-1, 0, 1, 2) through an identity layer",
                [(F.gelu(x, approximate="tanh"), TANH), (F.relu(x), RELU), (x, NO_ACTIVATION)], atol=1e-6)


@expectation
def gelu_by_hand(x: torch.Tensor) -> torch.Tensor:
    """x Phi(x), Phi the standard normal CDF, element by element with math.erf."""
    values = [v * 0.5 * (1 + math.erf(v / math.sqrt(2))) for v in x.flatten().tolist()]
    return torch.tensor(values).view(x.shape)
