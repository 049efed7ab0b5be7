"""Helpers shared by the graded tests (a plain module: tests/graded/conftest.py puts this folder on sys.path).

Tolerances: float32 comparisons at atol = rtol = 1e-5 unless a test says otherwise.

Every graded check goes through `check_close` (tensors), `check_value` (a number), `check_equal` (lists,
strings) or `check_that` (a property that holds), and `fail` ends a test with a message. Where a check is
decided depends on who runs the test ($MINBERT_GRADING_RECORD):
- unset, as in a student's `pytest tests/graded`: here, by verdict.failure; a failing check raises an
  AssertionError with its message (the helpers' frames hidden from the traceback);
- "actual", the grader's child running a submission: the check only records its first argument, what the
  code under test computed, and the test goes on; the grader decides, in its own process;
- "expected", the grader's run of the reference: the check records what it expects (the expected value,
  the tolerance, what it is, the common mistakes' results) and is decided here (the reference must pass).
The child runs a copy of the tests without the expectations (the grader strips them): a check keeps its first
argument only, a keyword argument named expected... or mistakes... is dropped from every call, and a
function marked @expectation returns None, so nothing a submission can reach computes the expected values.
Write a test so that its expectations live only there (the staff's teaching guide, Writing a graded test).

Failure messages say what is wrong in the student's terms, computed from what their code returned: the
first known mistake whose result theirs equals (the tanh GELU, a missing scale, ...), otherwise where and
by how much the values differ (the verdict module).

Stand-ins (`use_stand_ins`) replace other components' TODOs by torch's own modules, so a test of one
component never waits for another's TODO and a bug costs points only where it is. Nothing here has a
TODO's signature and computes its answer: expectations come from torch's modules with the same weights,
from worked examples, or from small stored tensors (reference/, made by a staff script).
"""

from __future__ import annotations

import json
import os
import sys
from collections import OrderedDict
from pathlib import Path
from typing import Callable, NoReturn, Sequence

import torch
import torch.nn.functional as F
import verdict
from torch import nn

from minbert.attention import SelfAttentionOutput
from minbert.config import BertConfig

TOL = dict(atol=1e-5, rtol=1e-5)
MODE = os.environ.get("MINBERT_GRADING_RECORD", "")  # "", "actual" or "expected": see above
AXES: dict[str, int] = {}  # the running test's axis sizes (conftest.py sets them), kept with each expectation

Mistake = tuple[object, str]  # (the wrong result, or a function computing it; what the student did)


def fail(message: str) -> NoReturn:
    """Fail a graded test with `message`, the student's mistake in their terms."""
    __tracebackhide__ = True  # the traceback ends at the test's own line
    raise AssertionError(message)


def expectation(function: Callable) -> Callable:
    """Mark a function that computes a check's expected value or its mistakes' results: in the grader's
    child it returns None (the grader removes its body), so a submission cannot call it."""
    return function


def check_close(actual, expected: torch.Tensor | None = None, what: str = "",
                mistakes: Sequence[Mistake] = (), atol: float = 1e-5, rtol: float = 1e-5,
                rows: Sequence[str] | None = None) -> None:
    """`actual` equals `expected` within atol + rtol |expected|, or the test fails saying how it differs:
    the first mistake (wrong result, explanation) whose result `actual` equals, else the wrong type or
    shape, a NaN, or the element that misses the tolerance by most (verdict.close_failure); rows names
    the first axis's entries in that message ("sentence 1, token 3")."""
    __tracebackhide__ = True
    _check("close", actual, dict(expected=expected, what=what, mistakes=mistakes, atol=atol, rtol=rtol,
                                 rows=None if rows is None else list(rows)))


def check_value(actual, expected: float | None = None, what: str = "",
                mistakes: Sequence[tuple[float, str]] = (), tolerance: float = 1e-6) -> None:
    """A number equals `expected` within tolerance * max(1, |expected|), or the test fails naming the
    mistake that gives `actual` (every one that does, where several give the same number)."""
    __tracebackhide__ = True
    _check("value", actual, dict(expected=expected, what=what, mistakes=mistakes, tolerance=tolerance))


def check_equal(actual, expected=None, what: str = "", mistakes: Sequence[Mistake] = ()) -> None:
    """A list, string or boolean equals `expected`, or the test fails naming the mistake that gives it."""
    __tracebackhide__ = True
    _check("equal", actual, dict(expected=expected, what=what, mistakes=mistakes))


def check_that(condition: bool, message: str) -> None:
    """A property of what the code computed holds (`condition` is True), or the test fails with `message`,
    which may quote what the code computed. Both are computed where the test runs (the grader's child
    keeps them), so a check of values against expected ones should come with it: a test whose every check
    is a property proves little about a submission's numbers."""
    __tracebackhide__ = True
    if MODE == "actual":
        _record(kind="that", actual=verdict.encode(bool(condition)), message=str(message))
        return
    _check("that", bool(condition), dict(expected=True, what=message))


def _check(kind: str, actual, expected: dict) -> None:
    __tracebackhide__ = True
    if MODE == "actual":
        _record(kind=kind, actual=verdict.encode(actual))
        return
    if MODE == "expected":
        expected["mistakes"] = [(verdict.evaluated(wrong), why)
                                for wrong, why in expected.get("mistakes", ())]
        _record(kind=kind, line=_caller(), axes=AXES, **{
            name: [[verdict.encode(wrong), why] for wrong, why in value] if name == "mistakes"
            else verdict.encode(value) if name == "expected" else value for name, value in expected.items()})
    message = verdict.failure(kind, actual, expected)
    if message:
        fail(message)


def _record(**event) -> None:
    """One line of the child's event stream, the grader's only way to learn what a check saw (plugin.py)."""
    line = json.dumps({"event": "check", **event}) + "\n"
    os.write(int(os.environ["MINBERT_GRADING_EVENTS_FD"]), line.encode("utf-8"))


def _caller() -> str:
    """The graded test's line that made the check, relative to the repository ("tests/graded/x.py:12")."""
    frame = sys._getframe(2)
    while frame.f_globals.get("__name__") in (__name__, verdict.__name__):
        frame = frame.f_back
    path = Path(frame.f_code.co_filename).resolve()
    root = Path(__file__).resolve().parents[2]
    where = path.relative_to(root).as_posix() if path.is_relative_to(root) else path.name
    return f"{where}:{frame.f_lineno}"


# ----- stand-ins for other components' TODOs ----------------------------------------------------------
# Each computes a whole module through torch's own modules and has no TODO's contract, so neither pasting
# one into a TODO nor calling it from there earns that TODO's points: self-attention goes through torch's
# multi-head attention (its own head split, kernel and merge; no function here takes (B, H, T, D) heads),
# and the feed-forward expansion is built from nn.Linear and nn.GELU instead of running BertIntermediate.


def _self_attention_through_torch(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor,
                                  output_attentions: bool = False) -> SelfAttentionOutput:
    """BertSelfAttention.forward computed by F.multi_head_attention_forward with this module's projections."""
    B, T, C = hidden_states.shape
    x = hidden_states.transpose(0, 1)  # (T, B, C): torch's functional attention is sequence-first
    biases = torch.cat([self.query.bias, self.key.bias, self.value.bias])
    context, probs = F.multi_head_attention_forward(
        x, x, x, C, self.num_heads, None, biases, None, None, False, self.dropout.p,
        torch.eye(C, dtype=x.dtype), None,  # identity output projection: ours stops before it (layer.py)
        training=self.training, key_padding_mask=attention_mask.reshape(B, T), need_weights=output_attentions,
        use_separate_proj_weight=True, q_proj_weight=self.query.weight, k_proj_weight=self.key.weight,
        v_proj_weight=self.value.weight, average_attn_weights=False)
    return SelfAttentionOutput(context.transpose(0, 1), probs)


def _torch_intermediate(config: BertConfig) -> nn.Sequential:
    """The feed-forward expansion as torch's nn.Linear then nn.GELU (exact), its weights named like ours."""
    return nn.Sequential(OrderedDict(dense=nn.Linear(config.hidden_size, config.intermediate_size),
                                     gelu=nn.GELU()))


def use_stand_ins(monkeypatch, *components: str) -> None:
    """Replace these components' TODOs by torch's computation: "attention" or "split_heads" (either one
    replaces BertSelfAttention.forward), "feed_forward" (layers built afterwards get torch's expansion)."""
    import minbert.attention
    import minbert.layer

    known = ("attention", "split_heads", "feed_forward")
    unknown = [c for c in components if c not in known]
    if unknown:
        raise ValueError(f"graded_helpers.use_stand_ins: no stand-in for {unknown}; there are {known}")
    if {"attention", "split_heads"} & set(components):
        monkeypatch.setattr(minbert.attention.BertSelfAttention, "forward", _self_attention_through_torch)
    if "feed_forward" in components:
        monkeypatch.setattr(minbert.layer, "BertIntermediate", _torch_intermediate)


# ----- inputs -----------------------------------------------------------------------------------------


def additive(mask: torch.Tensor) -> torch.Tensor:
    """(B, T) 1/0 mask -> additive (B, 1, 1, T) float32 mask, 0 for tokens and -inf for padding.

    -inf is torch's convention (nn.MultiheadAttention turns a boolean mask into it). minbert's own mask
    (model.py::extended_attention_mask) uses the dtype's most negative finite number instead, so that a
    row of all padding stays finite; its tests check exactly that, so this is no answer to that TODO.
    """
    inf = torch.full(mask.shape, float("-inf"))
    return torch.where(mask.bool(), 0.0, inf)[:, None, None, :]


def ragged_batch(fill: float = 1e4) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(3, 6, 5) token vectors, a (3, 6) mask of 6, 4 and 1 real tokens, and the same vectors with every
    padding vector set to `fill` (a pooling must give the same result for both)."""
    hidden = torch.randn(3, 6, 5)
    mask = torch.tensor([[1] * 6, [1] * 4 + [0] * 2, [1] + [0] * 5])
    return hidden, mask, hidden.masked_fill((mask == 0)[..., None], fill)


def randomize(module: torch.nn.Module, std: float = 0.5) -> torch.nn.Module:
    """Non-trivial weights everywhere (LayerNorm scales too), so every parameter shows in the output."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            p.copy_(torch.randn_like(p) * std + (1.0 if "LayerNorm.weight" in name else 0.0))
    return module


@expectation
def torch_encoder_layer(layer, config: BertConfig) -> torch.nn.TransformerEncoderLayer:
    """torch's own post-LN encoder layer (exact GELU) holding the same weights as our BertLayer."""
    theirs = torch.nn.TransformerEncoderLayer(
        config.hidden_size, config.num_attention_heads, config.intermediate_size, dropout=0.0,
        activation="gelu", layer_norm_eps=config.layer_norm_eps, batch_first=True, norm_first=False)
    a = layer.attention
    with torch.no_grad():
        theirs.self_attn.in_proj_weight.copy_(torch.cat([a.self.query.weight, a.self.key.weight,
                                                         a.self.value.weight]))
        theirs.self_attn.in_proj_bias.copy_(torch.cat([a.self.query.bias, a.self.key.bias,
                                                       a.self.value.bias]))
        pairs = [(theirs.self_attn.out_proj, a.output.dense), (theirs.norm1, a.output.LayerNorm),
                 (theirs.linear1, layer.intermediate.dense), (theirs.linear2, layer.output.dense),
                 (theirs.norm2, layer.output.LayerNorm)]
        for mine, ours in pairs:
            mine.weight.copy_(ours.weight)
            mine.bias.copy_(ours.bias)
    return theirs.eval()


@expectation
def torch_multihead_attention(ours, config: BertConfig) -> torch.nn.MultiheadAttention:
    """torch's nn.MultiheadAttention with our BertSelfAttention's projections and no output projection."""
    C = config.hidden_size
    theirs = torch.nn.MultiheadAttention(C, config.num_attention_heads, batch_first=True).eval()
    with torch.no_grad():
        theirs.in_proj_weight.copy_(torch.cat([ours.query.weight, ours.key.weight, ours.value.weight]))
        theirs.in_proj_bias.copy_(torch.cat([ours.query.bias, ours.key.bias, ours.value.bias]))
        theirs.out_proj.weight.copy_(torch.eye(C))  # ours stops before the output projection
        theirs.out_proj.bias.zero_()
    return theirs
