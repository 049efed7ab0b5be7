"""Graded, hidden: linear_warmup_decay_factor on many (warm-up, total) pairs."""

from __future__ import annotations

import pytest
import torch
from graded_helpers import check_close, expectation

from optim.schedules import linear_warmup_decay_factor

pytestmark = [pytest.mark.component("schedule"), pytest.mark.visibility("after_published")]


@pytest.mark.points(1)
def test_many_warmup_and_total_pairs():
    for W, N in ((1, 2), (3, 3), (10, 1000), (0, 1), (7, 50)):
        got = [linear_warmup_decay_factor(t, W, N) for t in range(N + 3)]
        check_close(torch.tensor(got, dtype=torch.float64), factors(W, N),
                    f"with W = {W}, N = {N}, the factors at steps 0 to {N + 2}", atol=1e-12, rtol=0)


@expectation
def factors(W: int, N: int) -> torch.Tensor:
    return torch.tensor([t / W if t < W else max(0.0, (N - t) / (N - W) if N > W else 0.0)
                         for t in range(N + 3)], dtype=torch.float64)
