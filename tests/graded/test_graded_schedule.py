"""Graded: linear_warmup_decay_factor, linear warm-up then linear decay to 0 (BERT paper appendix A.2)."""

from __future__ import annotations

import pytest
import torch
from graded_helpers import check_close, expectation, fail

from optim.schedules import linear_warmup_decay, linear_warmup_decay_factor

pytestmark = pytest.mark.component("schedule")


@expectation
def by_hand(W: int, N: int, steps: int) -> torch.Tensor:
    """Worked by hand: t / W while t < W, then (N - t) / (N - W), never below 0."""
    factors = {(4, 10): [0, 1 / 4, 2 / 4, 3 / 4, 1, 5 / 6, 4 / 6, 3 / 6, 2 / 6, 1 / 6, 0, 0, 0],
               (0, 5): [1, 4 / 5, 3 / 5, 2 / 5, 1 / 5, 0, 0],  # no warm-up: the decay starts at once
               (5, 5): [0, 1 / 5, 2 / 5, 3 / 5, 4 / 5, 0, 0],  # all warm-up: 0 from step N on
               (2, 6): [0, 1 / 2, 1, 3 / 4, 2 / 4, 1 / 4, 0]}[W, N]
    return torch.tensor(factors[:steps], dtype=torch.float64)


def check_factors(W: int, N: int, steps: int) -> None:
    __tracebackhide__ = True
    try:
        got = [linear_warmup_decay_factor(t, W, N) for t in range(steps)]
    except ZeroDivisionError:
        fail(f"W = {W} warm-up steps of N = {N} divided by zero: use at least 1 in each denominator")
    check_close(torch.tensor(got, dtype=torch.float64), by_hand(W, N, steps), f"with W = {W} warm-up steps "
                f"of N = {N}, the factors at steps 0 to {steps - 1}", schedule_mistakes(W, N, steps),
                atol=1e-12, rtol=0)


@expectation
def schedule_mistakes(W: int, N: int, steps: int) -> list[tuple[torch.Tensor, str]]:
    """What common mistakes give at every step: each one wrong in the warm-up or in the decay, the rest
    right."""
    right = by_hand(W, N, steps).tolist()

    def sequence(warmup=None, decay=None, squared=False):
        values = [(warmup(t) if warmup and t < W else decay(t) if decay and t >= W else right[t])
                  for t in range(steps)]
        return torch.tensor([v * v if squared else v for v in values], dtype=torch.float64)

    return [(sequence(warmup=lambda t: (t + 1) / W), "the warm-up starts at 0 at "
                                                     "step 0: t / W, not (t + 1) / W"),
            (sequence(warmup=lambda t: t / max(1, W - 1)), "the warm-up reaches 1 one step early: t / W, not "
             "t / (W - 1); the decay starts from 1 at t = W"),
            (sequence(squared=True), "the factor was applied twice (squared): return the factor itself"),
            (sequence(warmup=lambda t: (t / W) ** 2), "the factor was applied twice (squared) in the "
             "warm-up: return t / W itself"),
            (sequence(decay=lambda t: max(0.0, (N - t) / N)), "the decay runs from the end of the warm-up: "
             "(N - t) / (N - W), not (N - t) / N"),
            (sequence(decay=lambda t: (N - t) / max(1, N - W)), "the factor must never go below 0 (after N "
             "steps it stays 0)"),
            (sequence(decay=lambda t: max(0.0, (t - W) / max(1, N - W))), "the decay runs to the wrong end: "
             "it rises from 0 at t = W to 1 at t = N; it falls from 1 at t = W to 0 at "
             "t = N, (N - t) / (N - W)")]


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
    check_close(torch.tensor(seen, dtype=torch.float64), by_hand(2, 6, 7)[:, None] * torch.tensor([1.0, 0.1],
                dtype=torch.float64), "the two groups' learning rates (base 1 and 0.1) over 7 "
                "steps with W = 2 of N = 6", atol=1e-9, rtol=0)
