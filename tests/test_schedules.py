"""Tests for optim/schedules.py: parity with transformers' schedules, the ULMFiT and exponential formulas
worked by hand, resuming from state dicts, and argument checks."""

from __future__ import annotations

import io
import math

import pytest
import torch
import transformers
from torch import nn

from optim.adamw import AdamW
from optim.schedules import (
    SCHEDULES,
    constant_warmup,
    cosine_warmup,
    exponential_decay,
    exponential_decay_factor,
    linear_warmup_decay,
    slanted_triangular,
    slanted_triangular_factor,
)


def _optimizer(lrs: tuple[float, ...] = (2e-5, 1e-3)) -> AdamW:
    """Our AdamW with one group per lr (schedules must keep per-group ratios)."""
    return AdamW([{"params": [nn.Parameter(torch.zeros(2))], "lr": lr} for lr in lrs])


def _lrs(scheduler: torch.optim.lr_scheduler.LRScheduler, steps: int) -> list[list[float]]:
    """The lr of every group before each of `steps` optimizer steps."""
    out = []
    for _ in range(steps):
        out.append([g["lr"] for g in scheduler.optimizer.param_groups])
        scheduler.optimizer.step()  # no gradients: a no-op, but keeps torch's call-order check quiet
        scheduler.step()
    return out


# ----- parity with transformers -------------------------------------------------------------------

@pytest.mark.parametrize("warmup, total", [(0, 10), (3, 10), (10, 10), (7, 50), (1, 1)])
def test_linear_warmup_decay_equals_transformers(warmup: int, total: int) -> None:
    ours = linear_warmup_decay(_optimizer(), warmup, total)
    theirs = transformers.get_linear_schedule_with_warmup(_optimizer(), warmup, total)
    # Past the end too (total + 5): both hold 0. Exact equality: the same floats in the same order.
    assert _lrs(ours, total + 5) == _lrs(theirs, total + 5)


@pytest.mark.parametrize("warmup, total, cycles", [(0, 10, 0.5), (3, 20, 0.5), (5, 30, 2.0)])
def test_cosine_warmup_equals_transformers(warmup: int, total: int, cycles: float) -> None:
    ours = cosine_warmup(_optimizer(), warmup, total, num_cycles=cycles)
    theirs = transformers.get_cosine_schedule_with_warmup(_optimizer(), warmup, total, num_cycles=cycles)
    assert _lrs(ours, total + 3) == _lrs(theirs, total + 3)


@pytest.mark.parametrize("warmup", [0, 1, 4])
def test_constant_warmup_equals_transformers(warmup: int) -> None:
    ours = constant_warmup(_optimizer(), warmup)
    theirs = transformers.get_constant_schedule_with_warmup(_optimizer(), warmup)
    assert _lrs(ours, 10) == _lrs(theirs, 10)


def test_linear_warmup_decay_shape() -> None:
    lrs = [g[0] for g in _lrs(linear_warmup_decay(_optimizer((1.0,)), 4, 12), 14)]
    assert lrs[:5] == [0.0, 0.25, 0.5, 0.75, 1.0]  # warm-up reaches the base lr at step = warmup
    assert lrs[8] == 0.5 and lrs[12:] == [0.0, 0.0]  # halfway down at step 8, then zero


# ----- ULMFiT slanted triangular (Howard & Ruder 2018, eq. 3) -------------------------------------

def test_slanted_triangular_follows_eq_3_by_hand() -> None:
    # T = 100, cut_frac = 0.1, ratio = 32: cut = 10.
    #   t = 0:   p = 0                          lr = (1 + 0) / 32          = 1/32
    #   t = 5:   p = 5/10 = 0.5                 lr = (1 + 0.5 * 31) / 32    = 16.5/32
    #   t = 10:  p = 1 - 0 / (10 * 9) = 1       lr = 32/32                  = 1
    #   t = 55:  p = 1 - 45 / 90 = 0.5          lr = 16.5/32
    #   t = 100: p = 1 - 90 / 90 = 0            lr = 1/32
    for t, expected in [(0, 1 / 32), (5, 16.5 / 32), (10, 1.0), (55, 16.5 / 32), (100, 1 / 32)]:
        assert slanted_triangular_factor(t, 100) == pytest.approx(expected, rel=1e-12), t
    lrs = [g[0] for g in _lrs(slanted_triangular(_optimizer((0.01,)), 100), 101)]
    assert lrs[10] == pytest.approx(0.01) and lrs[0] == pytest.approx(0.01 / 32)
    assert max(lrs) == lrs[10]


def test_slanted_triangular_never_goes_below_lr_max_over_ratio() -> None:
    # T = 15, cut_frac = 0.1: cut = floor(1.5) = 1, and the paper's p reaches 0 at t = cut / cut_frac = 10,
    # then would turn negative; we hold lr_max / ratio from there.
    factors = [slanted_triangular_factor(t, 15) for t in range(16)]
    assert factors[1] == 1.0
    assert factors[10] == pytest.approx(1 / 32)
    assert all(f == pytest.approx(1 / 32) for f in factors[10:])
    assert min(factors) >= 1 / 32 - 1e-15


# ----- exponential decay per epoch ----------------------------------------------------------------

def test_exponential_decay_per_epoch() -> None:
    # lr0 = 1e-3, gamma = 0.96 (CS224N reports): epoch e has 1e-3 * 0.96^e.
    sched = exponential_decay(_optimizer((1e-3,)), gamma=0.96)
    lrs = [g[0] for g in _lrs(sched, 4)]
    assert lrs == pytest.approx([1e-3, 0.96e-3, 0.9216e-3, 0.884736e-3], rel=1e-12)


def test_exponential_decay_with_steps_per_epoch() -> None:
    lrs = [g[0] for g in _lrs(exponential_decay(_optimizer((1.0,)), gamma=0.5, steps_per_epoch=3), 7)]
    assert lrs == [1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.25]
    assert exponential_decay_factor(7, 0.5, 3) == 0.25


# ----- resuming -----------------------------------------------------------------------------------

SCHEDULE_ARGS = {
    "linear": dict(num_warmup_steps=3, num_training_steps=20),
    "constant": dict(num_warmup_steps=3),
    "cosine": dict(num_warmup_steps=3, num_training_steps=20),
    "slanted_triangular": dict(num_training_steps=20),
    "exponential": dict(gamma=0.9, steps_per_epoch=2),
}


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_schedule_resumes_from_state_dicts(name: str) -> None:
    assert set(SCHEDULE_ARGS) == set(SCHEDULES)
    factory, kwargs = SCHEDULES[name], SCHEDULE_ARGS[name]
    opt = _optimizer()
    sched = factory(opt, **kwargs)
    _lrs(sched, 7)
    buffer = io.BytesIO()
    torch.save({"optimizer": opt.state_dict(), "scheduler": sched.state_dict()}, buffer)
    buffer.seek(0)
    ckpt = torch.load(buffer, weights_only=True)

    # The documented order: build both as at the start, then load both state dicts.
    resumed_opt = _optimizer()
    resumed = factory(resumed_opt, **kwargs)
    resumed_opt.load_state_dict(ckpt["optimizer"])
    resumed.load_state_dict(ckpt["scheduler"])
    assert _lrs(resumed, 15) == _lrs(sched, 15)


def test_schedules_keep_per_group_ratios() -> None:
    lrs = _lrs(linear_warmup_decay(_optimizer((2e-5, 1e-3)), 2, 10), 9)
    for small, large in lrs[1:]:
        assert small / large == pytest.approx(2e-5 / 1e-3, rel=1e-12)


def test_schedule_drives_our_adamw() -> None:
    p = nn.Parameter(torch.ones(3))
    opt = AdamW([p], lr=0.1, weight_decay=0.0)
    sched = linear_warmup_decay(opt, 0, 2)  # lr 0.1, then 0.05, then 0
    moves = []
    for _ in range(3):
        before = p.detach().clone()
        p.grad = torch.ones(3)
        opt.step()
        sched.step()
        moves.append((before - p).abs().max().item())
    # A constant gradient has m_hat / sqrt(v_hat) = 1, so each step moves p by lr / (1 + eps).
    assert moves == pytest.approx([0.1, 0.05, 0.0], abs=1e-6)


# ----- argument checks ----------------------------------------------------------------------------

@pytest.mark.parametrize("call, message", [
    (lambda o: linear_warmup_decay(o, 11, 10),
     r"num_warmup_steps \(11\) must not exceed num_training_steps \(10\)"),
    (lambda o: linear_warmup_decay(o, -1, 10), "num_warmup_steps must be an integer >= 0"),
    (lambda o: linear_warmup_decay(o, 0, 0), "num_training_steps must be an integer >= 1"),
    (lambda o: linear_warmup_decay(o, 1.5, 10), "num_warmup_steps must be an integer"),
    (lambda o: cosine_warmup(o, 20, 10), "must not exceed"),
    (lambda o: cosine_warmup(o, 2, 10, num_cycles=0), "num_cycles must be a number > 0"),
    (lambda o: constant_warmup(o, -3), "num_warmup_steps must be an integer >= 0"),
    (lambda o: slanted_triangular(o, 5, cut_frac=0.1),
     r"num_training_steps \* cut_frac = 5 \* 0.1 is below 1"),
    (lambda o: slanted_triangular(o, 100, cut_frac=1.0), r"cut_frac must be in \(0, 1\)"),
    (lambda o: slanted_triangular(o, 100, ratio=0.5), "ratio must be a number >= 1"),
    (lambda o: exponential_decay(o, gamma=0.0), r"gamma must be in \(0, 1\]"),
    (lambda o: exponential_decay(o, gamma=1.5), r"gamma must be in \(0, 1\]"),
    (lambda o: exponential_decay(o, steps_per_epoch=0), "steps_per_epoch must be an integer >= 1"),
])
def test_invalid_schedule_arguments_are_rejected_by_name(call, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call(_optimizer())


def test_factors_are_plain_functions_of_the_step() -> None:
    """The factor functions need no optimizer: a notebook can plot them directly."""
    assert [round(slanted_triangular_factor(t, 10, cut_frac=0.2, ratio=2), 6) for t in range(4)] == \
        [0.5, 0.75, 1.0, round((1 + (1 - 1 / 8)) / 2, 6)]
    assert math.isclose(exponential_decay_factor(2), 0.96**2)
