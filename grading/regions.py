"""Solution regions: find `# BEGIN SOLUTION` / `# END SOLUTION` pairs and replace them with stubs.

A region is a run of lines inside one function, between a line that is exactly `# BEGIN SOLUTION` and
one that is exactly `# END SOLUTION` (surrounding whitespace aside). The stub keeps the BEGIN line's
indentation:

    raise NotImplementedError("TODO: minbert/attention.py::eager_attention")

An edition (config.py EDITIONS) stubs only its components' regions; the others lose their two marker
lines and keep their code.

Errors name the file and line: unbalanced or nested markers, marker text that is not alone on its line,
and regions outside a function.

Read next: handout.py.
"""

from __future__ import annotations

import ast
import re
import threading
from collections.abc import Collection
from dataclasses import dataclass

BEGIN, END = "# BEGIN SOLUTION", "# END SOLUTION"
_MARKER_TEXT = re.compile(r"(BEGIN|END) SOLUTION")


class RegionError(ValueError):
    """A malformed solution region; the message names the file and line."""


@dataclass(frozen=True)
class Region:
    path: str  # relative to the repository root, with forward slashes
    begin: int  # 1-based line numbers of the two markers
    end: int
    indent: str
    function: str  # qualified name of the enclosing function

    @property
    def todo(self) -> str:
        return f"{self.path}::{self.function}"


def find_regions(text: str, path: str) -> list[Region]:
    """The regions of one file, checked: balanced, not nested, each inside a function."""
    spans: list[tuple[int, int, str]] = []
    open_at: int | None = None
    indent = ""
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped == BEGIN:
            if open_at is not None:
                raise RegionError(f"{path}:{number}: nested {BEGIN} (the region opened at line {open_at} "
                                  f"is not closed)")
            open_at, indent = number, line[: len(line) - len(line.lstrip())]
        elif stripped == END:
            if open_at is None:
                raise RegionError(f"{path}:{number}: {END} without a {BEGIN} before it")
            spans.append((open_at, number, indent))
            open_at = None
        elif _MARKER_TEXT.search(line) and stripped.startswith("#"):
            raise RegionError(f"{path}:{number}: malformed solution marker {stripped!r}; a marker is the "
                              f"line {BEGIN!r} or {END!r} alone")
    if open_at is not None:
        raise RegionError(f"{path}:{open_at}: {BEGIN} is never closed (no {END} before the end of the file)")
    if not spans:
        return []
    functions = _functions(text, path)
    regions = []
    for begin, end, indent in spans:
        enclosing = [(start, stop, name) for start, stop, name in functions if start < begin <= stop]
        if not enclosing:
            raise RegionError(f"{path}:{begin}: solution region is not inside a function; a stub must be a "
                              "function body")
        name = max(enclosing, key=lambda f: f[0])[2]  # the innermost function
        regions.append(Region(path, begin, end, indent, name))
    return regions


# CPython 3.11's ast.parse is not safe in two threads at once ("AST constructor recursion depth mismatch"),
# and gradings run in threads (the reference's run beside the child; the suite's equivalents in a pool).
PARSING = threading.Lock()


def _functions(text: str, path: str) -> list[tuple[int, int, str]]:
    """(first line, last line, qualified name) of every function in the file."""
    try:
        with PARSING:
            tree = ast.parse(text, filename=path)
    except SyntaxError as error:
        raise RegionError(f"{path}:{error.lineno}: cannot parse the file ({error.msg})") from None
    found: list[tuple[int, int, str]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found.append((child.lineno, child.end_lineno, prefix + child.name))
                visit(child, prefix + child.name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    return found


def strip_regions(text: str, path: str, todos: Collection[str] | None = None) -> tuple[str, list[Region]]:
    """The file with every region whose TODO is in `todos` (all of them when None) replaced by its stub,
    and the other regions' two marker lines dropped (their code stays, as working reference code).

    Returns the new text and the regions that became stubs.
    """
    regions = find_regions(text, path)
    if not regions:
        return text, []
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    stubbed: list[Region] = []
    position = 0
    for region in regions:
        out.extend(lines[position:region.begin - 1])
        if todos is None or region.todo in todos:
            out.append(f'{region.indent}raise NotImplementedError("TODO: {region.todo}")\n')
            stubbed.append(region)
        else:
            out.extend(lines[region.begin:region.end - 1])  # the code between the markers
        position = region.end
    out.extend(lines[position:])
    return "".join(out), stubbed


def has_marker(text: str) -> bool:
    return BEGIN in text or END in text
