"""Graded: adamw_update, one AdamW step of one parameter, against torch.optim.AdamW and by hand."""

from __future__ import annotations

import copy

import pytest
import torch
from graded_helpers import check_close, check_value, expectation, fail
from torch import nn

from optim.adamw import AdamW, adamw_update

pytestmark = pytest.mark.component("adamw")

# Tolerances. Every correct way of writing the update (lerp_ or operators, sqrt(v) / sqrt(c2) or
# sqrt(v / c2), mul_(1 - lr lambda) or sub_(lr lambda param), in any order of the products) computes the same
# real numbers as torch.optim.AdamW, and differs from it in float32 rounding only: each operation is exact to
# half an ulp (EPS / 2, EPS = 2^-23 = 1.2e-7) of its result, so a few roundings per step, over five steps,
# stay within a few ulps of the numbers combined, though not of the result where they cancel:
# - m <- beta1 m + (1 - beta1) g can nearly cancel, leaving a small m with the rounding of its terms, which
#   are no larger than the largest |m|: ULPS ulps of each m plus ULPS ulps of the largest.
# - the parameter: ULPS ulps of itself (the decay multiplies it) plus ULPS ulps of lr, the size of the Adam
#   step lr m_hat / (sqrt(v_hat) + eps), whose ratio is of order 1 and carries the moments' rounding.
# Eight formulations, 20 seeds each, came within 3.2 ulps (the parameter) and 1.7 (m) of torch; the mistakes
# below move some number by 500 ulps and more (eps on the uncorrected root, one step), most by 10^4 to 10^7.
EPS = torch.finfo(torch.float32).eps
ULPS = 16
L2 = ("this is Adam with L2 regularisation: the decay went into the gradient, and so into the moments. "
      "AdamW decays the parameter itself, theta <- theta (1 - lr lambda), apart from the moments")
NO_CORRECTION = "the bias correction is missing: divide m by 1 - beta1^t and v by 1 - beta2^t"
NOT_IN_PLACE = ("was not updated in place: a new tensor bound to the name is lost when the function returns; "
                "change the moments in place (mul_, add_, lerp_, copy_)")
DECAY_AFTER = ("the decay was applied after the Adam step: decoupled weight decay shrinks the old weights, "
               "theta (1 - lr lambda), before the step is taken")
EPS_INSIDE = "eps went inside the square root: sqrt(v_hat + eps); it is added to the root, sqrt(v_hat) + eps"
WITHOUT_LR = "the decay must be scaled by the learning rate: theta (1 - lr lambda), not theta (1 - lambda)"
NEXT_POWER = ("the bias corrections used t + 1: step already counts from 1 (the caller incremented it), so "
              "c1 = 1 - beta1^t with t = step")
EPS_BEFORE_CORRECTION = ("eps was added before the bias correction: (sqrt(v) + eps) / sqrt(c2); it is added "
                         "after, sqrt(v) / sqrt(c2) + eps")


def run(steps: int, **hyper):
    """`steps` updates of one (5, 7) parameter by adamw_update, with gradients alternating in size.
    Returns (ours, moments, start, grads): moments lists (what, ours) for m, v (and v's maximum with
    amsgrad)."""
    ours = torch.randn(5, 7)
    start = ours.clone()
    grads = [torch.randn(5, 7) * (0.1 if t % 2 else 3.0) for t in range(1, steps + 1)]
    m, v = torch.zeros_like(ours), torch.zeros_like(ours)
    v_max = torch.zeros_like(ours) if hyper.get("amsgrad") else None
    beta1, beta2 = hyper.get("betas", (0.9, 0.999))
    for t, grad in enumerate(grads, start=1):
        adamw_update(ours, grad.clone(), m, v, v_max, t, lr=hyper["lr"], beta1=beta1, beta2=beta2,
                     eps=hyper.get("eps", 1e-8), weight_decay=hyper.get("weight_decay", 1e-2))
    moments = [("the first moment m", m), ("the second moment v", v)]
    if v_max is not None:
        moments.append(("max_exp_avg_sq, v's running maximum", v_max))
    return ours, moments, start, grads


@expectation
def torch_moments(start, grads, hyper) -> list:
    """(torch's moment, its mistakes) for each moment run() returns, from torch's AdamW on the same start
    and gradients."""
    _, state = torch_steps(start, grads, hyper)
    beta1, beta2 = hyper.get("betas", (0.9, 0.999))
    grads, v_max = torch.stack(grads), state.get("max_exp_avg_sq")
    moments = [
        (state["exp_avg"], [
            (torch.zeros_like(grads[0]), f"m is still 0: exp_avg {NOT_IN_PLACE}"),
            (lambda: torch_steps(start, grads, hyper, decay="L2")[1]["exp_avg"], L2),
            ((1 - beta1) * grads.sum(0), "m is the sum of (1 - beta1) g over the steps: the first moment m "
             "was never decayed by beta1; m <- beta1 m + (1 - beta1) g at every step")]),
        (state["exp_avg_sq"], [
            (torch.zeros_like(grads[0]), f"v is still 0: exp_avg_sq {NOT_IN_PLACE}"),
            (v_max, "v holds the maximum (it equals max_exp_avg_sq): v must keep its own running average, "
             "and the maximum goes in max_exp_avg_sq only"),
            ((1 - beta2) * (grads**2).sum(0), "v is the sum of (1 - beta2) g^2 over the steps: the second "
             "moment v was never decayed by beta2; v <- beta2 v + (1 - beta2) g^2 at every step")])]
    if v_max is not None:
        moments.append((v_max, [
            (torch.zeros_like(v_max), "max_exp_avg_sq is still 0: with amsgrad it keeps the running maximum "
             "of v, in place")]))
    return moments


def check_moments(moments, start, grads, hyper) -> None:
    """Each moment equals torch's, or the test names the mistake that gives it."""
    __tracebackhide__ = True
    for number, (what, got) in enumerate(moments):
        check_close(got, torch_moments(start, grads, hyper)[number][0], what, torch_moments(
            start, grads, hyper)[number][1], **moment_tolerance(start, grads, hyper, number))


@expectation
def moment_tolerance(start, grads, hyper, number) -> dict[str, float]:
    """Float32 rounding of a moment: ULPS ulps of itself and of the largest (see ULPS)."""
    largest = float(torch_moments(start, grads, hyper)[number][0].abs().max())
    return dict(rtol=ULPS * EPS, atol=ULPS * EPS * largest)


@expectation
def torch_steps(start, grads, hyper, corrections=lambda c1, c2: (c1, c2), eps_scale=lambda c2: 1.0,
                decay: str = "decoupled"):
    """(parameter, m) after torch's own AdamW steps from `start`, or after a mistake's steps emulated by
    torch's step with that step's learning rate, eps and decay changed.

    A mistake that uses bias corrections d1, d2 instead of c1 = 1 - beta1^t, c2 = 1 - beta2^t steps by
    lr / d1 m / (sqrt(v / d2) + eps), which is torch's step with lr' = lr (c1 / d1) sqrt(d2 / c2) and
    eps' = eps sqrt(d2 / c2); its decay (1 - lr lambda) is kept with lambda' = lambda lr / lr'.
    eps_scale(c2) multiplies eps' (eps added before the correction: eps / sqrt(c2)); decay: "decoupled",
    "L2" (torch's Adam, the decay in the gradient), "after" (the decay after the step) or "without lr"."""
    param = nn.Parameter(start.clone())
    lr, eps, decay_rate = hyper["lr"], hyper.get("eps", 1e-8), hyper.get("weight_decay", 1e-2)
    beta1, beta2 = hyper.get("betas", (0.9, 0.999))
    optimizer = (torch.optim.Adam if decay == "L2" else torch.optim.AdamW)(
        [param], foreach=False, **{**hyper, "weight_decay": decay_rate})
    group = optimizer.param_groups[0]
    for t, grad in enumerate(grads, start=1):
        c1, c2 = 1 - beta1**t, 1 - beta2**t
        d1, d2 = corrections(c1, c2)
        group["lr"] = lr * (c1 / d1) * (d2 / c2) ** 0.5
        group["eps"] = eps * (d2 / c2) ** 0.5 * eps_scale(c2)
        if decay != "L2":
            kept = {"decoupled": lr * decay_rate, "after": 0.0, "without lr": decay_rate}[decay]
            group["weight_decay"] = kept / group["lr"]
        param.grad = grad.clone()
        optimizer.step()
        if decay == "after":
            with torch.no_grad():
                param.mul_(1 - lr * decay_rate)
    return param.detach(), optimizer.state[param]


@expectation
def update_mistakes(start, grads, hyper):
    """The parameter each common mistake of the update gives, computed by torch_steps when asked."""
    beta1, beta2 = hyper.get("betas", (0.9, 0.999))

    def next_power(c1, c2):  # beta^(t + 1): 1 - c = beta^t, times beta once more
        return 1 - (1 - c1) * beta1, 1 - (1 - c2) * beta2

    cases = [
        (dict(decay="L2"), L2),
        (dict(decay="after"), DECAY_AFTER),
        (dict(decay="without lr"), WITHOUT_LR),
        (dict(corrections=lambda c1, c2: (1.0, 1.0)), NO_CORRECTION),
        (dict(corrections=lambda c1, c2: (1.0, c2)), "m is not bias-corrected: divide m by 1 - beta1^t (v's "
         "correction is there)"),
        (dict(corrections=lambda c1, c2: (c1, 1.0)), "v is not bias-corrected: divide v by 1 - beta2^t (m's "
         "correction is there)"),
        (dict(corrections=next_power), NEXT_POWER),
        (dict(eps_scale=lambda c2: c2 ** -0.5), EPS_BEFORE_CORRECTION),
    ]
    grads = list(grads)
    mistakes = [(lambda case=case: torch_steps(start, grads, hyper, **case)[0], why) for case, why in cases]
    if len(grads) == 1:  # one step: m_hat = g and v_hat = g^2 exactly, so sqrt(v_hat + eps) is known
        lr, eps, grad = hyper["lr"], hyper.get("eps", 1e-8), grads[0]
        decayed = start * (1 - lr * hyper.get("weight_decay", 1e-2))
        mistakes.append((decayed - lr * grad / (grad**2 + eps).sqrt(), EPS_INSIDE))
    if hyper.get("amsgrad"):
        mistakes.append((lambda: torch_steps(start, grads, {**hyper, "amsgrad": False})[0],
                         "it equals the step without amsgrad: with amsgrad, v's running maximum (kept in "
                         "max_exp_avg_sq, in place) replaces v in the denominator"))
    return mistakes


def param_tolerance(lr: float) -> dict[str, float]:
    """Float32 rounding of the parameter: ULPS ulps of itself and of the step's size, lr (see ULPS)."""
    return dict(rtol=ULPS * EPS, atol=ULPS * EPS * lr)


@pytest.mark.points(2)
def test_one_step_matches_torch_adamw():
    hyper = dict(lr=1e-2, weight_decay=0.0)
    ours, moments, start, grads = run(1, **hyper)
    check_moments(moments, start, grads, hyper)
    check_close(ours, torch_steps(start, grads, hyper)[0], "the parameter after one step (no weight decay)",
                update_mistakes(start, grads, hyper), **param_tolerance(1e-2))


@pytest.mark.points(2)
def test_five_steps_with_weight_decay_match_torch_adamw():
    hyper = dict(lr=1e-2, weight_decay=0.5, eps=1e-3, betas=(0.8, 0.99))
    ours, moments, start, grads = run(5, **hyper)
    check_moments(moments, start, grads, hyper)
    check_close(ours, torch_steps(start, grads, hyper)[0], "the parameter after five steps with weight decay "
                "0.5", update_mistakes(start, grads, hyper), **param_tolerance(1e-2))


@pytest.mark.points(1)
def test_amsgrad_matches_torch_adamw():
    hyper = dict(lr=1e-2, weight_decay=0.1, eps=1e-3, amsgrad=True)
    ours, moments, start, grads = run(5, **hyper)
    if torch.equal(moments[1][1], moments[2][1]):
        fail("v holds the maximum (it equals max_exp_avg_sq): v must keep its own running average, and the "
             "maximum goes in max_exp_avg_sq only")
    check_moments(moments, start, grads, hyper)
    check_close(ours, torch_steps(start, grads, hyper)[0], "the parameter after five AMSGrad steps (v "
                "replaced by its running maximum)", update_mistakes(start, grads, hyper),
                **param_tolerance(1e-2))


@pytest.mark.points(2)
def test_first_step_on_a_scalar_by_hand():
    # lr 0.1, decay 0.1: theta = 1 * (1 - 0.01) = 0.99; m = 0.1 * 0.5 = 0.05; v = 0.001 * 0.25 = 0.00025;
    # corrected: m / 0.1 = 0.5, sqrt(v / 0.001) = 0.5, so the step is 0.1 * 0.5 / 0.5 = 0.1: theta = 0.89.
    param, grad = torch.tensor([1.0], dtype=torch.float64), torch.tensor([0.5], dtype=torch.float64)
    m, v = torch.zeros_like(param), torch.zeros_like(param)
    adamw_update(param, grad, m, v, None, 1, lr=0.1, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.1)
    check_value(param.item(), 0.89, "theta after one step from 1 (grad 0.5, lr 0.1, decay 0.1)", [
        (0.99 - 0.1 * 0.05 / (0.00025 ** 0.5 + 1e-8), NO_CORRECTION),
        (0.9, L2),
        (0.8, WITHOUT_LR),
        (0.99, "the parameter was only decayed: the Adam step -lr m_hat / (sqrt(v_hat) + eps) is missing"),
        (0.9 * 0.99, DECAY_AFTER),
        (0.99 - 0.1 * (0.05 / (1 - 0.9**2)) / (0.00025 / (1 - 0.999**2)) ** 0.5, NEXT_POWER),
    ], tolerance=1e-7)
    check_value(m.item(), 0.05, "m after one step (updated in place)",
                [(0.5, "m is stored bias-corrected: keep the raw moment in exp_avg and correct a copy"),
                 (0.0, f"m is still 0: exp_avg {NOT_IN_PLACE}")])
    check_value(v.item(), 0.00025, "v after one step (updated in place)",
                [(0.25, "v is stored bias-corrected: keep the raw moment in exp_avg_sq and correct a copy"),
                 (0.0, f"v is still 0: exp_avg_sq {NOT_IN_PLACE}")])
    # The same step with eps = 0.1, large enough to show where it goes: 0.99 - 0.1 * 0.5 / (0.5 + 0.1).
    param, m, v = torch.tensor([1.0], dtype=torch.float64), torch.zeros_like(param), torch.zeros_like(param)
    adamw_update(param, grad, m, v, None, 1, lr=0.1, beta1=0.9, beta2=0.999, eps=0.1, weight_decay=0.1)
    check_value(param.item(), 0.99 - 0.05 / 0.6, "theta after the same step with eps = 0.1", [
        (0.99 - 0.05 / 0.35 ** 0.5, EPS_INSIDE),
        (0.99 - 0.05 / ((0.00025 ** 0.5 + 0.1) / 0.001 ** 0.5), EPS_BEFORE_CORRECTION),
    ], tolerance=1e-7)


@pytest.mark.points(1)
def test_readable_optimizer_path_trains_like_torch():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 2))
    start, batches = copy.deepcopy(model), [torch.randn(8, 4) for _ in range(4)]
    train(model, AdamW(model.parameters(), lr=1e-2, weight_decay=0.1), batches)
    for number, p in enumerate(model.parameters()):
        check_close(p, torch_trained(start, batches)[number], f"parameter {number} of a small network "
                    "after four optimizer steps", rtol=1e-5, atol=1e-7)


def train(net, optimizer, batches) -> None:
    for x in batches:
        optimizer.zero_grad()
        net(x).pow(2).mean().backward()
        optimizer.step()


@expectation
def torch_trained(start, batches) -> list[torch.Tensor]:
    """The parameters after the same steps of torch.optim.AdamW from the same start."""
    net = copy.deepcopy(start)
    train(net, torch.optim.AdamW(net.parameters(), lr=1e-2, weight_decay=0.1, foreach=False), batches)
    return [p.detach() for p in net.parameters()]


def two_steps(grads, amsgrad: bool = False):
    """m, v (and v_max) of a float64 scalar after one adamw_update per gradient, with beta1 = beta2 = 0.5:
    large betas' complements, so that a moment never decayed is far from the right one."""
    param = torch.tensor([1.0], dtype=torch.float64)
    m, v = torch.zeros_like(param), torch.zeros_like(param)
    v_max = torch.zeros_like(param) if amsgrad else None
    for t, g in enumerate(grads, start=1):
        adamw_update(param, torch.tensor([g], dtype=torch.float64), m, v, v_max, t, lr=0.1, beta1=0.5,
                     beta2=0.5, eps=1e-8, weight_decay=0.0)
    return m.item(), v.item(), None if v_max is None else v_max.item()


@pytest.mark.points(1)
def test_both_moments_decay_and_amsgrad_keeps_v_and_its_maximum_apart():
    # Gradients 2 then -4, beta1 = beta2 = 0.5: m = 0.5 * 2 = 1, then 0.5 * 1 + 0.5 * (-4) = -1.5;
    # v = 0.5 * 4 = 2, then 0.5 * 2 + 0.5 * 16 = 9.
    m, v, _ = two_steps([2.0, -4.0])
    check_value(m, -1.5, "m after gradients 2 and -4 (beta1 = 0.5)", [
        (-1.0, "m after two steps is m1 + (1 - beta1) g2: the first moment m was never decayed by beta1; "
         "m <- beta1 m + (1 - beta1) g at every step")])
    check_value(v, 9.0, "v after gradients 2 and -4 (beta2 = 0.5)", [
        (10.0, "v after two steps is v1 + (1 - beta2) g2^2: the second moment v was never decayed by beta2; "
         "v <- beta2 v + (1 - beta2) g^2 at every step")])
    # AMSGrad, gradients 4 then 0: v = 8, then 4; its running maximum stays 8.
    m, v, v_max = two_steps([4.0, 0.0], amsgrad=True)
    check_value(v_max, 8.0, "max_exp_avg_sq after gradients 4 and 0 with amsgrad (v was 8, then 4)", [
        (0.0, "max_exp_avg_sq is still 0: with amsgrad it keeps the running maximum of v, in place")])
    check_value(v, 4.0, "v (exp_avg_sq) after gradients 4 and 0 with amsgrad", [
        (8.0, "v holds the maximum: v must keep its own running average, and the maximum goes in "
         "max_exp_avg_sq only")])
