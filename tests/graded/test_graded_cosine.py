"""Graded: cosine_similarity, u.v / (|u| |v|) per row."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tasks.models.heads import CosinePairHead, cosine_similarity

pytestmark = pytest.mark.component("cosine")


@pytest.mark.points(2)
def test_cosine_similarity_by_hand():
    u = torch.tensor([[1.0, 0.0], [3.0, 4.0], [1.0, 1.0], [3.0, 4.0]])
    v = torch.tensor([[0.0, 2.0], [6.0, 8.0], [-1.0, -1.0], [4.0, 3.0]])
    torch.testing.assert_close(cosine_similarity(u, v), torch.tensor([0.0, 1.0, -1.0, 0.96]))


@pytest.mark.points(1)
def test_cosine_similarity_matches_torch_and_ignores_scale():
    u, v = torch.randn(6, 9), torch.randn(6, 9)
    torch.testing.assert_close(cosine_similarity(u, v), F.cosine_similarity(u, v), atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(cosine_similarity(3 * u, 0.5 * v), cosine_similarity(u, v),
                               atol=1e-6, rtol=1e-5)


@pytest.mark.points(1)
def test_cosine_head_logit_is_scaled_cosine_plus_bias():
    head = CosinePairHead(scale=10.0, bias=-7.5)
    torch.testing.assert_close(head(torch.tensor([[3.0, 4.0]]), torch.tensor([[4.0, 3.0]])),
                               torch.tensor([10 * 0.96 - 7.5]))
