"""Graded, hidden: BertIntermediate on extra leading axes, and its gradient, the exact GELU's derivative."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from graded_helpers import check_close, expectation, randomize

from minbert.layer import BertIntermediate

pytestmark = [pytest.mark.component("feed_forward"), pytest.mark.visibility("after_published")]


@pytest.mark.points(1)
def test_gradient_is_that_of_the_exact_gelu(config):
    ffn = randomize(BertIntermediate(config)).double()
    hidden = torch.randn(2, 3, 4, config.hidden_size, dtype=torch.float64, requires_grad=True)
    weights = torch.randn(2, 3, 4, config.intermediate_size, dtype=torch.float64)
    (ffn(hidden) * weights).sum().backward()
    check_close(hidden.grad, torch_gradient(ffn, hidden.detach(), weights),
                "the gradient with respect to the input (float64)", atol=1e-9)


@expectation
def torch_gradient(ffn, hidden, weights):
    reference = hidden.clone().requires_grad_(True)
    (F.gelu(F.linear(reference, ffn.dense.weight, ffn.dense.bias)) * weights).sum().backward()
    return reference.grad
