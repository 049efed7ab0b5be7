"""Graded, hidden: the pooler's gradient reaches the [CLS] position only, and its output lies in [-1, 1]."""

from __future__ import annotations

import pytest
import torch
from graded_helpers import fail, randomize

from minbert.model import BertPooler

pytestmark = [pytest.mark.component("pooler"), pytest.mark.visibility("after_published")]


@pytest.mark.points(1)
def test_gradient_reaches_only_cls_and_outputs_are_bounded(config):
    pooler = randomize(BertPooler(config)).eval()
    hidden = torch.randn(4, 6, config.hidden_size, requires_grad=True)
    out = pooler(hidden)
    if out.shape != (4, config.hidden_size) or out.abs().max() > 1:
        fail(f"the pooled output has shape {tuple(out.shape)} and largest magnitude "
             f"{out.abs().max().item():.3g}; expected (B, C) values in [-1, 1], a tanh")
    out.sum().backward()
    if hidden.grad[:, 1:].abs().max() > 0 or hidden.grad[:, 0].abs().max() == 0:
        fail("the gradient must reach the [CLS] position (0) and no other")
