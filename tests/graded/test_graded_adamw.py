"""Graded: adamw_update, one AdamW step of one parameter, against torch.optim.AdamW and by hand."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from optim.adamw import AdamW, adamw_update

pytestmark = pytest.mark.component("adamw")

RTOL, ATOL = 1e-6, 1e-12  # torch's own update, in the same order: equal to float32 rounding


def run(steps: int, **hyper):
    """`steps` updates of one (5, 7) parameter by adamw_update and by torch.optim.AdamW, same gradients."""
    ours = torch.randn(5, 7)
    theirs = nn.Parameter(ours.clone())
    reference = torch.optim.AdamW([theirs], foreach=False, **hyper)
    m, v = torch.zeros_like(ours), torch.zeros_like(ours)
    v_max = torch.zeros_like(ours) if hyper.get("amsgrad") else None
    beta1, beta2 = hyper.get("betas", (0.9, 0.999))
    for t in range(1, steps + 1):
        grad = torch.randn(5, 7) * (0.1 if t % 2 else 3.0)
        adamw_update(ours, grad.clone(), m, v, v_max, t, lr=hyper["lr"], beta1=beta1, beta2=beta2,
                     eps=hyper.get("eps", 1e-8), weight_decay=hyper.get("weight_decay", 1e-2))
        theirs.grad = grad
        reference.step()
    return ours, theirs.detach(), m, reference.state[theirs]["exp_avg"]


@pytest.mark.points(2)
def test_one_step_matches_torch_adamw():
    ours, theirs, m, ref_m = run(1, lr=1e-2, weight_decay=0.0)
    torch.testing.assert_close(ours, theirs, rtol=RTOL, atol=ATOL)
    torch.testing.assert_close(m, ref_m, rtol=RTOL, atol=ATOL)


@pytest.mark.points(2)
def test_five_steps_with_weight_decay_match_torch_adamw():
    ours, theirs, m, ref_m = run(5, lr=1e-2, weight_decay=0.5, eps=1e-3, betas=(0.8, 0.99))
    torch.testing.assert_close(ours, theirs, rtol=RTOL, atol=ATOL)
    torch.testing.assert_close(m, ref_m, rtol=RTOL, atol=ATOL)


@pytest.mark.points(1)
def test_amsgrad_matches_torch_adamw():
    ours, theirs, _, _ = run(5, lr=1e-2, weight_decay=0.1, eps=1e-3, amsgrad=True)
    torch.testing.assert_close(ours, theirs, rtol=RTOL, atol=ATOL)


@pytest.mark.points(2)
def test_first_step_on_a_scalar_by_hand():
    # lr 0.1, decay 0.1: theta = 1 * (1 - 0.01) = 0.99; m = 0.1 * 0.5 = 0.05; v = 0.001 * 0.25 = 0.00025;
    # corrected: m / 0.1 = 0.5, sqrt(v / 0.001) = 0.5, so the step is 0.1 * 0.5 / 0.5 = 0.1: theta = 0.89.
    param, grad = torch.tensor([1.0], dtype=torch.float64), torch.tensor([0.5], dtype=torch.float64)
    m, v = torch.zeros_like(param), torch.zeros_like(param)
    adamw_update(param, grad, m, v, None, 1, lr=0.1, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.1)
    assert param.item() == pytest.approx(0.89, abs=1e-7)
    assert (m.item(), v.item()) == (pytest.approx(0.05), pytest.approx(0.00025))


@pytest.mark.points(1)
def test_readable_optimizer_path_trains_like_torch():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 2))
    ref = copy.deepcopy(model)
    ours = AdamW(model.parameters(), lr=1e-2, weight_decay=0.1, foreach=False)
    theirs = torch.optim.AdamW(ref.parameters(), lr=1e-2, weight_decay=0.1, foreach=False)
    for _ in range(4):
        x = torch.randn(8, 4)
        for net, opt in ((model, ours), (ref, theirs)):
            opt.zero_grad()
            net(x).pow(2).mean().backward()
            opt.step()
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-7)
