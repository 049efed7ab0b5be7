"""Graded, hidden: LoRALinear on a base layer without bias, extra leading axes, and float64 gradients."""

from __future__ import annotations

import pytest
import torch
from graded_helpers import check_close
from torch import nn

from minbert.lora import LoRALinear

pytestmark = [pytest.mark.component("lora"), pytest.mark.visibility("after_published")]


@pytest.mark.points(1)
def test_no_bias_and_leading_axes_against_the_merged_matrix():
    base = nn.Linear(6, 5, bias=False).double()
    layer = LoRALinear(base, r=3, alpha=1.5)
    with torch.no_grad():
        layer.lora_A.normal_()
        layer.lora_B.normal_()
    full = base.weight.detach() + 0.5 * layer.lora_B.detach() @ layer.lora_A.detach()  # W + (alpha / r) B A
    x = torch.randn(2, 3, 4, 6, dtype=torch.float64, requires_grad=True)
    reference = x.detach().clone().requires_grad_(True)
    weights = torch.randn(2, 3, 4, 5, dtype=torch.float64)
    out = layer(x)
    check_close(out, torch.einsum("oi,...i->...o", full, reference.detach()),
                "the output on (2, 3, 4, 6) inputs, base without bias (float64)", atol=1e-9)
    (out * weights).sum().backward()
    (torch.einsum("oi,...i->...o", full, reference) * weights).sum().backward()
    check_close(x.grad, reference.grad, "the gradient with respect to the input (float64)", atol=1e-9)
