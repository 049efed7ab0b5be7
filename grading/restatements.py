"""Restated expressions: the leak check's second half, for a region's maths inside code of another shape.

Token coverage (leaks.py) misses a region's maths restated inside code of another shape: one line of a
four-line region (label attention's `A_l = Q_l K^T / sqrt(D)`), or the same expression around another argument
(the classify job's `F.cross_entropy(model(...), labels.to(device))` beside the sentiment loss TODO's
`F.cross_entropy(logits, labels.to(device))`). So the check also compares expressions as syntax trees: names
and literals abstracted, API names (attributes, keyword arguments, called builtins) kept, as leaks.py's tokens
do. A region expression is restated where a shipped expression has its shape, allowing one sub-expression of
up to MAX_HOLE of it to differ, provided what must match is still MIN_NODES nodes (the hole counting as one)
and names MIN_API APIs, so generic shapes never count: `(x[0], x[-1])`, `any(a in b for a in c)`,
`(*).sum(dim=-1)`. Measured on the tree when this was written: at MIN_API = 1 two dozen unrelated matches (a
tuple of two subscripts, `q @ k.transpose(-1, -2)` in an analysis helper), and with a 3-node hole allowed in
an 8-node expression, `(u * v).sum(dim=-1)` matched three entropy sums; with the rules above it found the five
restatements a course reported and nothing else. A region's expression cut into statements (`target =
labels.to(device)`, then `F.cross_entropy(model(x), target)`) is compared too, with its single-assignment
locals written back as leaks.py's spread copies are (`leaks.inlined`). A restatement that is reviewed and fine
goes into ALLOWED with the reason.

Read next: handout.py (its check_leaks runs leaks.find_leaks and find_restated on every build).
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Collection, Iterator, Mapping

from grading.leaks import _BUILTINS, NAME, NUMBER, Restatement, _code, _stubbed, inlined
from grading.regions import Region, find_regions

MIN_NODES = 8  # AST nodes (contexts not counted) that must match, the hole counting as one
MIN_API = 2  # API names the matching part must hold
MAX_HOLE = 0.4  # share of the expression's nodes one differing sub-expression may take

# Reviewed restatements: (TODO, shipped file) -> why it may stay.
ALLOWED: dict[tuple[str, str], str] = {
    ("minbert/pooling.py::mean_pool", "tasks/data/wordpieces.py"):
        "word_vectors' number of pieces per word, clamped at 1 for a word the window cut (`counts = "
        "assign.sum(dim=-1)`, then `counts.clamp(min=1)`): a count of a mask kept off zero, found once the "
        "check wrote single-assignment names back; the masked sum and the mean over real tokens, which the "
        "TODO asks for, are not there (the pieces are mixed by a matrix product with an assignment matrix)",
}


def _nodes(node: ast.AST, memo: dict[int, tuple[ast.AST, int]] | None = None) -> int:
    """The nodes of a subtree, contexts not counted (memo: id -> (node, count), filled bottom-up)."""
    if memo is None:
        return sum(1 for n in ast.walk(node) if not isinstance(n, ast.expr_context))
    if id(node) not in memo:
        memo[id(node)] = node, 1 + sum(_nodes(child, memo) for child in ast.iter_child_nodes(node)
                                       if not isinstance(child, ast.expr_context))
    return memo[id(node)][1]


def _is_api(node: ast.AST, parent: ast.AST | None) -> bool:
    return (isinstance(node, (ast.Attribute, ast.keyword))
            or isinstance(node, ast.Name) and node.id in _BUILTINS and isinstance(parent, ast.Call)
            and parent.func is node)


def _shape(node: ast.AST, hole: ast.AST | None = None, parent: ast.AST | None = None,
           memo: dict[int, tuple[ast.AST, str, int]] | None = None,
           around_hole: frozenset[int] = frozenset()) -> tuple[str, int]:
    """(the expression's shape with `hole` as a wildcard, the API names outside the hole).

    memo (id -> (node, shape, APIs) without a hole) and around_hole (the ids of the hole's ancestors): a
    subtree that does not hold the hole has the shape it has without one, so only the path down to the hole
    is built again. Every expression is tried with every sub-expression as its hole, so without the memo
    the check is cubic in an expression's size (minutes on the handout rather than seconds)."""
    if node is hole:
        return "*", 0
    if memo is not None and id(node) not in around_hole and id(node) in memo:
        return memo[id(node)][1:]
    if isinstance(node, ast.Name):
        result = (node.id, 1) if _is_api(node, parent) else (NAME, 0)
    elif isinstance(node, ast.Constant):
        result = NUMBER, 0
    else:
        parts, apis = [type(node).__name__], int(_is_api(node, parent))
        for name, value in ast.iter_fields(node):
            if name in ("attr", "arg"):
                parts.append(f"{name}={value}")
            for child in value if isinstance(value, list) else [value]:
                if isinstance(child, ast.AST) and not isinstance(child, ast.expr_context):
                    text, found = _shape(child, hole, node, memo, around_hole)
                    parts.append(text)
                    apis += found
        result = "(" + " ".join(parts) + ")", apis
    if memo is not None and hole is None:
        memo[id(node)] = (node, *result)  # the node is kept so that its id is not reused
    return result


def _holes(expression: ast.expr) -> Iterator[tuple[ast.AST, frozenset[int]]]:
    """Each node under `expression`, in ast.walk's order, with the ids of the nodes above it."""
    above: dict[int, frozenset[int]] = {id(expression): frozenset([id(expression)])}
    for node in ast.walk(expression):
        for child in ast.iter_child_nodes(node):
            above[id(child)] = above[id(node)] | {id(child)}
        if node is not expression:
            yield node, above[id(node)]


def _expressions(tree: ast.AST, counts: dict[int, tuple[ast.AST, int]] | None = None) -> Iterator[ast.expr]:
    for node in ast.walk(tree):
        if (isinstance(node, ast.expr) and not isinstance(node, ast.expr_context)
                and _nodes(node, counts) >= MIN_NODES):
            yield node


def _shipped_trees(path: str, text: str, regions: list[Region]) -> Iterator[tuple[ast.AST, int, int | None]]:
    """(syntax tree, line offset, cell) of the shipped code of a file: a Python file with the stubbed
    regions cut out (each becomes one `pass`), a notebook's code cells, a Markdown page's code blocks."""
    if not path.endswith(".py"):
        for source, first_line, cell in _code(path, text):
            try:
                yield ast.parse(source), first_line - 1, cell
            except SyntaxError:
                continue
        return
    try:
        yield ast.parse(_stubbed(text, regions)), 0, None
    except SyntaxError:
        return


def find_restated(files: Mapping[str, str], todos: Collection[str] | None = None) -> list[Restatement]:
    """Shipped expressions that restate an expression of a stubbed region, one hole allowed (see above);
    ALLOWED pairs left out."""
    wanted: dict[str, tuple[Region, ast.expr]] = {}  # shape with a hole -> the region expression
    regions_of: dict[str, list[Region]] = {}
    # The node counts of the wanted shapes (a hole counting one): a shipped expression whose count with a
    # hole is none of them cannot match, so its shape is not built.
    sizes: set[int] = set()
    for path, text in sorted(files.items()):
        if not path.endswith(".py"):
            continue
        regions_of[path] = [r for r in find_regions(text, path) if todos is None or r.todo in todos]
        lines = text.splitlines()
        for region in regions_of[path]:
            try:
                tree = ast.parse(textwrap.dedent("\n".join(lines[region.begin:region.end - 1])))
            except SyntaxError:  # not whole statements: the token check still covers it
                continue
            memo: dict[int, tuple[ast.AST, str, int]] = {}
            counts: dict[int, tuple[ast.AST, int]] = {}
            for expression in _expressions(tree, counts):
                size = _nodes(expression, counts)
                for hole, around in [(None, frozenset())] + list(_holes(expression)):
                    hole_size = _nodes(hole, counts) if hole is not None else 0
                    if hole is not None and (not isinstance(hole, ast.expr) or hole_size > MAX_HOLE * size
                                             or size - hole_size + 1 < MIN_NODES):
                        continue
                    shape, apis = _shape(expression, hole, memo=memo, around_hole=around)
                    if apis >= MIN_API:
                        wanted.setdefault(shape, (region, expression))
                        sizes.add(size - hole_size + 1 if hole is not None else size)
    found: dict[tuple[str, str, int], Restatement] = {}
    for path, text in sorted(files.items()):
        for tree, offset, cell in _shipped_trees(path, text, regions_of.get(path, [])):
            # The code as written, then its statements with single-assignment locals written back
            # (leaks.inlined): a region's expression cut into two statements is one again there.
            counts: dict[int, tuple[ast.AST, int]] = {}
            written = list(_expressions(tree, counts))
            as_written = {ast.dump(e) for e in written}
            spread = [(e, line) for statement, line in inlined(tree) for e in _expressions(statement, counts)
                      if ast.dump(e) not in as_written]
            memo: dict[int, tuple[ast.AST, str, int]] = {}
            for expression, at in [(e, None) for e in written] + spread:
                size = _nodes(expression, counts)
                for hole, around in [(None, frozenset())] + [(n, a) for n, a in _holes(expression)
                                                             if isinstance(n, ast.expr)]:
                    if (size - _nodes(hole, counts) + 1 if hole is not None else size) not in sizes:
                        continue
                    match = wanted.get(_shape(expression, hole, memo=memo, around_hole=around)[0])
                    if match is None or (match[0].todo, path) in ALLOWED:
                        continue
                    line = (expression.lineno if at is None else at) + offset
                    # ast.walk meets the outermost expression of a line first: report that one.
                    found.setdefault((match[0].todo, path, line), Restatement(
                        match[0], ast.unparse(match[1]), path, line, cell, ast.unparse(expression)))
                    break
    return list(found.values())
