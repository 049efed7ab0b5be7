"""A crash in the student's code, explained in the test's axis names (tests/graded/conftest.py calls it).

When a TODO raises (a shape, dtype, device or index error from torch or numpy), the student should not
have to decode "Expected size for first two dimensions of batch2 tensor to be: [12, 4] but got: [12, 1]".
`explain` finds the innermost frame of the student's packages in the traceback, the exact expression
that raised there (Python's column positions), evaluates its operands in that frame, and describes each
tensor's shape in the test's axis names: every graded test uses a different size on every axis (B=2,
H=3, T=5, D=7, ...; a module's `AXES` declares them), so a size reads back as its axis. Known slips get a
hint: `.T` on more than two axes, matrix products whose inner axes differ, integer class labels where
cross-entropy wants float scores, an index past the end of an axis.

Operands are evaluated only when the expression cannot change anything: names, constants, attributes,
subscripts, arithmetic, calls of the methods listed in VIEWS (`key.T`, `x.transpose(1, 2)`, `mask[:, None]`,
`u.norm(dim=0).clamp(min=eps)`), and calls of a module in eval mode or an Identity (`self.transform(h)`);
anything else is shown as text only. The student's exception
message is never quoted (their code chooses it, and runs beside the hidden tests); the numbers in
torch's and numpy's index messages are read with a pattern.
"""

from __future__ import annotations

import ast
import linecache
import re
from pathlib import Path

import numpy as np
import torch

# Methods that return a view, a converted copy or a new tensor, and change nothing (none ends in _).
VIEWS = frozenset({
    "transpose", "permute", "view", "reshape", "unsqueeze", "squeeze", "flatten", "t", "contiguous", "size",
    "dim", "float", "double", "half", "bfloat16", "long", "int", "bool", "expand", "expand_as", "view_as",
    "reshape_as", "movedim", "swapaxes", "swapdims", "narrow", "select", "unflatten", "type_as", "detach",
    "numel", "astype", "clone", "abs", "sqrt", "exp", "log", "softmax", "log_softmax", "sum", "mean", "amax",
    "max", "min", "norm", "to", "nonzero", "argmax", "argsort", "masked_fill", "sigmoid", "tanh",
    # and methods that compute a new tensor from their operands, none of them in place
    "clamp", "clamp_min", "clamp_max", "clip", "pow", "mul", "add", "sub", "div", "neg", "matmul", "mm",
    "bmm", "var", "std", "relu", "amin", "cumsum", "prod", "square", "rsqrt", "reciprocal", "repeat",
    "mT",
})
# Functions whose arguments have a dtype to say: name -> what each positional argument must be.
ARGUMENTS = {
    "cross_entropy": ("float scores (logits)", "int64 class indices (labels)"),
    "nll_loss": ("float log-probabilities", "int64 class indices (labels)"),
    "binary_cross_entropy_with_logits": ("float logits", "float targets"),
    "embedding": ("int64 ids", "the float table"),
}
ERRORS = (RuntimeError, IndexError, ValueError, TypeError, NotImplementedError, ZeroDivisionError)


def student_frame(traceback, root: Path, packages: tuple[str, ...]):
    """The innermost traceback entry in a file of the student's packages, or None."""
    found = None
    while traceback is not None:
        try:
            parts = Path(traceback.tb_frame.f_code.co_filename).resolve().relative_to(root).parts
        except ValueError:
            parts = ()
        if parts and parts[0] in packages:
            found = traceback
        traceback = traceback.tb_next
    return found


def failing_expression(entry) -> tuple[str, int, str]:
    """(file's path, line number, source of the expression that raised) for one traceback entry."""
    code = entry.tb_frame.f_code
    lines = linecache.getlines(code.co_filename)
    positions = list(code.co_positions())
    start, end, col, end_col = positions[entry.tb_lasti // 2] if entry.tb_lasti // 2 < len(positions) else (
        entry.tb_lineno, entry.tb_lineno, None, None)
    start, end = start or entry.tb_lineno, end or entry.tb_lineno
    if col is None or end_col is None or not lines:
        return code.co_filename, entry.tb_lineno, (lines[entry.tb_lineno - 1].strip() if lines else "")
    if start == end:
        text = lines[start - 1].encode()[col:end_col].decode(errors="replace")
    else:
        chunk = [line.encode() for line in lines[start - 1:end]]
        chunk[0], chunk[-1] = chunk[0][col:], chunk[-1][:end_col]
        text = b"".join(chunk).decode(errors="replace")
    return code.co_filename, start, " ".join(text.split())


def is_pure(node: ast.AST) -> bool:
    """Whether evaluating `node` can change nothing: see the module docstring."""
    if isinstance(node, (ast.Name, ast.Constant)):
        return True
    if isinstance(node, ast.Attribute):
        return is_pure(node.value)
    if isinstance(node, ast.Subscript):
        return is_pure(node.value) and is_pure(node.slice)
    if isinstance(node, ast.Slice):
        return all(part is None or is_pure(part) for part in (node.lower, node.upper, node.step))
    if isinstance(node, (ast.Tuple, ast.List)):
        return all(is_pure(e) for e in node.elts)
    if isinstance(node, ast.BinOp):
        return is_pure(node.left) and is_pure(node.right)
    if isinstance(node, ast.UnaryOp):
        return is_pure(node.operand)
    if isinstance(node, ast.Call):
        return (isinstance(node.func, ast.Attribute) and node.func.attr in VIEWS and is_pure(node.func.value)
                and all(is_pure(a) for a in node.args) and all(is_pure(k.value) for k in node.keywords))
    return False


def still(node: ast.AST, values: dict[str, object]) -> bool:
    """A call of a module that changes nothing when called: in eval mode (no dropout draws, no running
    statistics), or an Identity, on arguments already evaluated (self.transform(hidden_states))."""
    if not isinstance(node, ast.Call) or not is_pure(node.func) or node.keywords:
        return False
    module = values.get(ast.unparse(node.func))
    still_module = isinstance(module, torch.nn.Module) and (not module.training
                                                            or isinstance(module, torch.nn.Identity))
    return still_module and all(ast.unparse(a) in values or isinstance(a, ast.Constant) for a in node.args)


def operands(node: ast.AST) -> list[ast.AST]:
    """The sub-expressions worth describing: a product's or sum's two sides, a call's receiver and
    arguments, a subscript's value and index."""
    if isinstance(node, ast.BinOp):
        return [node.left, node.right]
    if isinstance(node, ast.Call):
        receiver = [node.func.value] if isinstance(node.func, ast.Attribute) else []
        return receiver + list(node.args) + [k.value for k in node.keywords]
    if isinstance(node, ast.Subscript):
        return [node.value, node.slice]
    if isinstance(node, ast.Compare):
        return [node.left, *node.comparators]
    return []


def axis_name(size: int, axes: dict[str, int]) -> str:
    """5 -> "T" where T = 5 is the one axis of that size; a size no axis has, or several have, stays a
    number."""
    names = [name for name, s in axes.items() if s == size]
    return names[0] if len(names) == 1 else str(size)


def shape_in_axes(shape, axes: dict[str, int]) -> str:
    """(2, 3, 5, 7) -> "(B, H, T, D)"."""
    words = [axis_name(s, axes) for s in shape]
    return "(" + ", ".join(words) + ("," if len(words) == 1 else "") + ")"


def dtype_word(dtype) -> str:
    return str(dtype).replace("torch.", "")


def describe(value, axes: dict[str, int]) -> str | None:
    if isinstance(value, torch.Tensor):
        device = "" if value.device.type == "cpu" else f" on {value.device}"
        return f"{shape_in_axes(value.shape, axes)} {dtype_word(value.dtype)}{device}"
    if isinstance(value, np.ndarray):
        return f"a numpy array {shape_in_axes(value.shape, axes)} {value.dtype}"
    if isinstance(value, (bool, int, float)) and not isinstance(value, type(None)):
        return repr(value)
    if isinstance(value, (list, tuple)) and len(value) <= 8 and all(isinstance(v, int) for v in value):
        return repr(value)
    if isinstance(value, torch.nn.Module):
        return None
    return None


def hints(node: ast.AST, source: str, values: dict[str, object], error: BaseException,
          axes: dict[str, int]) -> list[str]:
    """Known slips this expression shows."""
    found = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute) and sub.attr == "T":
            value = values.get(ast.unparse(sub.value))
            if isinstance(value, torch.Tensor) and value.dim() > 2:
                found.append(f".T reverses all {value.dim()} axes of {ast.unparse(sub.value)}; swap the last "
                             "two with .transpose(-1, -2)")
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr == "squeeze" \
                and not sub.args and not sub.keywords:
            value = values.get(ast.unparse(sub.func.value))
            if isinstance(value, torch.Tensor) and value.dim() and value.size(0) == 1:
                found.append(f"{ast.unparse(sub)} drops every axis of size 1, here the batch axis of a "
                             "batch of one too: name the axis (.squeeze(-1)) or flatten with .view(-1)")
    overflow = re.search(r"cannot be converted to type (\S+) without overflow", str(error))
    if overflow:
        floats = {"c10::Half": torch.float16, "c10::BFloat16": torch.bfloat16, "float": torch.float32}
        dtype = floats.get(overflow.group(1))
        limit = f" (its most negative finite number is {torch.finfo(dtype).min:.6g})" if dtype else ""
        constants = [ast.get_source_segment(source, c) for c in operands(node)
                     if isinstance(c, (ast.Constant, ast.UnaryOp)) and is_pure(c)]
        named = dtype_word(dtype or overflow.group(1))
        found.append(f"{', '.join(constants) or 'a constant'} does not fit in {named}{limit}: use "
                     "torch.finfo(x.dtype).min, the dtype's own most negative number")
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
        left, right = (values.get(ast.unparse(side)) for side in (node.left, node.right))
        if isinstance(left, torch.Tensor) and isinstance(right, torch.Tensor) and right.dim() >= 2:
            inner = (left.size(-1), right.size(-2))
            if inner[0] != inner[1]:
                found.append(f"a @ b pairs the last axis of a ({axis_name(inner[0], axes)}) with the "
                             f"second-to-last of b ({axis_name(inner[1], axes)}); they must be the same axis")
    if isinstance(node, ast.Call):
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        wanted = ARGUMENTS.get(name)
        got = [values.get(ast.unparse(a)) for a in node.args[:2]]
        if (wanted and len(got) == 2 and all(isinstance(g, torch.Tensor) for g in got)
                and got[0].is_floating_point() != wanted[0].startswith("float")):
            first, second = (ast.unparse(a) for a in node.args[:2])
            found.append(f"{name} takes {wanted[0]} first and {wanted[1]} second: here the first is "
                         f"{dtype_word(got[0].dtype)} {first} and the second "
                         f"{dtype_word(got[1].dtype)} {second}")
    message = str(error)
    index = re.search(r"index (-?\d+) is out of bounds for (?:dimension|axis) (\d+) with size (\d+)", message)
    if index:
        position, axis, size = (int(g) for g in index.groups())
        found.append(f"index {position} ran past axis {axis} ({axis_name(size, axes)}, size {size}): valid "
                     f"indices are 0 to {size - 1}")
    if "index out of range in self" in message:  # nn.Embedding / F.embedding
        found += embedding_hints(values)
    if "view size is not compatible with input tensor's size and stride" in message:
        viewed = [ast.unparse(sub.func.value) for sub in ast.walk(node) if isinstance(sub, ast.Call)
                  and isinstance(sub.func, ast.Attribute) and sub.func.attr == "view"]
        what = viewed[0] if viewed else "the tensor"
        found.append(f"{what} is not contiguous (a transpose or permute reorders a view without moving its "
                     "elements), and .view needs its elements in row order: torch's hint is \"use "
                     ".reshape(...) instead\" (or .contiguous().view(...))")
    return found


def embedding_hints(values: dict[str, object]) -> list[str]:
    """Which ids fall outside the table: negative ones, or ones past its rows."""
    rows = [v.num_embeddings for v in values.values() if isinstance(v, torch.nn.Embedding)]
    rows += [v.size(0) for v in values.values() if isinstance(v, torch.Tensor) and v.is_floating_point()
             and v.dim() == 2]
    hints = []
    for name, ids in values.items():
        if not isinstance(ids, torch.Tensor) or ids.is_floating_point() or not ids.numel():
            continue
        low, high = int(ids.min()), int(ids.max())
        if low < 0:
            hints.append(f"{name} holds a negative id ({low}): ids index the table's rows from 0")
        elif rows and high >= rows[0]:
            hints.append(f"{name} holds an id ({high}) past the end of the table ({rows[0]} rows, ids 0 to "
                         f"{rows[0] - 1})")
    return hints[:1] or ["an id is outside the table's rows (0 to its number of rows - 1)"]


def explain(error: BaseException, root: Path, packages: tuple[str, ...], axes: dict[str, int]) -> str | None:
    """What a student reads first when their code raised `error`, or None where it did not raise in their
    packages (or raised a TODO stub's NotImplementedError, which must stay as it is)."""
    if not isinstance(error, ERRORS) or str(error).startswith("TODO: "):
        return None
    entry = student_frame(error.__traceback__, root, packages)
    if entry is None:
        return None
    filename, line, source = failing_expression(entry)
    if source.startswith("raise"):  # their own (or the given code's) check, whose message says it already
        return None
    where = f"{Path(filename).resolve().relative_to(root).as_posix()}:{line}"
    try:
        node = ast.parse(source, mode="eval").body
    except SyntaxError:
        node = None
    values: dict[str, object] = {}
    described = []
    frame = entry.tb_frame
    scope = dict(frame.f_locals)
    for part in reversed([n for n in ast.walk(node) if n is not node] if node is not None else []):
        text = ast.unparse(part)  # innermost first: a module call's arguments are known before it
        if isinstance(part, ast.Constant) or text in values or not (is_pure(part) or still(part, values)):
            continue
        try:
            with torch.no_grad():
                values[text] = eval(compile(ast.Expression(part), "<operand>", "eval"), frame.f_globals,
                                    scope)
        except Exception:  # an operand that does not evaluate is just not described
            continue
    for part in operands(node) if node is not None else []:
        text = ast.unparse(part)
        words = describe(values.get(text), axes) if text in values else None
        if words and text != words:
            described.append(f"{text} is {words}")
    kind = {IndexError: "an index error", TypeError: "a type error"}.get(type(error), "it raised")
    if isinstance(error, NotImplementedError) or any(word in str(error) for word in ("dtype", "scalar type",
                                                                                     "overflow")):
        kind = "a dtype error"
    elif "device" in str(error):
        kind = "a device error"
    elif "view size is not compatible" in str(error):
        kind = "a memory-layout error (the shapes are compatible)"
    elif "size" in str(error) or "shape" in str(error) or "dimension" in str(error):
        kind = "a shape error"
    said = "; ".join(described) or "its operands could not be shown"
    hint = hints(node, source, values, error, axes) if node is not None else []
    shown = " ".join(described)
    legend = ", ".join(f"{name}={size}" for name, size in axes.items() if re.search(rf"\b{name}\b", shown))
    return (f"{where}, `{source}`: {kind} ({type(error).__name__}): {said}"
            + "".join(f"; {h}" for h in hint) + (f" (axes: {legend})" if legend else ""))
