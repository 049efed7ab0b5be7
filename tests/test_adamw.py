"""Tests for optim/adamw.py: parity with torch.optim.AdamW, variants told apart, a hand-worked example,
state round-trips, argument checks, and the vectorised path equal to the readable one.

Parity tests feed both optimizers the same gradients: the gradient is computed on our model and copied
to the reference model, so the comparison measures the optimizers alone (a real trajectory would also
amplify any difference through the model, which says nothing more about the optimizer).
"""

from __future__ import annotations

import copy
import io
from dataclasses import dataclass, field
from typing import Any, Callable

import pytest
import torch
from torch import nn

import optim.adamw as adamw_module
from minbert.config import BertConfig
from minbert.model import BertModel
from optim.adamw import AdamW
from optim.param_groups import make_param_groups

# "Equal within 1e-6 relative": rtol 1e-6. atol 1e-12 only forgives values that are zero in one
# implementation and a rounding residue in the other; every tensor compared here is far above it
# (second moments of the tiny BERT are ~1e-9 and up after the first step).
RTOL, ATOL = 1e-6, 1e-12


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """One intra-op thread for these tiny tensors: with two threads on two busy cores, torch's thread
    pool waits for descheduled workers and the 1,000-step tests ran about 60 times slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# ----- problems: a model, its parameter groups, and a loss -----------------------------------------

class Mixed(nn.Module):
    """A small MLP with odd parts: a float64 parameter, and one used only on even steps."""

    def __init__(self) -> None:
        super().__init__()
        self.w1 = nn.Parameter(torch.randn(5, 7) * 0.3)
        self.b1 = nn.Parameter(torch.randn(5) * 0.1)
        self.w2 = nn.Parameter(torch.randn(3, 5) * 0.3)
        self.b2 = nn.Parameter(torch.zeros(3))
        self.scale = nn.Parameter(torch.ones(3, dtype=torch.float64))
        self.sometimes = nn.Parameter(torch.randn(3) * 0.1)  # no gradient on odd steps: skipped then

    def forward(self, x: torch.Tensor, step: int) -> torch.Tensor:
        y = torch.tanh(x @ self.w1.T + self.b1) @ self.w2.T + self.b2
        y = y * self.scale.float()
        return y + self.sometimes if step % 2 == 0 else y


@dataclass
class Problem:
    build: Callable[[], nn.Module]
    groups: Callable[[nn.Module], Any]  # model -> what the optimizer is given
    loss: Callable[[nn.Module, int, torch.Generator], torch.Tensor]
    defaults: dict[str, Any] = field(default_factory=dict)


def _linear_loss(model: nn.Module, step: int, gen: torch.Generator) -> torch.Tensor:
    x = torch.randn(8, 7, generator=gen)
    target = x[:, :5] * 2.0 - 1.0
    return (model(x) - target).pow(2).mean()


def _bert_loss(model: nn.Module, step: int, gen: torch.Generator) -> torch.Tensor:
    ids = torch.randint(1, 99, (2, 6), generator=gen)
    types = torch.randint(0, 2, (2, 6), generator=gen)
    out = model(ids, token_type_ids=types)
    return out.pooler_output.pow(2).sum() + out.last_hidden_state[:, :, :4].mean()


def _mixed_loss(model: nn.Module, step: int, gen: torch.Generator) -> torch.Tensor:
    x = torch.randn(6, 7, generator=gen)
    return (model(x, step) - 0.5).pow(2).mean()


def _tiny_bert() -> nn.Module:
    return BertModel(BertConfig.tiny()).eval()  # eval: no dropout, so a step is deterministic


def _mixed_groups(model: nn.Module) -> list[dict[str, Any]]:
    return [
        {"params": [model.w1], "lr": 1e-2, "weight_decay": 0.1},
        {"params": [model.b1, model.b2], "lr": 3e-3, "weight_decay": 0.0, "betas": (0.8, 0.99)},
        {"params": [model.w2, model.scale, model.sometimes], "eps": 1e-6, "amsgrad": True},
    ]


PROBLEMS = {
    "linear": Problem(lambda: nn.Linear(7, 5), lambda m: m.parameters(), _linear_loss,
                      dict(lr=1e-2, weight_decay=0.01)),
    # Settings under which each wrong variant below moves some number by far more than 1e-6 in 3 steps:
    # eps comparable to sqrt(v) (so its placement shows), strong decay (so coupled vs decoupled shows).
    "linear_revealing": Problem(lambda: nn.Linear(7, 5), lambda m: m.parameters(), _linear_loss,
                                dict(lr=1e-2, eps=1e-2, weight_decay=0.5)),
    "linear_amsgrad": Problem(lambda: nn.Linear(7, 5), lambda m: m.parameters(), _linear_loss,
                              dict(lr=1e-2, eps=1e-2, weight_decay=0.1, amsgrad=True)),
    "tiny_bert_llrd": Problem(_tiny_bert, lambda m: make_param_groups(m, lr=1e-3, weight_decay=0.01,
                                                                      layer_decay=0.8), _bert_loss),
    "mixed_groups": Problem(Mixed, _mixed_groups, _mixed_loss, dict(lr=5e-3, weight_decay=0.02)),
}


def run_pair(problem: Problem, steps: int, foreach: bool | None = None,
             model: nn.Module | None = None) -> tuple[nn.Module, nn.Module, AdamW, torch.optim.AdamW]:
    """`steps` steps of our AdamW and torch's (single-tensor path) on two copies of one model."""
    torch.manual_seed(0)
    model = problem.build() if model is None else model
    ref = copy.deepcopy(model)
    ours = AdamW(problem.groups(model), **problem.defaults, foreach=foreach)
    theirs = torch.optim.AdamW(problem.groups(ref), **problem.defaults, foreach=False)
    gen = torch.Generator().manual_seed(1)
    for t in range(steps):
        ours.zero_grad()
        problem.loss(model, t, gen).backward()
        for p, q in zip(model.parameters(), ref.parameters()):
            q.grad = None if p.grad is None else p.grad.clone()
        ours.step()
        theirs.step()
    return model, ref, ours, theirs


def assert_same_state(model: nn.Module, ref: nn.Module, ours: torch.optim.Optimizer,
                      theirs: torch.optim.Optimizer) -> None:
    """Every parameter and every state tensor of `ours` equal to `theirs` within RTOL / ATOL."""
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p, q, rtol=RTOL, atol=ATOL, msg=lambda m: f"parameter {name}: {m}")
        s, r = ours.state.get(p, {}), theirs.state.get(q, {})
        assert set(s) == set(r), f"{name}: state keys {sorted(s)} != torch's {sorted(r)}"
        for key in r:
            if key == "step":
                assert s[key] == int(r[key]), f"{name}: step {s[key]} != {int(r[key])}"
            else:
                torch.testing.assert_close(s[key], r[key], rtol=RTOL, atol=ATOL,
                                           msg=lambda m: f"state {key} of {name}: {m}")


# ----- parity with torch.optim.AdamW --------------------------------------------------------------

@pytest.mark.parametrize("foreach", [True, False], ids=["vectorised", "readable"])
@pytest.mark.parametrize("problem", sorted(PROBLEMS))
@pytest.mark.parametrize("steps", [1, 3])
def test_matches_torch_adamw_after_1_and_3_steps(problem: str, steps: int, foreach: bool) -> None:
    assert_same_state(*run_pair(PROBLEMS[problem], steps, foreach))


@pytest.mark.parametrize("foreach", [True, False], ids=["vectorised", "readable"])
@pytest.mark.parametrize("problem", ["linear", "linear_amsgrad", "tiny_bert_llrd", "mixed_groups"])
def test_matches_torch_adamw_after_1000_steps(problem: str, foreach: bool) -> None:
    assert_same_state(*run_pair(PROBLEMS[problem], 1000, foreach))


def test_parity_problems_really_train() -> None:
    """Guard against a vacuous parity test: the parameters must have moved, and every one of them."""
    model, _, ours, _ = run_pair(PROBLEMS["tiny_bert_llrd"], 3)
    fresh = PROBLEMS["tiny_bert_llrd"].build()  # same seed as in run_pair
    for (name, p), q in zip(model.named_parameters(), fresh.parameters()):
        assert ours.state[p]["step"] == 3, name
        assert not torch.equal(p, q), f"{name} did not change in 3 steps"


# ----- wrong variants are caught by the same comparison -------------------------------------------

def _variant(l2: bool = False, bias_correction: bool = True, eps_inside_sqrt: bool = False,
             eps_before_correction: bool = False, decay_after: bool = False, max_of_corrected: bool = False):
    """An `adamw_update` with one deliberate deviation, to show the parity test would catch it."""

    def update(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step, *, lr, beta1, beta2, eps,
               weight_decay):
        if l2:  # Adam with L2 regularisation: the decay goes through the moments
            grad = grad.add(param, alpha=weight_decay)
        elif not decay_after:
            param.mul_(1 - lr * weight_decay)
        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        c1 = 1 - beta1**step if bias_correction else 1.0
        c2 = 1 - beta2**step if bias_correction else 1.0
        v = exp_avg_sq
        if max_exp_avg_sq is not None:
            if max_of_corrected:  # max of v / c2 rather than of v
                torch.maximum(max_exp_avg_sq, exp_avg_sq / c2, out=max_exp_avg_sq)
                v = max_exp_avg_sq * c2
            else:
                torch.maximum(max_exp_avg_sq, exp_avg_sq, out=max_exp_avg_sq)
                v = max_exp_avg_sq
        if eps_inside_sqrt:
            denom = (v / c2 + eps).sqrt()
        elif eps_before_correction:  # Kingma & Ba's "efficient" form: eps on the uncorrected root
            denom = (v.sqrt() + eps) / c2**0.5
        else:
            denom = v.sqrt() / c2**0.5 + eps
        param.addcdiv_(exp_avg, denom, value=-lr / c1)
        if decay_after:  # decay applied to the already-updated weights
            param.mul_(1 - lr * weight_decay)

    return update


WRONG_VARIANTS = {
    "adam_with_l2": ("linear_revealing", dict(l2=True)),
    "no_bias_correction": ("linear_revealing", dict(bias_correction=False)),
    "eps_inside_sqrt": ("linear_revealing", dict(eps_inside_sqrt=True)),
    "eps_before_bias_correction": ("linear_revealing", dict(eps_before_correction=True)),
    "decay_after_update": ("linear_revealing", dict(decay_after=True)),
    "amsgrad_max_of_corrected_v": ("linear_amsgrad", dict(max_of_corrected=True)),
}


@pytest.mark.parametrize("variant", sorted(WRONG_VARIANTS))
def test_wrong_variant_fails_the_3_step_comparison(variant: str, monkeypatch: pytest.MonkeyPatch) -> None:
    problem, deviation = WRONG_VARIANTS[variant]
    monkeypatch.setattr(adamw_module, "adamw_update", _variant(**deviation))
    with pytest.raises(AssertionError):
        assert_same_state(*run_pair(PROBLEMS[problem], 3, foreach=False))


def test_variant_harness_without_a_deviation_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Control for the test above: the same harness with no deviation passes, so what fails there is the
    deviation. (Float32 leaves little room: rewriting lerp_ as mul_ + add_ alone already moves some
    first moments by ~1.5e-6 relative where beta1 * m and (1 - beta1) * g nearly cancel, which is why
    the variants, like the exercise, follow torch's operations except for the one deviation.)"""
    monkeypatch.setattr(adamw_module, "adamw_update", _variant())
    for problem in ("linear_revealing", "linear_amsgrad", "mixed_groups"):
        assert_same_state(*run_pair(PROBLEMS[problem], 3, foreach=False))


# ----- a worked example ---------------------------------------------------------------------------

@pytest.mark.parametrize("foreach", [True, False], ids=["vectorised", "readable"])
def test_two_steps_on_a_scalar_match_the_hand_computation(foreach: bool) -> None:
    # theta0 = 1, lr = 0.1, betas = (0.5, 0.75), eps = 0.25, weight_decay = 0.5 (so lr * wd = 0.05).
    # Step 1, g = 2:
    #   decay      theta = 1 * (1 - 0.05)                    = 0.95
    #   moments    m = 0.5 * 0 + 0.5 * 2 = 1                 v = 0.75 * 0 + 0.25 * 4 = 1
    #   correct    c1 = 1 - 0.5 = 0.5                        c2 = 1 - 0.75 = 0.25
    #   denom      sqrt(1) / sqrt(0.25) + 0.25               = 2.25
    #   update     theta = 0.95 - (0.1 / 0.5) * 1 / 2.25     = 0.95 - 4/45 = 31/36 = 0.861111...
    # Step 2, g = -2:
    #   decay      theta = 31/36 * 0.95                      = 589/720
    #   moments    m = 0.5 * 1 + 0.5 * (-2) = -0.5           v = 0.75 * 1 + 0.25 * 4 = 1.75
    #   correct    c1 = 1 - 0.25 = 0.75                      c2 = 1 - 0.5625 = 0.4375
    #   denom      sqrt(1.75) / sqrt(0.4375) + 0.25 = 2 + 0.25 = 2.25
    #   update     theta = 589/720 - (0.1 / 0.75) * (-0.5) / 2.25 = 589/720 + 4/135 = 1831/2160 = 0.847685...
    theta = nn.Parameter(torch.tensor([1.0], dtype=torch.float64))
    opt = AdamW([theta], lr=0.1, betas=(0.5, 0.75), eps=0.25, weight_decay=0.5, foreach=foreach)
    expected_after = [31 / 36, 1831 / 2160]
    for grad, expected in zip([2.0, -2.0], expected_after):
        theta.grad = torch.tensor([grad], dtype=torch.float64)
        opt.step()
        # float64: a handful of roundings away from the exact fraction.
        assert theta.item() == pytest.approx(expected, rel=1e-14)
    state = opt.state[theta]
    assert state["step"] == 2
    assert state["exp_avg"].item() == pytest.approx(-0.5, rel=1e-14)
    assert state["exp_avg_sq"].item() == pytest.approx(1.75, rel=1e-14)


# ----- the vectorised path equals the readable one ------------------------------------------------

@pytest.mark.parametrize("problem", ["tiny_bert_llrd", "mixed_groups", "linear_amsgrad"])
def test_vectorised_path_equals_readable_path(problem: str) -> None:
    # mixed_groups has parameters with different step counts (one skips odd steps) and two dtypes in
    # one group, which exercises the per-(device, dtype) buckets and the per-tensor scalar lists.
    fast = run_pair(PROBLEMS[problem], 6, foreach=True)
    slow = run_pair(PROBLEMS[problem], 6, foreach=False)
    assert_same_state(fast[0], slow[0], fast[2], slow[2])


def test_foreach_none_uses_the_vectorised_path(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*args, **kwargs):
        raise AssertionError("the readable path ran")

    monkeypatch.setattr(adamw_module, "adamw_update", fail)
    p = nn.Parameter(torch.ones(3))
    p.grad = torch.ones(3)
    AdamW([p]).step()  # foreach=None


# ----- skipping, groups, state --------------------------------------------------------------------

@pytest.mark.parametrize("foreach", [True, False], ids=["vectorised", "readable"])
def test_parameters_without_gradients_are_skipped(foreach: bool) -> None:
    used, unused = nn.Linear(3, 2), nn.Linear(3, 2)
    before = [p.detach().clone() for p in unused.parameters()]
    opt = AdamW([*used.parameters(), *unused.parameters()], lr=0.1, weight_decay=0.5, foreach=foreach)
    used(torch.randn(4, 3)).sum().backward()
    opt.step()
    for p, b in zip(unused.parameters(), before):
        assert torch.equal(p, b), "a parameter without a gradient changed (weight decay must skip it too)"
        assert p not in opt.state
    assert all(opt.state[p]["step"] == 1 for p in used.parameters())


@pytest.mark.parametrize("foreach", [True, False], ids=["vectorised", "readable"])
def test_per_group_learning_rates_are_honoured(foreach: bool) -> None:
    frozen, moving = nn.Parameter(torch.ones(4)), nn.Parameter(torch.ones(4))
    opt = AdamW([{"params": [frozen], "lr": 0.0}, {"params": [moving]}], lr=0.1, weight_decay=0.0,
                foreach=foreach)
    frozen.grad, moving.grad = torch.ones(4), torch.ones(4)
    opt.step()
    assert torch.equal(frozen, torch.ones(4))
    # First step of Adam moves by lr * sign(g) (m_hat / sqrt(v_hat) = g / |g|), less the eps effect.
    torch.testing.assert_close(moving, torch.full((4,), 0.9), rtol=0, atol=1e-7)


def _train(model: nn.Module, opt: torch.optim.Optimizer, problem: Problem, steps: int,
           gen: torch.Generator, start: int = 0) -> None:
    for t in range(start, start + steps):
        opt.zero_grad()
        problem.loss(model, t, gen).backward()
        opt.step()


@pytest.mark.parametrize("foreach", [True, False], ids=["vectorised", "readable"])
@pytest.mark.parametrize("problem", ["mixed_groups", "tiny_bert_llrd"])
def test_state_dict_round_trip_continues_bit_identically(problem: str, foreach: bool) -> None:
    spec = PROBLEMS[problem]
    torch.manual_seed(0)
    model = spec.build()
    opt = AdamW(spec.groups(model), **spec.defaults, foreach=foreach)
    gen = torch.Generator().manual_seed(1)
    _train(model, opt, spec, 4, gen)

    buffer = io.BytesIO()  # through a real checkpoint, loadable with weights_only=True
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "rng": gen.get_state()}, buffer)
    buffer.seek(0)
    ckpt = torch.load(buffer, weights_only=True)
    assert all(isinstance(s["step"], int) for s in ckpt["optimizer"]["state"].values())
    assert max(s["step"] for s in ckpt["optimizer"]["state"].values()) == 4

    torch.manual_seed(123)  # a different initialisation, overwritten by the checkpoint
    resumed = spec.build()
    resumed.load_state_dict(ckpt["model"])
    resumed_opt = AdamW(spec.groups(resumed), **spec.defaults, foreach=foreach)
    resumed_opt.load_state_dict(ckpt["optimizer"])
    resumed_gen = torch.Generator()
    resumed_gen.set_state(ckpt["rng"])

    _train(model, opt, spec, 4, gen, start=4)
    _train(resumed, resumed_opt, spec, 4, resumed_gen, start=4)
    for (name, p), q in zip(model.named_parameters(), resumed.parameters()):
        assert torch.equal(p, q), f"{name} differs after resuming"
        for key, value in opt.state[p].items():
            other = resumed_opt.state[q][key]
            assert torch.equal(value, other) if torch.is_tensor(value) else value == other, (name, key)


def test_loads_a_torch_adamw_state_dict_and_continues_like_it() -> None:
    spec = PROBLEMS["linear_amsgrad"]
    torch.manual_seed(0)
    model = spec.build()
    ref = copy.deepcopy(model)
    theirs = torch.optim.AdamW(ref.parameters(), **spec.defaults)
    gen = torch.Generator().manual_seed(1)
    _train(ref, theirs, spec, 3, gen)
    model.load_state_dict(ref.state_dict())
    ours = AdamW(model.parameters(), **spec.defaults)
    # deepcopy, as a checkpoint file would: a live state_dict() shares its tensors with the optimizer.
    ours.load_state_dict(copy.deepcopy(theirs.state_dict()))
    assert all(s["step"] == 3 and isinstance(s["step"], int) for s in ours.state.values())
    for t in range(3, 6):
        ours.zero_grad()
        spec.loss(model, t, gen).backward()
        for p, q in zip(model.parameters(), ref.parameters()):
            q.grad = p.grad.clone()
        ours.step()
        theirs.step()
    assert_same_state(model, ref, ours, theirs)


# ----- argument checks ----------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, message", [
    (dict(lr=-1e-3), "lr must be a number >= 0"),
    (dict(lr="1e-3"), "lr must be a number >= 0"),
    (dict(betas=(1.0, 0.999)), r"betas must be two numbers .* in \[0, 1\)"),
    (dict(betas=(0.9, -0.1)), r"betas must be two numbers .* in \[0, 1\)"),
    (dict(betas=(0.9,)), r"betas must be two numbers"),
    (dict(eps=0.0), "eps must be a number > 0"),
    (dict(eps=-1e-8), "eps must be a number > 0"),
    (dict(weight_decay=-0.01), "weight_decay must be a number >= 0"),
    (dict(amsgrad=1), "amsgrad must be True or False"),
    (dict(foreach="yes"), "foreach must be None"),
])
def test_invalid_hyperparameters_are_rejected_by_name(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        AdamW(nn.Linear(2, 2).parameters(), **kwargs)


def test_invalid_group_hyperparameter_names_the_group() -> None:
    model = nn.Linear(2, 2)
    with pytest.raises(ValueError, match=r"param group 1: betas"):
        AdamW([{"params": [model.weight]}, {"params": [model.bias], "betas": (0.9, 1.5)}])


def test_sparse_gradients_are_rejected_clearly() -> None:
    emb = nn.Embedding(10, 3, sparse=True)
    opt = AdamW(emb.parameters())
    emb(torch.tensor([1, 2])).sum().backward()
    with pytest.raises(RuntimeError, match="does not support sparse gradients"):
        opt.step()


def test_integer_parameters_are_rejected() -> None:
    with pytest.raises(ValueError, match="real floating point"):
        AdamW([torch.zeros(3, dtype=torch.long)])


def test_works_with_a_torch_lr_scheduler() -> None:
    p = nn.Parameter(torch.ones(2))
    opt = AdamW([p], lr=1.0)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    for _ in range(3):
        p.grad = torch.ones(2)
        opt.step()
        sched.step()
    assert opt.param_groups[0]["lr"] == 0.125
