"""Graded: cosine_similarity, u.v / (|u| |v|) per row."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from graded_helpers import check_close, check_that, expectation

from minbert.task_heads import CosinePairHead, cosine_similarity

pytestmark = pytest.mark.component("cosine")


@expectation
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


@pytest.mark.points(1)
def test_short_and_zero_vectors_and_the_gradient():
    # |u| |v| = 2e-6 is far above eps = 1e-8: the exact cosine, 1; a zero vector: 0, not NaN. (How eps
    # keeps the denominator away from 0 below that, on the product or on each length, is not graded.)
    u = torch.tensor([[1e-3, 0.0], [0.0, 0.0]], dtype=torch.float64)
    v = torch.tensor([[2e-3, 0.0], [1.0, 2.0]], dtype=torch.float64)
    check_close(cosine_similarity(u, v), torch.tensor([1.0, 0.0], dtype=torch.float64),
                "cos of (1e-3, 0)-(2e-3, 0) and of the zero vector-(1, 2)", [
                    (torch.tensor([2e-6 / (2e-6 + 1e-8), 0.0], dtype=torch.float64),
                     "eps was added to the denominator, |u| |v| + eps, which shrinks the cosine of short "
                     "vectors; keep the denominator at least eps instead: max(|u| |v|, eps)"),
                    (torch.tensor([1.0, float("nan")], dtype=torch.float64),
                     "the zero vector gave 0 / 0 = NaN: keep the denominator away from 0 (eps), max(|u| |v|, "
                     "eps)")])
    # The gradient, which training a similarity model follows, against torch's cosine. In float64 every
    # correct way of writing the cosine (clamped product, F.normalize, either order) agrees to ~1e-15;
    # a detached length is off by the size of the gradient itself, ~0.1.
    u, v = torch.randn(4, 6, dtype=torch.float64), torch.randn(4, 6, dtype=torch.float64)
    weights = torch.randn(4, dtype=torch.float64)
    ours_u = u.clone().requires_grad_(True)
    cos = cosine_similarity(ours_u, v)
    check_that(isinstance(cos, torch.Tensor) and cos.requires_grad, "the cosine of vectors that require a "
               "gradient does not: no gradient reaches u (a .detach(), .data, .item() or numpy "
               "on the way cuts the graph)")
    (cos * weights).sum().backward()
    check_close(ours_u.grad, torch_gradient(u, v, weights), "the gradient of the cosine with respect to u "
                "(float64, against torch's)", gradient_mistakes(u, v, weights), atol=1e-9)


@expectation
def torch_gradient(u, v, weights):
    theirs_u = u.clone().requires_grad_(True)
    (F.cosine_similarity(theirs_u, v) * weights).sum().backward()
    return theirs_u.grad


@expectation
def gradient_mistakes(u, v, weights):
    # With the lengths held constant the gradient would be v / (|u| |v|) = v cos / (u.v) per row.
    constant_lengths = v * (F.cosine_similarity(u, v) / torch.linalg.vecdot(u, v) * weights)[:, None]
    return [(constant_lengths, "it treats |u| |v| as a constant (the lengths were detached); the lengths "
             "depend on u and v too")]
