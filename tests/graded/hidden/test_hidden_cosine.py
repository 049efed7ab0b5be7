"""Graded, hidden: cosine_similarity over batches of different sizes, and of a zero vector."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from graded_helpers import check_close, check_that

from minbert.task_heads import cosine_similarity

pytestmark = [pytest.mark.component("cosine"), pytest.mark.visibility("after_published")]


@pytest.mark.points(1)
def test_large_batch_and_a_zero_vector():
    u, v = torch.randn(64, 384), torch.randn(64, 384)
    check_close(cosine_similarity(u, v), F.cosine_similarity(u, v), "the cosine of 64 pairs of 384-d vectors",
                atol=1e-6)
    zero = cosine_similarity(torch.zeros(1, 4), torch.ones(1, 4))
    check_that(isinstance(zero, torch.Tensor) and torch.isfinite(zero).all(),
               "the cosine of a zero vector is not finite: keep the denominator away from 0 (eps)")
