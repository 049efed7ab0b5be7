"""Graded, hidden: the pooler's gradient reaches the [CLS] position only, and its output lies in [-1, 1]."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from graded_helpers import check_close, check_that, randomize

from minbert.model import BertPooler

pytestmark = [pytest.mark.component("pooler"), pytest.mark.visibility("after_published")]


@pytest.mark.points(1)
def test_gradient_reaches_only_cls_and_outputs_are_bounded(config):
    pooler = randomize(BertPooler(config)).eval()
    hidden = torch.randn(4, 6, config.hidden_size, requires_grad=True)
    out = pooler(hidden)
    check_close(out, torch.tanh(F.linear(hidden[:, 0], pooler.dense.weight, pooler.dense.bias)),
                "the pooled output of 4 sequences of 6 tokens")
    check_that(out.shape == (4, config.hidden_size) and out.abs().max() <= 1, "the pooled output has shape "
               f"{tuple(out.shape)} and largest magnitude {out.abs().max().item():.3g}; expected (B, C) "
               "values in [-1, 1], a tanh")
    out.sum().backward()
    check_that(hidden.grad[:, 1:].abs().max() == 0 and hidden.grad[:, 0].abs().max() > 0,
               "the gradient must reach the [CLS] position (0) and no other")
