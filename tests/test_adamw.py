"""Tests for optim/adamw.py: parity with torch.optim.AdamW, variants told apart, a hand-worked example,
state round-trips, argument checks; and for fast_adamw.py's FastAdamW: its fast paths (its C kernel, and
torch.compile's) equal to the lesson's AdamW and to torch, with their fallbacks.

Parity tests feed both optimizers the same gradients: the gradient is computed on our model and copied
to the reference model, so the comparison measures the optimizers alone (a real trajectory would also
amplify any difference through the model, which says nothing more about the optimizer).
"""

from __future__ import annotations

import copy
import io
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
import torch
from torch import nn

import optim.adamw as adamw_module
import optim.fast_adamw as fast_adamw
import tasks.training.process as process
import tasks.training.settings as settings
from minbert.config import BertConfig
from minbert.model import BertModel
from optim.adamw import AdamW
from optim.fast_adamw import FastAdamW
from optim.param_groups import make_param_groups

# Tolerances, in ulps (the eps of the tensor's dtype, 1.2e-7 for float32) of a tensor-wide scale: a state
# tensor's largest entry; for a parameter, its largest entry or the learning rate (the size of one step),
# whichever is larger. Any correct way of writing adamw_update (lerp_ or operators, sqrt(v / c2) or
# sqrt(v) / sqrt(c2), ...) and the fast paths compute the same real numbers as torch and differ from it in
# rounding only, each step by about an ulp of the numbers combined, not of the result where they cancel.
# - The readable path, run with any such formulation: the differences of n steps may add up, as some are
#   systematic (torch rounds 1 - lr * lambda to float32 once, and every step multiplies by it; a parameter
#   whose gradient is rounding noise, like the tiny BERT's key biases, takes steps of size lr whose direction
#   the rounding of m decides), so the tolerance is ULPS * n ulps. Measured worst over eight formulations:
#   0.8 ulps per step after 3 steps, 0.6 after 1,000 (torch's own operations, as in the reference: 0).
# - The fast paths follow torch's operations and differ only where a compiler rounds a multiply and an add
#   once (an FMA) that torch rounds twice, or the other way round: independent roundings, which add up like a
#   random walk, so the tolerance is ULPS * sqrt(n) ulps (measured worst: ~1.2).
ULPS = 4.0


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """One intra-op thread for these tiny tensors: with two threads on two busy cores, torch's thread
    pool waits for descheduled workers and the 1,000-step tests ran about 60 times slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _unavailable_here(message: str) -> None:
    """Skip a test whose path cannot run on this machine; in CI fail instead (as conftest.py does for
    missing data), so that CI never passes by skipping."""
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(params=["c_kernel", "inductor"])
def fast_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Which fast path FastAdamW takes for float32 CPU tensors: the C kernel (fast_adamw), or,
    with the kernel switched off, torch.compile's (which float64 tensors take either way). Fails (in CI)
    or skips the test where the chosen path could not run here, so that it never passes by testing another."""
    if request.param == "inductor":
        monkeypatch.setattr(fast_adamw, "KERNEL_FAILURE", "switched off by the test")
    yield request.param
    failure = fast_adamw.KERNEL_FAILURE if request.param == "c_kernel" else fast_adamw.COMPILE_FAILURE
    if failure is not None:
        _unavailable_here(f"the {request.param} path is unavailable here, so a fallback was compared: "
                          f"{failure}")


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
    # Settings under which each wrong variant below moves some number by far more than rounding in 3 steps:
    # eps comparable to sqrt(v) (so its placement shows), strong decay (so coupled vs decoupled shows).
    "linear_revealing": Problem(lambda: nn.Linear(7, 5), lambda m: m.parameters(), _linear_loss,
                                dict(lr=1e-2, eps=1e-2, weight_decay=0.5)),
    "linear_amsgrad": Problem(lambda: nn.Linear(7, 5), lambda m: m.parameters(), _linear_loss,
                              dict(lr=1e-2, eps=1e-2, weight_decay=0.1, amsgrad=True)),
    "tiny_bert_llrd": Problem(_tiny_bert, lambda m: make_param_groups(m, lr=1e-3, weight_decay=0.01,
                                                                      layer_decay=0.8), _bert_loss),
    "mixed_groups": Problem(Mixed, _mixed_groups, _mixed_loss, dict(lr=5e-3, weight_decay=0.02)),
}


def run_pair(problem: Problem, steps: int, optimizer: type[AdamW] = AdamW, model: nn.Module | None = None,
             reference: type[torch.optim.Optimizer] = torch.optim.AdamW,
             schedule: Callable[[int], float] | None = None,
             ) -> tuple[nn.Module, nn.Module, AdamW, torch.optim.Optimizer]:
    """`steps` steps of `optimizer` (the lesson's AdamW or FastAdamW) and of `reference` (torch's
    single-tensor path, or the lesson's AdamW) on two copies of one model; `schedule` multiplies both
    learning rates after each step (LambdaLR)."""
    torch.manual_seed(0)
    model = problem.build() if model is None else model
    ref = copy.deepcopy(model)
    ours = optimizer(problem.groups(model), **problem.defaults)
    torch_only = dict(foreach=False) if reference is torch.optim.AdamW else {}
    theirs = reference(problem.groups(ref), **problem.defaults, **torch_only)
    schedules = [torch.optim.lr_scheduler.LambdaLR(o, schedule) for o in (ours, theirs)] if schedule else []
    gen = torch.Generator().manual_seed(1)
    for t in range(steps):
        ours.zero_grad()
        problem.loss(model, t, gen).backward()
        for p, q in zip(model.parameters(), ref.parameters()):
            q.grad = None if p.grad is None else p.grad.clone()
        ours.step()
        theirs.step()
        for lr_schedule in schedules:
            lr_schedule.step()
    return model, ref, ours, theirs


def assert_same_state(model: nn.Module, ref: nn.Module, ours: torch.optim.Optimizer,
                      theirs: torch.optim.Optimizer, steps: int, fast: bool = False) -> None:
    """Every parameter and every state tensor of `ours` equal to `theirs` after `steps` steps, within
    ULPS * steps ulps, or ULPS * sqrt(steps) for a fast path (see ULPS)."""
    lr = max(group["lr"] for group in theirs.param_groups)
    ulps = ULPS * (steps**0.5 if fast else steps)

    def tolerance(reference: torch.Tensor, update_size: float = 0.0) -> dict[str, float]:
        scale = max(float(reference.abs().max()), update_size)
        return dict(rtol=0.0, atol=ulps * torch.finfo(reference.dtype).eps * scale)

    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p, q, **tolerance(q.detach(), lr),
                                   msg=lambda m: f"parameter {name}: {m}")
        s, r = ours.state.get(p, {}), theirs.state.get(q, {})
        assert set(s) == set(r), f"{name}: state keys {sorted(s)} != torch's {sorted(r)}"
        for key in r:
            if key == "step":
                assert s[key] == int(r[key]), f"{name}: step {s[key]} != {int(r[key])}"
            else:
                torch.testing.assert_close(s[key], r[key], **tolerance(r[key]),
                                           msg=lambda m: f"state {key} of {name}: {m}")


# ----- parity with torch.optim.AdamW --------------------------------------------------------------

@pytest.mark.parametrize("problem", sorted(PROBLEMS))
@pytest.mark.parametrize("steps", [1, 3])
def test_matches_torch_adamw_after_1_and_3_steps(problem: str, steps: int) -> None:
    assert_same_state(*run_pair(PROBLEMS[problem], steps), steps)


@pytest.mark.parametrize("problem", ["linear", "linear_amsgrad", "tiny_bert_llrd", "mixed_groups"])
def test_matches_torch_adamw_after_1000_steps(problem: str) -> None:
    assert_same_state(*run_pair(PROBLEMS[problem], 1000), 1000)


@pytest.mark.parametrize("problem", sorted(PROBLEMS))
@pytest.mark.parametrize("steps", [3, 1000])
def test_fast_paths_match_torch_adamw_after_3_and_1000_steps(problem: str, steps: int,
                                                            fast_path: str) -> None:
    assert_same_state(*run_pair(PROBLEMS[problem], steps, FastAdamW), steps, fast=True)


def test_fast_paths_follow_a_learning_rate_that_changes_every_step(fast_path: str) -> None:
    """torch 2.13 miscompiled the update when the learning rate changed between calls (it kept the
    first one inside the bias correction); the learning rate goes in as a tensor, and this checks it."""
    pair = run_pair(PROBLEMS["mixed_groups"], 20, FastAdamW, schedule=lambda t: 1.0 / (1 + t))
    assert pair[2].param_groups[0]["lr"] == pytest.approx(1e-2 / 21)  # the schedule did change it
    assert_same_state(*pair, 20, fast=True)


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
        assert_same_state(*run_pair(PROBLEMS[problem], 3), 3)


def test_variant_harness_without_a_deviation_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Control for the test above: the same harness with no deviation passes, so what fails there is the
    deviation."""
    monkeypatch.setattr(adamw_module, "adamw_update", _variant())
    for problem in ("linear_revealing", "linear_amsgrad", "mixed_groups"):
        assert_same_state(*run_pair(PROBLEMS[problem], 3), 3)


# ----- a worked example ---------------------------------------------------------------------------

@pytest.mark.parametrize("optimizer", [FastAdamW, AdamW], ids=["fast", "lesson"])
def test_two_steps_on_a_scalar_match_the_hand_computation(optimizer: type[AdamW]) -> None:
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
    opt = optimizer([theta], lr=0.1, betas=(0.5, 0.75), eps=0.25, weight_decay=0.5)
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


# ----- FastAdamW's paths equal the lesson's AdamW, and fall back to it ----------------------------

@pytest.mark.parametrize("problem", ["tiny_bert_llrd", "mixed_groups", "linear_amsgrad"])
def test_fast_paths_equal_the_readable_path(problem: str, fast_path: str) -> None:
    # mixed_groups has parameters with different step counts (one skips odd steps) and two dtypes in
    # one group. Both get the same gradients (see run_pair): two free-running trajectories of the tiny
    # BERT part within ulps, but its key biases, whose true gradient is 0, follow rounding noise.
    assert_same_state(*run_pair(PROBLEMS[problem], 6, FastAdamW, reference=AdamW), 6, fast=True)


def test_fast_adamw_sends_float32_to_the_c_kernel_and_the_rest_to_the_compiled_path(
        monkeypatch: pytest.MonkeyPatch) -> None:
    kernel, compiled, readable = [], [], []
    monkeypatch.setattr(fast_adamw, "kernel_step", lambda updates, **hyper: kernel.append(updates) or True)
    monkeypatch.setattr(fast_adamw, "_update_compiled", lambda update, *args: compiled.append(args) or True)
    monkeypatch.setattr(adamw_module, "adamw_update", lambda *args, **kw: readable.append(args))
    single, double = nn.Parameter(torch.ones(3)), nn.Parameter(torch.ones(3, dtype=torch.float64))
    strided, other = nn.Parameter(torch.ones(4, 2).t()), nn.Parameter(torch.ones(5))
    for p in (single, double, strided, other):
        p.grad = torch.ones_like(p)
    FastAdamW([{"params": [single, double, strided]}, {"params": [other], "lr": 0.1}]).step()
    assert [[u[0] for u in updates] for updates in kernel] == [[single], [other]]  # one call per group
    assert [args[0].dtype for args in compiled] == [torch.float64]
    assert [args[0] for args in readable] == [strided]  # flat views need contiguous memory
    kernel.clear(), compiled.clear()
    FastAdamW([single, double], fused=False).step()
    assert kernel == [] and [args[0].dtype for args in compiled] == [torch.float32, torch.float64]


def _fresh_kernel(monkeypatch: pytest.MonkeyPatch, cache: Path) -> None:
    """As in a fresh process with an empty cache (monkeypatch restores everything afterwards)."""
    monkeypatch.setenv("MINBERT_CACHE", str(cache))
    monkeypatch.setattr(fast_adamw, "_LIBRARY", None)
    monkeypatch.setattr(fast_adamw, "KERNEL_FAILURE", None)


def test_the_c_kernel_gives_the_same_numbers_on_one_thread_and_on_three() -> None:
    # Each thread takes a share of every tensor (odd sizes, so the shares are uneven); a share taken
    # twice or left out would show here.
    results = []
    for threads in (1, 3):
        torch.manual_seed(0)
        params = [nn.Parameter(torch.randn(n)) for n in (1, 7, 1001, 40_003)]
        opt = FastAdamW(params, lr=1e-2, weight_decay=0.1, amsgrad=True)
        torch.set_num_threads(threads)
        try:
            for _ in range(3):
                for p in params:
                    p.grad = torch.randn_like(p)
                opt.step()
        finally:
            torch.set_num_threads(1)
        results.append([p.detach().clone() for p in params])
    if fast_adamw.KERNEL_FAILURE is not None:
        _unavailable_here(f"the C kernel is unavailable here: {fast_adamw.KERNEL_FAILURE}")
    for one, three in zip(*results):
        assert torch.equal(one, three)


def test_without_a_c_compiler_adamw_warns_once_and_runs_the_compiled_path(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _fresh_kernel(monkeypatch, tmp_path / "cache")
    monkeypatch.setenv("CC", str(tmp_path / "no-such-compiler"))
    with pytest.warns(RuntimeWarning, match="the C kernel is unavailable") as caught:
        fallback = run_pair(PROBLEMS["linear"], 3, FastAdamW)
        run_pair(PROBLEMS["linear"], 2, FastAdamW)  # a second optimizer: the failure is remembered
    assert len([w for w in caught if "C kernel" in str(w.message)]) == 1
    assert "no-such-compiler" in fast_adamw.KERNEL_FAILURE
    monkeypatch.setattr(fast_adamw, "KERNEL_FAILURE", "switched off by the test")
    compiled = run_pair(PROBLEMS["linear"], 3, FastAdamW)
    for p, q in zip(fallback[0].parameters(), compiled[0].parameters()):
        assert torch.equal(p, q), "the fallback is not the compiled path"


def test_a_failed_build_names_the_command_and_leaves_nothing_in_the_cache(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    compiler = tmp_path / "broken-cc"
    compiler.write_text("#!/bin/sh\necho 'adamw_kernel.c:1: error: nothing works' >&2\nexit 1\n")
    compiler.chmod(0o755)
    _fresh_kernel(monkeypatch, tmp_path / "cache")
    monkeypatch.setenv("CC", str(compiler))
    with pytest.raises(RuntimeError, match="broken-cc.*adamw_kernel.c.*failed: adamw_kernel.c:1: error"):
        fast_adamw.build()
    assert list((tmp_path / "cache").iterdir()) == []


def test_the_built_kernel_is_cached_and_reused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _fresh_kernel(monkeypatch, tmp_path / "cache")
    try:
        first = fast_adamw.build()
    except RuntimeError as error:  # no C compiler here: the fallback is tested above
        _unavailable_here(str(error))
    built_at = first.stat().st_mtime_ns
    assert fast_adamw.build() == first and first.stat().st_mtime_ns == built_at
    assert [p.name for p in first.parent.iterdir()] == [first.name]  # no temporary file left behind


def test_in_a_students_handout_the_jobs_train_with_the_lessons_adamw(monkeypatch: pytest.MonkeyPatch) -> None:
    """A handout's installed part carries the marker module (grading/handout.py writes it): there the job's
    optimizer is AdamW, whose loop runs the student's own adamw_update, uncompiled (what a built handout runs
    is checked in test_grading.py and test_handout_setup.py)."""
    assert not process.in_handout() and settings.adamw_class() is FastAdamW
    monkeypatch.setattr(process, "HANDOUT_MARKER", "optim.adamw")  # a module that is there
    process.in_handout.cache_clear()
    try:
        assert process.in_handout() and settings.adamw_class() is AdamW
    finally:
        process.in_handout.cache_clear()


def test_a_lessons_adamw_state_dict_continues_in_fast_adamw_and_back() -> None:
    spec = PROBLEMS["mixed_groups"]
    model, _, lesson, _ = run_pair(spec, 3)
    fast = FastAdamW(spec.groups(model), **spec.defaults)
    fast.load_state_dict(copy.deepcopy(lesson.state_dict()))
    assert [group["fused"] for group in fast.param_groups] == [None] * 3
    again = AdamW(spec.groups(model), **spec.defaults)
    again.load_state_dict(copy.deepcopy(fast.state_dict()))
    for optimizer in (fast, again):
        for p in model.parameters():
            assert optimizer.state[p]["step"] == lesson.state[p]["step"]
            assert torch.equal(optimizer.state[p]["exp_avg"], lesson.state[p]["exp_avg"])


def _compile_raises(fn, **kwargs):
    raise RuntimeError("torch.compile is not supported here")


def _compiled_call_raises(fn, **kwargs):
    def compiled(*args, **kw):  # torch.compile is lazy: compiling fails at the first call
        raise RuntimeError("InductorError: no working C++ compiler")
    return compiled


@pytest.mark.parametrize("broken_compile", [_compile_raises, _compiled_call_raises], ids=["compile", "call"])
def test_a_failed_compilation_warns_once_and_falls_back_to_the_readable_path(
        broken_compile, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch, "compile", broken_compile)
    monkeypatch.setattr(fast_adamw, "_COMPILED", None)  # as in a fresh process (restored afterwards)
    monkeypatch.setattr(fast_adamw, "COMPILE_FAILURE", None)
    monkeypatch.setattr(fast_adamw, "KERNEL_FAILURE", "switched off by the test")  # float32 too compiles
    with pytest.warns(RuntimeWarning, match="torch.compile of adamw_update failed") as caught:
        fallback = run_pair(PROBLEMS["mixed_groups"], 3, FastAdamW)
        run_pair(PROBLEMS["linear"], 2, FastAdamW)  # a second optimizer: the failure is remembered
    assert len([w for w in caught if "adamw_update failed" in str(w.message)]) == 1
    readable = run_pair(PROBLEMS["mixed_groups"], 3)
    for p, q in zip(fallback[0].parameters(), readable[0].parameters()):
        assert torch.equal(p, q), "the fallback is not the readable path"


# ----- skipping, groups, state --------------------------------------------------------------------

@pytest.mark.parametrize("optimizer", [FastAdamW, AdamW], ids=["fast", "lesson"])
def test_parameters_without_gradients_are_skipped(optimizer: type[AdamW]) -> None:
    used, unused = nn.Linear(3, 2), nn.Linear(3, 2)
    before = [p.detach().clone() for p in unused.parameters()]
    opt = optimizer([*used.parameters(), *unused.parameters()], lr=0.1, weight_decay=0.5)
    used(torch.randn(4, 3)).sum().backward()
    opt.step()
    for p, b in zip(unused.parameters(), before):
        assert torch.equal(p, b), "a parameter without a gradient changed (weight decay must skip it too)"
        assert p not in opt.state
    assert all(opt.state[p]["step"] == 1 for p in used.parameters())


@pytest.mark.parametrize("optimizer", [FastAdamW, AdamW], ids=["fast", "lesson"])
def test_per_group_learning_rates_are_honoured(optimizer: type[AdamW]) -> None:
    frozen, moving = nn.Parameter(torch.ones(4)), nn.Parameter(torch.ones(4))
    opt = optimizer([{"params": [frozen], "lr": 0.0}, {"params": [moving]}], lr=0.1, weight_decay=0.0)
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


@pytest.mark.parametrize("optimizer", [FastAdamW, AdamW], ids=["fast", "lesson"])
@pytest.mark.parametrize("problem", ["mixed_groups", "tiny_bert_llrd"])
def test_state_dict_round_trip_continues_bit_identically(problem: str, optimizer: type[AdamW]) -> None:
    spec = PROBLEMS[problem]
    torch.manual_seed(0)
    model = spec.build()
    opt = optimizer(spec.groups(model), **spec.defaults)
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
    resumed_opt = optimizer(spec.groups(resumed), **spec.defaults)
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
    assert_same_state(model, ref, ours, theirs, 6)


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
    (dict(correct_bias=False), r"correct_bias=False is not supported: this AdamW always corrects the bias"),
    (dict(correct_bias=None), r"correct_bias=None is not supported"),
])
def test_invalid_hyperparameters_are_rejected_by_name(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        AdamW(nn.Linear(2, 2).parameters(), **kwargs)


@pytest.mark.parametrize("groups", [False, True], ids=["argument", "group"])
def test_fast_adamw_refuses_a_wrong_fused_naming_it(groups: bool) -> None:
    params = list(nn.Linear(2, 2).parameters())
    with pytest.raises(ValueError, match=r"FastAdamW.*: fused must be None \(the C kernel where it applies"):
        FastAdamW([{"params": params, "fused": 1}] if groups else params, fused=None if groups else 1)


def test_invalid_group_hyperparameter_names_the_group() -> None:
    model = nn.Linear(2, 2)
    with pytest.raises(ValueError, match=r"param group 1: betas"):
        AdamW([{"params": [model.weight]}, {"params": [model.bias], "betas": (0.9, 1.5)}])


def test_correct_bias_false_in_a_group_names_the_group() -> None:
    model = nn.Linear(2, 2)
    with pytest.raises(ValueError, match=r"param group 1: correct_bias=False is not supported"):
        AdamW([{"params": [model.weight]}, {"params": [model.bias], "correct_bias": False}])


@pytest.mark.parametrize("optimizer", [FastAdamW, AdamW], ids=["fast", "lesson"])
def test_correct_bias_true_is_accepted_and_changes_nothing(optimizer: type[AdamW]) -> None:
    """The CS224N starter's call, AdamW(..., correct_bias=True): the same weights, bit for bit."""
    start = nn.Linear(3, 2)
    models = [copy.deepcopy(start), copy.deepcopy(start)]
    optimizers = [optimizer(models[0].parameters(), lr=1e-2, weight_decay=1e-2),
                  optimizer(models[1].parameters(), lr=1e-2, weight_decay=1e-2, correct_bias=True)]
    for _ in range(5):
        x = torch.randn(4, 3)
        for model, optimizer in zip(models, optimizers):
            optimizer.zero_grad()
            model(x).square().sum().backward()
            optimizer.step()
    assert not torch.equal(models[0].weight, start.weight)  # it trained
    for ours, theirs in zip(models[0].parameters(), models[1].parameters()):
        assert torch.equal(ours, theirs)


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
