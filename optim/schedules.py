"""Learning-rate schedules: each is a multiplier of the base learning rate as a function of the step.

Every schedule here is a plain function `factor(step, ...) -> float` (easy to plot and to test) and a
factory that wraps it in `torch.optim.lr_scheduler.LambdaLR`, so it works with any torch optimizer,
ours included. LambdaLR sets each parameter group's lr to `initial_lr * factor(step)`, so groups with
different learning rates (layer-wise decay, param_groups.py) keep their ratios throughout.

Usage: call `scheduler.step()` once after each `optimizer.step()` (once per epoch for
`exponential_decay` without steps_per_epoch). `step` below is the number of scheduler steps taken so far,
0 for the first optimizer step.

Resuming: build the optimizer and the schedule exactly as at the start, then load both state dicts:

    optimizer = AdamW(groups, lr=...); scheduler = linear_warmup_decay(optimizer, 100, 1000)
    optimizer.load_state_dict(ckpt["optimizer"]); scheduler.load_state_dict(ckpt["scheduler"])

(the optimizer's state dict carries each group's current lr, which building the schedule overwrote).

Read next: param_groups.py (which parameters decay, and layer-wise learning rates).
"""

from __future__ import annotations

import math
from functools import partial

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR


def _check_int(name: str, value: object, minimum: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


def _check_warmup(num_warmup_steps: object, num_training_steps: object) -> None:
    _check_int("num_warmup_steps", num_warmup_steps, 0)
    _check_int("num_training_steps", num_training_steps, 1)
    if num_warmup_steps > num_training_steps:  # type: ignore[operator]
        raise ValueError(f"num_warmup_steps ({num_warmup_steps}) must not exceed num_training_steps "
                         f"({num_training_steps})")


# Linear warm-up, then linear decay to zero (BERT paper appendix A.2: "learning rate warmup over the
# first 10,000 steps, and linear decay of the learning rate"). The formula is that of transformers'
# get_linear_schedule_with_warmup, float for float, so runs compare with Hugging Face's.

def linear_warmup_decay_factor(step: int, num_warmup_steps: int, num_training_steps: int) -> float:
    """step / warmup while warming up, then falls linearly to 0 at num_training_steps (0 after)."""
    # Hints: with W = num_warmup_steps and N = num_training_steps,
    #     factor(t) = t / W                  for t < W   (0 at the first step, not 1 / W)
    #               = (N - t) / (N - W)      for W <= t  (1 at t = W, 0 at t = N), never below 0
    # The decay runs from the end of the warm-up, not from step 0; W = 0 (no warm-up) and W = N must
    # not divide by zero (use at least 1 in a denominator).
    # BEGIN SOLUTION
    if step < num_warmup_steps:
        return float(step) / float(max(1, num_warmup_steps))
    return max(0.0, float(num_training_steps - step) / float(max(1, num_training_steps - num_warmup_steps)))
    # END SOLUTION


def linear_warmup_decay(optimizer: Optimizer, num_warmup_steps: int, num_training_steps: int,
                        last_epoch: int = -1) -> LambdaLR:
    """LambdaLR with `linear_warmup_decay_factor`; the default schedule of BERT fine-tuning."""
    _check_warmup(num_warmup_steps, num_training_steps)
    return LambdaLR(optimizer, partial(linear_warmup_decay_factor, num_warmup_steps=num_warmup_steps,
                                       num_training_steps=num_training_steps), last_epoch)


def constant_warmup_factor(step: int, num_warmup_steps: int) -> float:
    """step / warmup while warming up, then 1 (transformers' get_constant_schedule_with_warmup)."""
    return 1.0 if step >= num_warmup_steps else step / max(1.0, num_warmup_steps)


def constant_warmup(optimizer: Optimizer, num_warmup_steps: int, last_epoch: int = -1) -> LambdaLR:
    """LambdaLR with `constant_warmup_factor`."""
    _check_int("num_warmup_steps", num_warmup_steps, 0)
    return LambdaLR(optimizer, partial(constant_warmup_factor, num_warmup_steps=num_warmup_steps), last_epoch)


def cosine_warmup_factor(step: int, num_warmup_steps: int, num_training_steps: int,
                         num_cycles: float = 0.5) -> float:
    """Linear warm-up, then 0.5 * (1 + cos(2 pi num_cycles progress)): half a cosine from 1 to 0 by default.

    Cosine annealing from Loshchilov & Hutter 2017 ("SGDR", eq. 5, without restarts); the formula is
    transformers' get_cosine_schedule_with_warmup.
    """
    if step < num_warmup_steps:
        return step / max(1, num_warmup_steps)
    progress = (step - num_warmup_steps) / max(1, num_training_steps - num_warmup_steps)
    return max(0.0, 0.5 * (1.0 + math.cos(math.pi * float(num_cycles) * 2.0 * progress)))


def cosine_warmup(optimizer: Optimizer, num_warmup_steps: int, num_training_steps: int,
                  num_cycles: float = 0.5, last_epoch: int = -1) -> LambdaLR:
    """LambdaLR with `cosine_warmup_factor`."""
    _check_warmup(num_warmup_steps, num_training_steps)
    if not isinstance(num_cycles, (int, float)) or isinstance(num_cycles, bool) or num_cycles <= 0:
        raise ValueError(f"num_cycles must be a number > 0 (0.5 = one half cosine), got {num_cycles!r}")
    return LambdaLR(optimizer, partial(cosine_warmup_factor, num_warmup_steps=num_warmup_steps,
                                       num_training_steps=num_training_steps, num_cycles=num_cycles),
                    last_epoch)


def slanted_triangular_factor(step: int, num_training_steps: int, cut_frac: float = 0.1,
                              ratio: float = 32.0) -> float:
    """ULMFiT's slanted triangular learning rate (Howard & Ruder 2018, eq. 3), as a fraction of lr_max.

    With T = num_training_steps and t = step:
        cut = floor(T * cut_frac)
        p   = t / cut                                   if t < cut
              1 - (t - cut) / (cut * (1 / cut_frac - 1))  otherwise
        lr  = lr_max * (1 + p * (ratio - 1)) / ratio
    so the rate climbs from lr_max / ratio to lr_max over the first cut steps and falls back over the
    rest. Defaults are the paper's (cut_frac 0.1, ratio 32). Difference from the paper: its p reaches 0
    at t = cut / cut_frac, which comes before T when T * cut_frac is not a whole number (the floor), and
    would then go negative, down to negative learning rates; we hold p at 0 (lr_max / ratio) from there.
    """
    cut = math.floor(num_training_steps * cut_frac)
    if step < cut:
        p = step / cut
    else:
        p = 1 - (step - cut) / (cut * (1 / cut_frac - 1))
    p = max(p, 0.0)
    return (1 + p * (ratio - 1)) / ratio


def slanted_triangular(optimizer: Optimizer, num_training_steps: int, cut_frac: float = 0.1,
                       ratio: float = 32.0, last_epoch: int = -1) -> LambdaLR:
    """LambdaLR with `slanted_triangular_factor`; each group's lr is its lr_max."""
    _check_int("num_training_steps", num_training_steps, 1)
    if not isinstance(cut_frac, (int, float)) or not 0 < cut_frac < 1:
        raise ValueError(f"cut_frac must be in (0, 1) (the fraction of steps spent climbing), "
                         f"got {cut_frac!r}")
    if math.floor(num_training_steps * cut_frac) < 1:
        raise ValueError(f"num_training_steps * cut_frac = {num_training_steps} * {cut_frac} is below 1, so "
                         "the climb would last 0 steps: use more steps or a larger cut_frac")
    if not isinstance(ratio, (int, float)) or isinstance(ratio, bool) or ratio < 1:
        raise ValueError(f"ratio must be a number >= 1 (lr_max / the lowest lr), got {ratio!r}")
    return LambdaLR(optimizer, partial(slanted_triangular_factor, num_training_steps=num_training_steps,
                                       cut_frac=cut_frac, ratio=ratio), last_epoch)


def exponential_decay_factor(step: int, gamma: float = 0.96, steps_per_epoch: int = 1) -> float:
    """gamma ** epoch, with epoch = step // steps_per_epoch: the rate drops by gamma once per epoch.

    Written in closed form (not a running product like torch's ExponentialLR) so a resumed run gets the
    same floats. CS224N project reports use it with lr0 = 1e-3 and gamma = 0.96.
    """
    return gamma ** (step // steps_per_epoch)


def exponential_decay(optimizer: Optimizer, gamma: float = 0.96, steps_per_epoch: int = 1,
                      last_epoch: int = -1) -> LambdaLR:
    """LambdaLR with `exponential_decay_factor`.

    With steps_per_epoch = 1 (the default), call scheduler.step() once at the end of each epoch; give
    the number of optimizer steps per epoch to call it after every optimizer step instead.
    """
    if not isinstance(gamma, (int, float)) or isinstance(gamma, bool) or not 0 < gamma <= 1:
        raise ValueError(f"gamma must be in (0, 1] (the factor applied each epoch), got {gamma!r}")
    _check_int("steps_per_epoch", steps_per_epoch, 1)
    factor = partial(exponential_decay_factor, gamma=gamma, steps_per_epoch=steps_per_epoch)
    return LambdaLR(optimizer, factor, last_epoch)


# Name -> factory, for job scripts that pick a schedule from a flag (STYLE.md rule 9).
SCHEDULES = {
    "linear": linear_warmup_decay,
    "constant": constant_warmup,
    "cosine": cosine_warmup,
    "slanted_triangular": slanted_triangular,
    "exponential": exponential_decay,
}
