"""How a graded check is decided and explained, wherever it is decided (a plain module, torch only).

`failure(kind, actual, expected)` is the whole decision: None when `actual` passes the check described by
`expected` (the expected value, the tolerance, what it is, the common mistakes' results), else the message
a student reads. graded_helpers calls it in the test's own process (a student's `pytest tests/graded`);
the grader calls it in its own process, with what the submission's run computed against what the
reference's run expected (docs/teaching.md, Grading outside the code under test), so both give the same
message. Values cross between those processes as data only (`encode`, `decode`): tensors as safetensors
bytes, the rest as JSON; nothing is unpickled or run.

Read next: graded_helpers.py.
"""

from __future__ import annotations

import base64
import math

import torch
from safetensors.torch import load, save


class Opaque:
    """A value that is neither a tensor nor JSON (a module, a generator...), known by its type's name."""

    def __init__(self, name: str) -> None:
        self.name = name


def type_name(value) -> str:
    return value.name if isinstance(value, Opaque) else type(value).__name__


def _plain(value):
    """`value` as JSON (numpy scalars and arrays as numbers and lists), or Opaque."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "tolist") and not isinstance(value, torch.Tensor):  # numpy arrays and scalars
        return _plain(value.tolist())
    if isinstance(value, (list, tuple)):
        items = [_plain(v) for v in value]
        return Opaque(type(value).__name__) if any(isinstance(i, Opaque) for i in items) else items
    return Opaque(type(value).__name__)


def encode(value) -> dict:
    """A JSON-able description of `value`: {"tensor": base64 safetensors}, {"json": ...} or {"type": name}."""
    if isinstance(value, torch.Tensor):
        plain = value.detach().cpu().contiguous()
        if plain.is_complex() or plain.layout != torch.strided:
            return {"type": f"{plain.dtype} {plain.layout} tensor"}
        return {"tensor": base64.b64encode(save({"value": plain.clone()})).decode("ascii")}
    plain = _plain(value)
    return {"type": plain.name} if isinstance(plain, Opaque) else {"json": plain}


def decode(payload) -> object:
    """The value `encode` described; anything malformed (a submission may send anything) is Opaque."""
    try:
        if "tensor" in payload:
            return load(base64.b64decode(payload["tensor"]))["value"]
        if "json" in payload:
            return payload["json"]
        return Opaque(str(payload["type"])[:80])
    except Exception:  # noqa: BLE001 - the submission's bytes: any failure means "not a value"
        return Opaque("undecodable value")


# ----- deciding ----------------------------------------------------------------------------------------


def failure(kind: str, actual, expected: dict) -> str | None:
    """None if `actual` passes the check `expected` describes, else what the student reads. kind: "close"
    (tensors within atol + rtol |expected|), "value" (a number within tolerance), "equal" (JSON values) or
    "that" (a property: True, else the message)."""
    mistakes = expected.get("mistakes") or ()
    what = expected["what"]
    if kind == "that":
        return None if actual is True else what
    if kind == "close":
        return close_failure(actual, expected["expected"], what, mistakes, expected["atol"], expected["rtol"],
                             expected.get("rows"), expected.get("axes"))
    if kind == "value":
        return value_failure(actual, expected["expected"], what, mistakes, expected["tolerance"])
    return equal_failure(actual, expected["expected"], what, mistakes)


def evaluated(mistake):
    """A mistake's result, computed when first needed (a callable may be given), or None if it fails."""
    try:
        return mistake() if callable(mistake) else mistake
    except Exception:  # noqa: BLE001 - a mistake that cannot be computed on these inputs is no match
        return None


def close(a: torch.Tensor, b: torch.Tensor, atol: float, rtol: float) -> bool:
    # equal_nan: a mistake's result may hold NaN where the student's does (0 / 0 without eps)
    return a.shape == b.shape and torch.allclose(a.detach().double(), b.detach().double(), atol=atol,
                                                 rtol=rtol, equal_nan=True)


def close_failure(actual, expected: torch.Tensor, what: str, mistakes=(), atol: float = 1e-5,
                  rtol: float = 1e-5, rows: list[str] | None = None, axes: dict | None = None) -> str | None:
    """Tensors: the first mistake whose result `actual` equals, else its wrong type or shape, a NaN, or the
    element that misses the tolerance by most (where_it_differs); `rows` names the first axis's entries."""
    if not isinstance(actual, torch.Tensor):
        return f"{what} should be a tensor of shape {tuple(expected.shape)}, got {type_name(actual)}"
    if actual.shape == expected.shape and close(actual, expected, atol, rtol):
        return None
    for wrong, explanation in mistakes:  # a mistake may have a shape of its own (a squeezed axis)
        wrong = evaluated(wrong)
        if isinstance(wrong, torch.Tensor) and close(actual, wrong, atol, rtol):
            return f"{what} is wrong: {explanation}"
    if actual.shape != expected.shape:
        return f"{what} has shape {tuple(actual.shape)}, expected {tuple(expected.shape)}"
    actual, expected = actual.detach().double(), expected.detach().double()
    if torch.isnan(actual).any() and not torch.isnan(expected).any():
        index = [int(i) for i in torch.nonzero(torch.isnan(actual))[0]]
        return f"{what} holds NaN (first {place(index, rows)}); expected finite values"
    return f"{what} {where_it_differs(actual, expected, atol, rtol, rows)}"


def place(index: list[int], rows: list[str] | None = None) -> str:
    """ "at index [2, 5]", or with names for the first axis, "at sentence 0, token 2, index [5]"."""
    if rows is None or not index or len(rows) <= index[0]:
        return f"at index {index}"
    return f"at {rows[index[0]]}" + (f", index {index[1:]}" if len(index) > 1 else "")


def where_it_differs(actual: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float,
                     rows: list[str] | None = None) -> str:
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
    return (f"differs {place(list(index), rows)}: got {actual[index].item():.6g}, expected "
            f"{expected[index].item():.6g} (difference {difference[index].item():.3g}, allowed "
            f"atol + rtol * |expected| = {atol:g} + {rtol:g} * {expected[index].abs().item():.3g}); "
            f"{failing} of {total} elements are outside the tolerance, the largest difference is "
            f"{difference.max().item():.3g}")


def _number(value) -> float | None:
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return float(value.detach().double())
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def value_failure(actual, expected: float, what: str, mistakes=(), tolerance: float = 1e-6) -> str | None:
    """A number: within tolerance * max(1, |expected|), else the mistakes that give it (every one that
    does, where several give the same number)."""
    got = _number(actual)
    if got is None:
        return f"{what} should be a number, got {type_name(actual)}"
    if abs(got - expected) <= tolerance * max(1.0, abs(expected)):
        return None
    matched = [explanation for wrong, explanation in ((evaluated(m), e) for m, e in mistakes)
               if isinstance(wrong, (int, float)) and math.isfinite(wrong)
               and abs(got - wrong) <= tolerance * max(1.0, abs(wrong))]
    if len(matched) > 1:  # two mistakes give this number here: name both rather than guess
        return (f"{what} is {got:.6g}, expected {expected:.6g}; two mistakes give this value: "
                + "; or ".join(matched))
    if matched:
        return f"{what} is {got:.6g}, expected {expected:.6g}: {matched[0]}"
    return f"{what} is {got:.6g}, expected {expected:.6g}"


def equal_failure(actual, expected, what: str, mistakes=()) -> str | None:
    """JSON values (lists, strings, booleans): equal, else the first mistake that gives `actual`."""
    if isinstance(actual, Opaque):
        return f"{what} gave a {actual.name}, expected {expected!r}"
    got = _plain(actual)
    if got == expected:
        return None
    for wrong, explanation in mistakes:
        if got == _plain(evaluated(wrong)):
            return f"{what} gave {got!r}, expected {expected!r}: {explanation}"
    return f"{what} gave {got!r}, expected {expected!r}"
