"""Graded: linear_warmup_decay_factor, linear warm-up then linear decay to 0 (BERT paper appendix A.2)."""

from __future__ import annotations

import pytest
import torch
from graded_helpers import fail

from optim.schedules import linear_warmup_decay, linear_warmup_decay_factor

pytestmark = pytest.mark.component("schedule")


# Worked by hand: t / W while t < W, then (N - t) / (N - W), never below 0.
BY_HAND = {(4, 10): [0, 1 / 4, 2 / 4, 3 / 4, 1, 5 / 6, 4 / 6, 3 / 6, 2 / 6, 1 / 6, 0, 0, 0],
           (0, 5): [1, 4 / 5, 3 / 5, 2 / 5, 1 / 5, 0, 0],  # no warm-up: the decay starts at once
           (5, 5): [0, 1 / 5, 2 / 5, 3 / 5, 4 / 5, 0, 0],  # all warm-up: 0 from step N on
           (2, 6): [0, 1 / 2, 1, 3 / 4, 2 / 4, 1 / 4, 0]}


def check_factors(W: int, N: int, steps: int) -> None:
    want = BY_HAND[W, N][:steps]
    try:
        got = [linear_warmup_decay_factor(t, W, N) for t in range(steps)]
    except ZeroDivisionError:
        fail(f"W = {W} warm-up steps of N = {N} divided by zero: use at least 1 in each denominator")
    for t, (g, w) in enumerate(zip(got, want)):
        if abs(g - w) > 1e-12:
            named = [why for wrong, why in schedule_mistakes(t, W, N, w) if abs(g - wrong) < 1e-12]
            why = (named[0] if named
                   else "the factor must never go below 0 (after N steps it stays 0)" if g < 0
                   else "t / W during the warm-up (t < W), then (N - t) / (N - W), at least 0")
            fail(f"with W = {W} warm-up steps of N = {N}, the factor at step {t} is {g:.4g}, expected "
                 f"{w:.4g}: {why}")


def schedule_mistakes(t: int, W: int, N: int, right: float) -> list[tuple[float, str]]:
    """What common mistakes give at step t (those that differ from the right factor there)."""
    if t < W:
        return [((t + 1) / W, "the warm-up starts at 0 at step 0: t / W, not (t + 1) / W"),
                (t / max(1, W - 1), "the warm-up reaches 1 one step early: t / W, not t / (W - 1); the decay "
                 "starts from 1 at t = W"),
                (right ** 2, "the factor was applied twice (squared): return the factor itself")]
    return [((N - t) / N, "the decay runs from the end of the warm-up: (N - t) / (N - W), not (N - t) / N"),
            (max(0.0, (t - W) / max(1, N - W)), "the decay runs to the wrong end: it rises from 0 at t = W to "
             "1 at t = N; it falls from 1 at t = W to 0 at t = N, (N - t) / (N - W)"),
            (right ** 2, "the factor was applied twice (squared): return the factor itself")]


@pytest.mark.points(2)
def test_factors_by_hand_four_warmup_steps_of_ten():
    check_factors(4, 10, 13)  # 0, .25, .5, .75, 1, 5/6, ..., 1/6, 0, 0, 0


@pytest.mark.points(1)
def test_no_warmup_and_all_warmup_do_not_divide_by_zero():
    check_factors(0, 5, 7)
    check_factors(5, 5, 7)


@pytest.mark.points(1)
def test_scheduler_drives_each_groups_learning_rate():
    weights = [torch.nn.Parameter(torch.zeros(1)), torch.nn.Parameter(torch.zeros(1))]
    optimizer = torch.optim.SGD([{"params": weights[:1], "lr": 1.0}, {"params": weights[1:], "lr": 0.1}])
    scheduler = linear_warmup_decay(optimizer, 2, 6)
    seen = []
    for _ in range(7):
        seen.append([group["lr"] for group in optimizer.param_groups])
        optimizer.step()
        scheduler.step()
    want = [[f, f / 10] for f in BY_HAND[2, 6]]
    if any(abs(a - b) > 1e-9 for row, wanted in zip(seen, want) for a, b in zip(row, wanted)):
        fail(f"the two groups' learning rates over 7 steps were {seen}, expected {want}")
