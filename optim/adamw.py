"""AdamW: Adam with decoupled weight decay and bias correction, written out by hand.

This is the optimizer every job in the project trains with. It is the same variant, with the same
arguments and defaults, as `torch.optim.AdamW`, and the tests hold it to that reference, to float32
rounding, after 1, 3 and 1,000 steps.

The update, in the order it is applied to each parameter theta with gradient g (step t counts from 1;
lr = gamma, weight_decay = lambda):

    1. t     <- t + 1
    2. theta <- theta * (1 - gamma * lambda)            decoupled weight decay, on the old weights
    3. m     <- beta1 * m + (1 - beta1) * g             first moment
    4. v     <- beta2 * v + (1 - beta2) * g * g         second moment
    5. v_max <- max(v_max, v)                           amsgrad only; v_max replaces v in step 7
    6. c1 = 1 - beta1^t,   c2 = 1 - beta2^t             bias corrections
    7. theta <- theta - (gamma / c1) * m / (sqrt(v) / sqrt(c2) + eps)

Where things go, and where they come from:

* Adam and its bias correction: Kingma & Ba 2015, "Adam: A Method for Stochastic Optimization",
  Algorithm 1. eps is added to the bias-corrected root, sqrt(v / c2) + eps, as in Algorithm 1 and in
  torch (not to the uncorrected sqrt(v), the "efficient" form at the end of the paper's section 2).
* Decoupled weight decay: Loshchilov & Hutter 2019, "Decoupled Weight Decay Regularization",
  Algorithm 2 (line 12). The decay shrinks the weights directly instead of being added to the gradient
  (which is Adam with L2, where the decay is rescaled by 1 / sqrt(v)). One difference from the paper:
  the paper multiplies lambda by the schedule multiplier eta_t only, torch (and we) by the whole learning
  rate gamma, so our weight_decay is the paper's lambda divided by the base learning rate.
* AMSGrad: Reddi, Kale & Kumar 2018, "On the Convergence of Adam and Beyond". As in torch, the running
  maximum is taken of the uncorrected v and the bias correction c2 is applied afterwards.
* Google's original BERT optimizer (`AdamWeightDecayOptimizer` in google-research/bert optimization.py)
  and the old `BertAdam` of pytorch-pretrained-bert leave out bias correction; Mosbach et al. 2021
  ("On the Stability of Fine-tuning BERT") show why it matters on small data sets. We keep it.

State: each parameter keeps `exp_avg` (m), `exp_avg_sq` (v), `max_exp_avg_sq` (amsgrad only) and
`step`, the number of updates it has received, as a plain Python int. torch keeps `step` as a float32
tensor; an int is exact at any length of training and reads plainly in a checkpoint. A state dict saved
by `torch.optim.AdamW` loads here too: its tensor steps are turned into ints. Steps are counted per
parameter because a parameter without a gradient is skipped and its clock does not advance.

The optimizer at the end of this file runs `adamw_update`, one parameter at a time, in a plain loop
(`AdamW.update_group`). A faster optimizer with the same numbers is a subclass that overrides that one
method (optim.fast_adamw's FastAdamW, which the repository's jobs train with); nothing here needs it to
be read.

Read next: schedules.py (how the learning rate changes during training).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import Tensor

# (param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq or None, step): one parameter's update, as AdamW.step
# collects them (the step already counted).
Update = tuple[Tensor, Tensor, Tensor, Tensor, "Tensor | None", int]


def adamw_update(
    param: Tensor,
    grad: Tensor,
    exp_avg: Tensor,
    exp_avg_sq: Tensor,
    max_exp_avg_sq: Tensor | None,
    step: int,
    *,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    weight_decay: float,
) -> None:
    """One AdamW update of one parameter, in place (equations 2-7 of the module docstring).

    param: the parameter's data (any shape); grad: its gradient (same shape).
    exp_avg, exp_avg_sq: the running first and second moments m and v (same shape), updated in place.
    max_exp_avg_sq: the running maximum of v for amsgrad (same shape), or None without amsgrad.
    step: t, the number of this update, counting from 1 (the caller has already incremented it).
    lr, beta1, beta2, eps, weight_decay: the group's hyper-parameters (see AdamW), Python numbers.
    """
    # Hints, in order (g the gradient, m = exp_avg, v = exp_avg_sq, all of param's shape; t = step):
    # 1. Decoupled weight decay, first and on the old weights: param <- param * (1 - lr * weight_decay).
    #    Scaled by lr, and kept out of g: added to g, the decay would enter m and v and be divided by
    #    sqrt(v), which is Adam with L2 regularisation, the very thing AdamW corrects.
    # 2. First moment, a running average of g: m <- beta1 m + (1 - beta1) g.
    # 3. Second moment, a running average of g squared, element-wise: v <- beta2 v + (1 - beta2) g^2. Both
    #    moments decay (the beta1 m and beta2 v terms) at every step.
    # 4. amsgrad (max_exp_avg_sq is not None): v_max <- max(v_max, v) element-wise, kept in max_exp_avg_sq;
    #    v_max, the maximum of the raw v, replaces v in hint 6, while v keeps its own running average.
    # 5. Bias corrections c1 = 1 - beta1^t and c2 = 1 - beta2^t: m and v start at zero, so early on their
    #    averages are too small by these factors. Correct copies: exp_avg and exp_avg_sq keep the raw m and v.
    # 6. param <- param - lr * (m / c1) / (sqrt(v / c2) + eps). eps goes on the corrected root: not inside the
    #    square root, and not on sqrt(v) before dividing by sqrt(c2).
    # m, v and v_max are the optimizer's memory between steps, and param is the model's weight: change them
    # in place (mul_, add_, copy_, out=...); a new tensor bound to the same name is lost when you return.
    # The tests compare with torch.optim.AdamW to float32 rounding: any correct way of writing these passes.
    # BEGIN SOLUTION
    param.mul_(1 - lr * weight_decay)
    exp_avg.lerp_(grad, 1 - beta1)
    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    if max_exp_avg_sq is not None:
        torch.maximum(max_exp_avg_sq, exp_avg_sq, out=max_exp_avg_sq)
        exp_avg_sq = max_exp_avg_sq
    bias_correction1 = 1 - beta1**step
    bias_correction2 = 1 - beta2**step
    step_size = lr / bias_correction1
    # `** 0.5` rather than math.sqrt: torch writes it so, and we want its results bit for bit.
    denom = (exp_avg_sq.sqrt() / bias_correction2**0.5).add_(eps)
    param.addcdiv_(exp_avg, denom, value=-step_size)
    # END SOLUTION


def _check_hyperparameters(where: str, lr: Any, betas: Any, eps: Any, weight_decay: Any, amsgrad: Any,
                           correct_bias: Any = True) -> None:
    """Raise ValueError naming the first invalid hyper-parameter, its value and the allowed values."""

    def is_number(x: Any) -> bool:
        # numbers.Real takes numpy's scalars too (np.float32(1e-3)), as torch.optim does; inf would turn
        # every weight into inf or nan at the first step, so only finite numbers count.
        return isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(x)

    if not is_number(lr) or not lr >= 0:
        raise ValueError(f"{where}: lr must be a number >= 0 and finite, got {lr!r}")
    if (not isinstance(betas, (tuple, list)) or len(betas) != 2
            or not all(is_number(b) and 0.0 <= b < 1.0 for b in betas)):
        raise ValueError(f"{where}: betas must be two numbers (beta1, beta2), each in [0, 1), got {betas!r}")
    if not is_number(eps) or not eps > 0:
        raise ValueError(f"{where}: eps must be a number > 0 and finite (it keeps the denominator away from "
                         f"zero), got {eps!r}")
    if not is_number(weight_decay) or not weight_decay >= 0:
        raise ValueError(f"{where}: weight_decay must be a number >= 0 and finite, got {weight_decay!r}")
    if not isinstance(amsgrad, bool):
        raise ValueError(f"{where}: amsgrad must be True or False, got {amsgrad!r}")
    # Accepted so that code written for the CS224N / old Hugging Face AdamW runs as it is. Not offered:
    # BERT's TF optimizer leaves the correction out, and Mosbach et al. 2021 show that hurts fine-tuning.
    if correct_bias is not True:
        raise ValueError(f"{where}: correct_bias={correct_bias!r} is not supported: this AdamW always "
                         "corrects the bias of its moment estimates (Kingma & Ba 2015, Algorithm 1; "
                         "optim/adamw.py's docstring says why); pass correct_bias=True or leave it out")


class AdamW(torch.optim.Optimizer):
    """AdamW with decoupled weight decay and bias correction; see the module docstring for the update.

    Arguments and defaults are those of `torch.optim.AdamW`:
        params: parameters, or a list of group dicts that may override any hyper-parameter below.
        lr: learning rate gamma (>= 0).
        betas: (beta1, beta2), decay rates of the first and second moment averages, each in [0, 1).
        eps: added to the bias-corrected root of the second moment (> 0).
        weight_decay: lambda, decoupled: each step multiplies the weights by (1 - lr * weight_decay).
        amsgrad: normalise by the running maximum of the second moment (Reddi et al. 2018).
        correct_bias: True only, the bias correction being always on; the CS224N starter's AdamW (after
            Hugging Face's old one) takes it, so code written for that one runs here.

    Works with `torch.optim.lr_scheduler` (it changes each group's "lr"), and `state_dict()` /
    `load_state_dict()` resume training bit for bit.
    """

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict[str, Any]],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        amsgrad: bool = False,
        *,
        correct_bias: bool = True,
    ) -> None:
        _check_hyperparameters("AdamW", lr, betas, eps, weight_decay, amsgrad, correct_bias)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad)
        super().__init__(params, defaults)  # calls add_param_group for each group, which checks it

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group (see torch.optim.Optimizer), checking its hyper-parameters after defaults fill in."""
        where = f"AdamW param group {len(self.param_groups)}"
        if not isinstance(param_group, dict) or "params" not in param_group:
            raise TypeError(f"{where}: a parameter group must be a dict with a 'params' key, got "
                            f"{param_group!r:.80}")
        params = param_group["params"]
        params = [params] if isinstance(params, Tensor) else list(params)
        if not params:
            raise ValueError(f"{where}: params is empty; give the parameters to train (model.parameters())")
        for i, p in enumerate(params):
            if isinstance(p, Tensor) and not p.is_leaf:
                raise ValueError(f"{where}: params[{i}] is not a leaf tensor (it was computed from others, so "
                                 "an update could not change it); optimize the tensors it came from")
        if len({id(p) for p in params}) != len(params):  # torch only warns; the update would run twice
            raise ValueError(f"{where}: a parameter appears more than once in params")
        super().add_param_group({**param_group, "params": params})
        group = self.param_groups[-1]
        _check_hyperparameters(f"AdamW param group {len(self.param_groups) - 1}", group["lr"],
                               group["betas"], group["eps"], group["weight_decay"], group["amsgrad"],
                               group.get("correct_bias", True))
        for p in group["params"]:
            if not p.is_floating_point():
                raise ValueError(f"AdamW param group {len(self.param_groups) - 1}: parameters must be "
                                 f"real floating point, got one of dtype {p.dtype} and shape "
                                 f"{tuple(p.shape)}")

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Called by load_state_dict (and unpickling): accept torch.optim.AdamW's tensor `step`s too."""
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("amsgrad", False)
        for param_state in self.state.values():
            if isinstance(param_state.get("step"), Tensor):
                param_state["step"] = int(param_state["step"].item())

    @torch.no_grad()
    def step(self, closure: Callable[[], Tensor] | None = None) -> Tensor | None:
        """Update every parameter that has a gradient; return closure()'s loss if a closure is given."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()

        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            hyper = dict(lr=group["lr"], beta1=beta1, beta2=beta2, eps=group["eps"],
                         weight_decay=group["weight_decay"])
            amsgrad = group["amsgrad"]
            updates = []  # (param, grad, m, v, v_max or None, step) of each parameter with a gradient
            for p in group["params"]:
                if p.grad is None:
                    continue  # frozen, or unused this step: no update, and its step count does not advance
                if p.grad.is_sparse:
                    raise RuntimeError(
                        f"AdamW does not support sparse gradients (got one for a parameter of shape "
                        f"{tuple(p.shape)}); build the embedding with sparse=False, or use "
                        "torch.optim.SparseAdam for it"
                    )
                state = self.state[p]
                if len(state) == 0:  # lazy initialisation: m = v = 0 (Kingma & Ba, Algorithm 1)
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    if amsgrad:
                        state["max_exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["step"] += 1
                updates.append((p, p.grad, state["exp_avg"], state["exp_avg_sq"],
                                state["max_exp_avg_sq"] if amsgrad else None, state["step"]))
            self.update_group(updates, hyper, group)
        return loss

    def update_group(self, updates: list[Update], hyper: dict[str, float], group: dict[str, Any]) -> None:
        """Apply one parameter group's updates, each by `adamw_update`, one parameter at a time.

        updates: (param, grad, m, v, v_max or None, step) of each parameter with a gradient, its step
        already counted; hyper: lr, beta1, beta2, eps and weight_decay, as `adamw_update` takes them;
        group: the parameter group itself. The one method a faster subclass overrides (optim.fast_adamw)."""
        for param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step in updates:
            adamw_update(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step, **hyper)
