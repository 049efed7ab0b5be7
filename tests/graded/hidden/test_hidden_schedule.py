"""Graded, hidden: linear_warmup_decay_factor on many (warm-up, total) pairs."""

from __future__ import annotations

import pytest
from graded_helpers import fail

from optim.schedules import linear_warmup_decay_factor

pytestmark = [pytest.mark.component("schedule"), pytest.mark.visibility("after_published")]


@pytest.mark.points(1)
def test_many_warmup_and_total_pairs():
    for W, N in ((1, 2), (3, 3), (10, 1000), (0, 1), (7, 50)):
        for t in range(N + 3):
            want = t / W if t < W else max(0.0, (N - t) / (N - W) if N > W else 0.0)
            got = linear_warmup_decay_factor(t, W, N)
            if abs(got - want) > 1e-12:
                fail(f"with W = {W}, N = {N} the factor at step {t} is {got:.6g}, expected {want:.6g}")
