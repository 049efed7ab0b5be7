"""The graded tests as the grader's child runs them: the same files without what they expect.

A submission runs beside the tests that grade it and can read and call anything in them, so its copy holds
no expected value; the grader decides each check from what the child computed, against the reference's
run (tests/graded/graded_helpers.py). Every line stays where it was (a traceback points where the
student's own copy does). What goes, replaced by None:
- every argument of check_close, check_value and check_equal but the first (what the code computed; a
  check_that keeps both of its own, a property of what it computed and the message that quotes it);
- in any call, a keyword argument whose name begins with "expected" or "mistakes";
- the body of a function decorated @expectation.
Stored tensors (*.safetensors) keep only the keys that their metadata's "inputs" lists.

Read next: grade.py.
"""

from __future__ import annotations

import ast
from pathlib import Path

from safetensors import safe_open
from safetensors.torch import save_file

from grading.regions import PARSING

CHECKS = frozenset({"check_close", "check_value", "check_equal"})
KEYWORDS = ("expected", "mistakes")


def _name(node: ast.AST) -> str:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""


def _cuts(tree: ast.AST) -> list[tuple[ast.AST, str]]:
    """(node, replacement) for what the child's copy leaves out, outermost first."""
    cuts = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _name(node.func) in CHECKS:
            cuts += [(a.value, "()") if isinstance(a, ast.Starred) else (a, "None") for a in node.args[1:]]
            cuts += [(k.value, "None" if k.arg else "{}") for k in node.keywords]  # **{} for **options
        elif isinstance(node, ast.Call):
            cuts += [(k.value, "None") for k in node.keywords if k.arg and k.arg.startswith(KEYWORDS)]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                _name(d) == "expectation" for d in node.decorator_list):
            cuts.append((node.body, "return None"))
    return cuts


def strip_source(text: str) -> str:
    """`text` (a graded test file) without its expectations, line for line."""
    lines = [line.encode("utf-8") for line in text.splitlines(keepends=True)]  # ast columns count bytes
    spans: list[tuple[tuple[int, int], tuple[int, int], str]] = []
    with PARSING:  # regions.py: one parse at a time
        tree = ast.parse(text)
    for node, replacement in _cuts(tree):
        first, last = (node[0], node[-1]) if isinstance(node, list) else (node, node)
        start, end = (first.lineno, first.col_offset), (last.end_lineno, last.end_col_offset)
        if not any(a <= start and end <= b for a, b, _ in spans):  # inside a cut already made
            spans.append((start, end, replacement))
    for (line, col), (end_line, end_col), replacement in sorted(spans, reverse=True):
        head, tail = lines[line - 1][:col], lines[end_line - 1][end_col:]
        # the line count stays: newlines inside brackets, or blank lines after a body's `return None`
        lines[line - 1:end_line] = [head + replacement.encode() + b"\n" * (end_line - line) + tail]
    return b"".join(lines).decode("utf-8")


def strip_tensors(source: Path, target: Path) -> None:
    """Copy a stored-tensors file keeping only the keys its metadata names as inputs."""
    with safe_open(str(source), "pt") as stored:
        metadata = stored.metadata() or {}
        if "inputs" not in metadata:
            raise RuntimeError(f"{source.name}: stored tensors of a graded test must say which keys are "
                               "inputs (metadata 'inputs'; tests/graded/hidden/make_references.py)")
        inputs = [key for key in metadata["inputs"].split(",") if key in stored.keys()]
        save_file({key: stored.get_tensor(key) for key in inputs}, str(target), metadata=metadata)
    target.chmod(0o644)  # safetensors writes 0600; the child's user reads it
