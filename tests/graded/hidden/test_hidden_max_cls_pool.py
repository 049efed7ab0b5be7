"""Graded, hidden: max_pool's gradient goes to the winning real token of each feature."""

from __future__ import annotations

import pytest
import torch
from graded_helpers import check_close

from minbert.pooling import max_pool

pytestmark = [pytest.mark.component("max_cls_pool"), pytest.mark.visibility("after_published"),
              pytest.mark.todo("max_pool")]


@pytest.mark.points(1)
def test_gradient_reaches_the_winners_only():
    hidden = torch.tensor([[[1.0, 5.0], [2.0, -1.0], [9.0, 9.0]]], requires_grad=True)  # token 2 is padding
    max_pool(hidden, torch.tensor([[1, 1, 0]])).sum().backward()
    check_close(hidden.grad, torch.tensor([[[0.0, 1.0], [1.0, 0.0], [0.0, 0.0]]]),
                "the gradient of the maximum")
