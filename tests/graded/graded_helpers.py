"""Helpers shared by the graded tests (a plain module: tests/graded/conftest.py puts this folder on sys.path).

Tolerances: float32 comparisons at atol = rtol = 1e-5 unless a test says otherwise.

Failure messages say what is wrong in the student's terms, computed from what their code returned:
`check_close` names the first known mistake whose result theirs equals (the tanh GELU, a missing
scale, ...) and otherwise where and by how much the values differ. Messages are raised as plain
AssertionErrors, so a hidden test shows them without quoting its code.

Stand-ins (`use_stand_ins`) replace other components' TODOs by torch's own modules, so a test of one
component never waits for another's TODO and a bug costs points only where it is. Nothing here has a
TODO's signature and computes its answer: expectations come from torch's modules with the same weights,
from worked examples, or from small stored tensors (reference/, made by a staff script).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import NoReturn, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from minbert.attention import SelfAttentionOutput
from minbert.config import BertConfig

TOL = dict(atol=1e-5, rtol=1e-5)

Mistake = tuple[object, str]  # (the wrong result, or a function computing it; what the student did)


def fail(message: str) -> NoReturn:
    """Fail a graded test with `message`, the student's mistake in their terms."""
    __tracebackhide__ = True  # the traceback ends at the test's own line
    raise AssertionError(message)


def _close(a: torch.Tensor, b: torch.Tensor, atol: float, rtol: float) -> bool:
    # equal_nan: a mistake's result may hold NaN where the student's does (0 / 0 without eps)
    return a.shape == b.shape and torch.allclose(a.detach().double(), b.detach().double(), atol=atol,
                                                 rtol=rtol, equal_nan=True)


def check_close(actual, expected: torch.Tensor, what: str, mistakes: Sequence[Mistake] = (),
                atol: float = 1e-5, rtol: float = 1e-5) -> None:
    """`actual` equals `expected` within the tolerance, or the test fails saying how it differs.

    mistakes: (wrong result, explanation) pairs; when `actual` equals a wrong result the message is
    that explanation. Otherwise it gives the wrong type or shape, a NaN, or the element that fails the
    tolerance by most (where_it_differs).
    """
    __tracebackhide__ = True
    if not isinstance(actual, torch.Tensor):
        fail(f"{what} should be a tensor of shape {tuple(expected.shape)}, got {type(actual).__name__}")
    if actual.shape == expected.shape and _close(actual, expected, atol, rtol):
        return
    for wrong, explanation in mistakes:  # a mistake may have a shape of its own (a squeezed axis)
        wrong = wrong() if callable(wrong) else wrong
        if isinstance(wrong, torch.Tensor) and _close(actual, wrong, atol, rtol):
            fail(f"{what} is wrong: {explanation}")
    if actual.shape != expected.shape:
        fail(f"{what} has shape {tuple(actual.shape)}, expected {tuple(expected.shape)}")
    actual, expected = actual.detach().double(), expected.detach().double()
    if torch.isnan(actual).any() and not torch.isnan(expected).any():
        index = [int(i) for i in torch.nonzero(torch.isnan(actual))[0]]
        fail(f"{what} holds NaN (first at index {index}); expected finite values")
    fail(f"{what} {where_it_differs(actual, expected, atol, rtol)}")


def where_it_differs(actual: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float) -> str:
    """The element that misses the tolerance by most, both values, the tolerance, and how many miss it.

    "Misses by most" is |got - expected| beyond its own allowance atol + rtol |expected|, the rule of
    torch.allclose: the largest absolute difference alone may sit inside the tolerance of a large value
    while a small value elsewhere is the one that fails.
    """
    difference = (actual - expected).abs().nan_to_num(float("inf"))
    allowed = atol + rtol * expected.abs()
    excess = difference - allowed
    index = tuple(int(i) for i in torch.unravel_index(excess.argmax(), excess.shape))
    failing, total = int((excess > 0).sum()), excess.numel()
    return (f"differs at index {list(index)}: got {actual[index].item():.6g}, expected "
            f"{expected[index].item():.6g} (difference {difference[index].item():.3g}, allowed "
            f"atol + rtol * |expected| = {atol:g} + {rtol:g} * {expected[index].abs().item():.3g}); "
            f"{failing} of {total} elements are outside the tolerance, the largest difference is "
            f"{difference.max().item():.3g}")


def check_value(actual, expected: float, what: str, mistakes: Sequence[tuple[float, str]] = (),
                tolerance: float = 1e-6) -> None:
    """A number equals `expected`, or the test fails naming the mistake that gives `actual` (every one that
    does, where several give the same number)."""
    __tracebackhide__ = True
    try:
        actual = float(actual.detach() if isinstance(actual, torch.Tensor) else actual)
    except (TypeError, ValueError):
        fail(f"{what} should be a number, got {actual!r}")
    if abs(actual - expected) <= tolerance * max(1.0, abs(expected)):
        return
    matched = [explanation for wrong, explanation in mistakes
               if abs(actual - wrong) <= tolerance * max(1.0, abs(wrong))]
    if len(matched) > 1:  # two mistakes give this number here: name both rather than guess
        fail(f"{what} is {actual:.6g}, expected {expected:.6g}; two mistakes give this value: "
             + "; or ".join(matched))
    if matched:
        fail(f"{what} is {actual:.6g}, expected {expected:.6g}: {matched[0]}")
    fail(f"{what} is {actual:.6g}, expected {expected:.6g}")


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
