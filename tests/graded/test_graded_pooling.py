"""Graded: mean_pool, the average of the real tokens' vectors (padding excluded)."""

from __future__ import annotations

import pytest
import torch

from minbert.pooling import mean_pool

pytestmark = pytest.mark.component("mean_pool")

HIDDEN = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]],
                       [[-1.0, 0.0], [5.0, 6.0], [7.0, -8.0]]])  # (B=2, T=3, C=2)
MASK = torch.tensor([[1, 1, 0], [1, 1, 1]])


@pytest.mark.points(2)
def test_mean_pool_by_hand():
    expected = torch.tensor([[2.0, 3.0], [11 / 3, -2 / 3]])  # row 0: the first two tokens only
    torch.testing.assert_close(mean_pool(HIDDEN, MASK), expected)


@pytest.mark.points(1)
def test_padding_vectors_do_not_matter():
    hidden = torch.randn(3, 6, 5)
    mask = torch.tensor([[1] * 6, [1] * 4 + [0] * 2, [1] + [0] * 5])
    changed = hidden.clone()
    changed[mask == 0] = 1e4
    torch.testing.assert_close(mean_pool(hidden, mask), mean_pool(changed, mask))
    torch.testing.assert_close(mean_pool(hidden, mask)[1], hidden[1, :4].mean(0))


@pytest.mark.points(1)
def test_mean_pool_is_differentiable_and_skips_padding():
    hidden = torch.randn(2, 4, 3, requires_grad=True)
    mean_pool(hidden, torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1]])).sum().backward()
    torch.testing.assert_close(hidden.grad[0, :, 0], torch.tensor([0.5, 0.5, 0.0, 0.0]))
    torch.testing.assert_close(hidden.grad[1, :, 0], torch.full((4,), 0.25))
