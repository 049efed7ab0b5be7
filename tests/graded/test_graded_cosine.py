"""Graded: cosine_similarity, u.v / (|u| |v|) per row."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from graded_helpers import check_close

from tasks.models.heads import CosinePairHead, cosine_similarity

pytestmark = pytest.mark.component("cosine")


def mistakes(u, v):
    """What common mistakes give, derived from torch's cosine and the two lengths."""
    cos = F.cosine_similarity(u, v)
    lu, lv = torch.linalg.vector_norm(u, dim=1), torch.linalg.vector_norm(v, dim=1)
    return [(cos * lv / lu, "it is normalised by |u|^2 instead of |u| |v|"),
            (cos * lu / lv, "it is normalised by |v|^2 instead of |u| |v|"),
            (cos * lu * lv, "the dot product is not normalised: divide by |u| |v|"),
            (cos * lu * lv / (lu + lv), "it is divided by |u| + |v| instead of |u| |v|")]


@pytest.mark.points(2)
def test_cosine_similarity_by_hand():
    u = torch.tensor([[1.0, 0.0], [3.0, 4.0], [1.0, 1.0], [3.0, 4.0]])
    v = torch.tensor([[0.0, 2.0], [6.0, 8.0], [-1.0, -1.0], [4.0, 3.0]])
    check_close(cosine_similarity(u, v), torch.tensor([0.0, 1.0, -1.0, 0.96]),
                "cos of (1,0)-(0,2), (3,4)-(6,8), (1,1)-(-1,-1), (3,4)-(4,3)", mistakes(u, v))


@pytest.mark.points(1)
def test_cosine_similarity_matches_torch_and_ignores_scale():
    u, v = torch.randn(6, 9), torch.randn(6, 9)
    check_close(cosine_similarity(u, v), F.cosine_similarity(u, v), "the cosine of random rows",
                mistakes(u, v), atol=1e-6)
    check_close(cosine_similarity(3 * u, 0.5 * v), cosine_similarity(u, v),
                "the cosine of 3u and v/2 (it must equal that of u and v)", atol=1e-6)


@pytest.mark.points(1)
def test_cosine_head_logit_is_scaled_cosine_plus_bias():
    head = CosinePairHead(scale=10.0, bias=-7.5)
    check_close(head(torch.tensor([[3.0, 4.0]]), torch.tensor([[4.0, 3.0]])), torch.tensor([10 * 0.96 - 7.5]),
                "the head's logit 10 cos((3,4), (4,3)) - 7.5")
