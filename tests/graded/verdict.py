"""How a graded check is decided and explained, wherever it is decided (a plain module, torch only).

`failure(kind, actual, expected)` is the whole decision: None when `actual` passes the check described by
`expected` (the expected value, the tolerance, what it is, the common mistakes' results), else the message
a student reads. graded_helpers calls it in the test's own process (a student's `pytest tests/graded`);
the grader calls it in its own process, with what the submission's run computed against what the
reference's run expected (the staff's guide, Grading outside the code under test), so both give the same
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
    """Tensors: the first mistake whose result `actual` equals; else the first of the generic transforms
    of the expected value that it equals (diagnose), with where it differs most; else its wrong type or
    shape, a NaN, or only where it differs (where_it_differs). `rows` names the first axis's entries,
    `axes` the test's axis sizes (a size read back as its letter)."""
    if not isinstance(actual, torch.Tensor):
        return f"{what} should be a tensor of shape {tuple(expected.shape)}, got {type_name(actual)}"
    if actual.shape == expected.shape and close(actual, expected, atol, rtol):
        return None
    for wrong, explanation in mistakes:  # a mistake may have a shape of its own (a squeezed axis)
        wrong = evaluated(wrong)
        if isinstance(wrong, torch.Tensor) and close(actual, wrong, atol, rtol):
            return f"{what} is wrong: {explanation}"
    if actual.is_floating_point() and expected.is_floating_point() and actual.numel() == expected.numel():
        try:
            found = diagnose(actual.detach().double(), expected.detach().double(), atol, rtol, axes or {})
        except Exception:  # noqa: BLE001 - a diagnosis that cannot be made leaves the plain message
            found = None
        if found and actual.shape != expected.shape:
            return f"{what} has shape {tuple(actual.shape)}, expected {tuple(expected.shape)}: it is {found}"
        if found:
            detail = where_it_differs(actual.detach().double(), expected.detach().double(), atol, rtol, rows)
            return f"{what} is wrong: it is {found} ({detail})"
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
    if expected and got and math.isfinite(got) and abs(got / expected - 1) > 1e-3 and nice(got / expected):
        return (f"{what} is {got:.6g}, expected {expected:.6g}: it is "
                f"{ratio_words(got / expected)} the expected value")
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


# ----- generic transforms: what a wrong result is, in terms of the right one -------------------------------


def axis_word(dim: int, size: int, axes: dict) -> str:
    """An axis by its letter where the test names one of its size (B=2, T=5, ...), else by number."""
    names = [name for name, s in axes.items() if s == size]
    return f"axis {names[0]}" if len(names) == 1 else f"axis {dim} (size {size})"


def diagnose(actual: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float,
             axes: dict) -> str | None:
    """The first transform of `expected` that `actual` equals within the tolerance, in words, or None.
    Each is a fact about the two tensors (the student's code is not seen), tried in this order: a
    constant factor, a constant or one-axis offset (a term missing or added), axes in another order, one
    axis reversed or shifted by one position, a normalisation over another axis; then, on the elements
    that differ only, a factor, zeros, or one index of one axis."""
    def same(a, b):
        return a.shape == b.shape and bool(torch.isclose(a, b, rtol=rtol, atol=atol).all())

    if not (torch.isfinite(actual).all() and torch.isfinite(expected).all()) or not expected.abs().sum():
        return None
    if actual.shape == expected.shape:
        flat_a, flat_e = actual.flatten(), expected.flatten()
        factor = float(flat_a @ flat_e / (flat_e @ flat_e))
        if abs(factor + 1) < 1e-3 and same(actual, -expected):
            return "the expected values with the sign flipped (every element)"
        if not actual.abs().sum():
            return "0 everywhere"
        moderate = nice(factor) or 1e-3 <= abs(factor) <= 1e3  # not 3e-35: that says nothing
        if abs(factor - 1) > 1e-3 and moderate and same(actual, factor * expected):
            return f"{ratio_words(factor)} the expected values (every element)"
        offset = actual - expected
        if same(actual, expected + offset.mean()):
            return f"the expected values plus {offset.mean().item():.4g} (every element)"
        affine = affine_words(actual, expected, same)
        if affine:
            return affine
        for dim in range(actual.dim()):
            others = [d for d in range(actual.dim()) if d != dim]
            where = axis_word(dim, actual.size(dim), axes)
            if actual.size(dim) < 2 or actual.numel() < 2 * actual.size(dim):  # each index fits 2 numbers
                continue
            if same(offset, offset.mean(dim=others, keepdim=True).expand_as(offset)):
                return (f"the expected values plus a term that depends on {where} alone (the same at every "
                        "other index): a term is missing, or added")
            scale = (actual * expected).sum(dim=others, keepdim=True) / (expected * expected).sum(
                dim=others, keepdim=True).clamp_min(1e-300)
            moderate = all(nice(f) or 1e-3 <= abs(f) <= 1e3 for f in scale.flatten().tolist())
            if moderate and same(actual, scale * expected):
                listed = ", ".join(f"{f:.3g}" for f in scale.flatten()[:6].tolist())
                return (f"the expected values times a factor of their own at each index of {where} ({listed}"
                        f"{', ...' if scale.numel() > 6 else ''}), the same along every other axis")
        zeros = int(((actual == 0) & (expected != 0)).sum())
        if zeros >= max(2, actual.numel() // 5):  # a dropout, a mask or a ReLU where none is expected
            return (f"exactly 0 at {zeros} of its {actual.numel()} elements, where none of "
                    "the expected values is 0")
    for order in permutations(actual, expected):
        if same(actual, expected.permute(order)):
            moved = [axis_word(d, expected.size(d), axes) for d, o in enumerate(order) if d != o]
            return f"the expected values with {' and '.join(moved)} in another order (a transpose or permute)"
    if actual.shape != expected.shape:
        if same(actual, expected.reshape(actual.shape)):
            return ("the expected values read in another shape (the same numbers in row "
                    "order: a view or reshape)")
        return None
    for dim in range(actual.dim()):
        size, where = actual.size(dim), axis_word(dim, actual.size(dim), axes)
        if size > 1 and same(actual, expected.flip(dim)):
            return f"the expected values reversed along {where}"
        for k in range(size if size > 1 else 0):  # every index holds one index's expected values
            if same(actual, expected.narrow(dim, k, 1).expand_as(expected)):
                return f"at every index of {where} the expected values of its index {k}, repeated"
        for step, words in ((1, "the previous"), (-1, "the next")):
            if size > 2 and same(actual.narrow(dim, max(step, 0), size - 1),
                                 expected.narrow(dim, max(-step, 0), size - 1)):
                return (f"the expected values shifted by one along {where}: each entry "
                        f"holds {words} one's value")
        if size > 1 and actual.dim() > 1:
            sums_e = expected.sum(dim)
            if same(sums_e, torch.ones_like(sums_e)):
                others = [d for d in range(actual.dim()) if d != dim and actual.size(d) > 1
                          and same(actual.sum(d), torch.ones_like(actual.sum(d)))]
                if others:
                    other = axis_word(others[0], actual.size(others[0]), axes)
                    return (f"normalised over {other} (it sums to 1 there), where the expected values "
                            f"are normalised over {where}")
    return differing_part(actual, expected, atol, rtol, axes) or monotone_words(actual, expected, atol, rtol)


def affine_words(actual, expected, same) -> str | None:
    """ "1 minus the expected values", "2 times the expected values, plus 0.5": a x + b with a, b simple."""
    flat_a, flat_e = actual.flatten(), expected.flatten()
    if flat_e.numel() < 3 or flat_e.std() == 0:
        return None
    centred = flat_e - flat_e.mean()
    a = float(centred @ (flat_a - flat_a.mean()) / (centred @ centred))
    b = float(flat_a.mean() - a * flat_e.mean())
    if abs(a) < 1e-6 or not (nice(a) and (nice(b) or abs(b) < 1e-9)) or not same(actual, a * expected + b):
        return None
    if abs(a + 1) < 1e-6:
        return f"{b:.4g} minus the expected values (every element)"
    return f"{ratio_words(a)} the expected values, plus {b:.4g} (every element)"


def monotone_words(actual, expected, atol: float, rtol: float) -> str | None:
    """Element by element, the same order as the expected values with other values: the same numbers
    through another increasing (or decreasing) function, such as another activation."""
    e, order = expected.flatten().sort()
    a = actual.flatten()[order]
    if e.unique().numel() < 8:
        return None
    ties = e[1:] == e[:-1]
    steps = a[1:] - a[:-1]
    slack = atol + rtol * a[1:].abs()
    if bool((steps[ties].abs() <= slack[ties]).all()):
        for sign, words in ((1, "rises"), (-1, "falls")):
            if bool((sign * steps >= -slack).all()):
                quarter = [int(q * (len(e) - 1)) for q in (0.0, 0.5, 1.0)]
                points = ", ".join(f"{a[i].item():.3g} where {e[i].item():.3g} is expected" for i in quarter)
                return (f"element by element a function of the expected values that {words} with them: their "
                        f"order, other values ({points})")
    return None


def differing_part(actual, expected, atol: float, rtol: float, axes: dict) -> str | None:
    """What the elements that differ have in common: a factor, zeros, or one index of one axis."""
    wrong = ~torch.isclose(actual, expected, rtol=rtol, atol=atol)
    count, total = int(wrong.sum()), wrong.numel()
    if count < 2 or count == total:  # one element: where_it_differs names it already
        return None
    a, e = actual[wrong], expected[wrong]
    lines = [(dim, wrong.nonzero()[:, dim].unique()) for dim in range(actual.dim()) if actual.size(dim) > 1]
    at = next((f", all at index {int(i[0])} of {axis_word(d, actual.size(d), axes)}," for d, i in lines
               if len(i) == 1), "")
    share = f"right at {total - count} of {total} elements; the other {count}{at}"
    if not a.abs().sum():
        return f"{share} are 0"
    if bool(torch.isclose(a, a[0].expand_as(a), rtol=rtol, atol=atol).all()):
        return f"{share} are all {a[0].item():.4g}"
    zeros = int(((a == 0) & (e != 0)).sum())
    if zeros >= max(2, count // 5):  # a dropout, a mask or a ReLU at work where none is expected
        return f"{share} differ, and {zeros} of them are exactly 0 where the expected values are not"
    factor = float(a @ e / (e @ e)) if e.abs().sum() else 0.0
    if factor and bool(torch.isclose(a, factor * e, rtol=rtol, atol=atol).all()):
        return f"{share} are {ratio_words(factor)} their expected values"
    for dim in range(actual.dim()):  # the values of a neighbour along one axis: a shift, where it differs
        for step, words in ((1, "the previous"), (-1, "the next")):
            index = wrong.nonzero()
            index[:, dim] -= step
            inside = (index[:, dim] >= 0) & (index[:, dim] < actual.size(dim))
            if inside.all() and torch.isclose(a, expected[tuple(index.T)], rtol=rtol, atol=atol).all():
                where = axis_word(dim, actual.size(dim), axes)
                return f"{share} hold the value expected at {words} index of {where} (shifted by one)"
    return f"{share} differ" if at else None


def permutations(actual: torch.Tensor, expected: torch.Tensor):
    """The orders of expected's axes, other than its own, that give actual's shape."""
    import itertools
    if expected.dim() > 5 or actual.dim() != expected.dim():  # at most 120 orders: a submission sends shapes
        return
    for order in itertools.permutations(range(expected.dim())):
        if list(order) != sorted(order) and tuple(expected.size(d) for d in order) == tuple(actual.shape):
            yield order


def ratio_words(factor: float) -> str:
    """2 -> "2 times"; 0.3 -> "0.3 times (3/10 of)"."""
    from fractions import Fraction
    near = Fraction(factor).limit_denominator(16)
    if near.denominator > 1 and nice(factor):
        return f"{factor:.4g} times ({near.numerator}/{near.denominator} of)"
    return f"{factor:.4g} times"


def nice(ratio: float) -> bool:
    """A ratio that is a fraction with a small denominator (3/10, 2, 1/8): a count or a scale, not chance."""
    from fractions import Fraction
    if not math.isfinite(ratio):
        return False
    near = Fraction(ratio).limit_denominator(16)
    return near != 0 and abs(float(near) - ratio) < 1e-4 * abs(ratio)
