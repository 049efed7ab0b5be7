"""Leak check: no file of the handout may restate a solution region, even renamed or reformatted.

Stubbing a region is pointless if the same code ships elsewhere: a complete attention in a variant's
module, a fast path beside the readable TODO, a graded test computing its expectation the same way. This
module finds such copies the way a duplicate-code finder does (JPlag, MOSS): it compares token
sequences, not text, in every Python file, notebook code cell and Markdown code block that ships.

Normalisation (`tokens`). Python's `tokenize` splits the code; comments, newlines, indentation and
whitespace are dropped, so layout, line breaks and comments do not matter. Numbers become one
placeholder and strings (docstrings and f-strings included) another. Names are where the choice is:

- abstracted to one placeholder: every name a copy can rename without changing what the code does:
  local variables, parameters, `self`, module aliases (`F`, `np`, the `torch` of `torch.cat`) and
  functions called through a variable (`layer(...)`);
- kept as written: keywords (`for`, `return`, `None`), attribute and method names after a `.`
  (`.softmax`, `.masked_fill`, `.attention.self`), keyword-argument names (`dim=`, `out=`) and called
  builtins (`len(`, `enumerate(`), that is the API the code uses, which a copy keeps.

Keeping the API names is what keeps unrelated code from matching. Measured on the tree as it stood
when this check was written (the thresholds below): with every name abstracted, `BertLayer.forward`
reads `N, N = N.N.N(N, N, N)  N = N.N.N(N, N) ...` and six unrelated functions cover 60-81% of it (a
metrics loop, the MLM head, a pretraining step, a graded test's setup); with API names kept, the closest
unrelated code covers 46% of any region (an encoder's `if N: N.append(N)` bookkeeping matched by a
study script), and the four copies that were there covered 64-91%. A copy that renames its variables,
re-wraps its lines, changes its comments or aliases its imports matches token for token; one that also
swaps a call for an equivalent (`torch.sqrt(x)` for `x.sqrt()`) loses a few tokens around the change,
which the coverage rule tolerates. Semantic rewrites (the same update as `torch._foreach_*` calls over
lists, a loop turned into one vectorised expression) are not clones and are not found: review those by
eye.

Matching (`_covered`). Every run of K consecutive tokens of a region (the whole region when shorter) is
looked up in every shipped stream. The region's own file is searched too, with its regions cut out (each
leaves a barrier no run crosses), so a neighbouring fast path that restates it is found. Shared runs on
one diagonal join into common substrings, and within each stretch of target code at most twice the
region's length these are laid as tiles, longest first, each region token and each target token used
once (greedy string tiling, as JPlag does, with K as the shortest tile). A copy is the stretch whose
tiles cover the most region tokens; it is a leak when they cover at least MIN_COVERAGE of the region and
at least MIN_TOKENS tokens. Coverage rather than one contiguous match, so that a copy with an operator
changed or a line inserted still counts: a differing token inside a region costs only itself (one near
an end costs up to K). Each token used once, so that a region repeating a phrase (`if N: N.append(N)`
twice) is not covered twice by one occurrence. On the tree, K = 8 is the shortest run unrelated code
did not share by chance (at 5 or 6 a prediction head's `self.LayerNorm(...self.dense(x))` covers 68% of
`AddNorm.forward`), and at 10 a copied masking loop with one line inserted falls to 49%. 60% catches a
two-line region whose main line is copied alone (the masked mean without its mask line covers 64%).
MIN_TOKENS keeps a short region from being matched by a generic line: a region shorter than it leaks
only whole. The best place per file is reported; fix it and run again to see the next.

Spread copies (`inlined`). A region's one expression may ship cut into statements: `x = self.dropout(h)`
then `return self.linear(x)` elsewhere, against a region `return self.linear(self.dropout(h))`. Token
runs miss it (the two halves sit in another order, a name between them), so each shipped scope (a
function, a module, a notebook cell) is searched a second time with its single-assignment locals written
back into the statements that read them: a name assigned exactly once in its scope, by a plain
`name = value` and nowhere else (not a parameter, a loop variable or an augmented assignment), is replaced
by its value in every later statement, through chains of such names one level, two, up to INLINE_DEPTH
(each depth is a version of its own: the copy may stop at any link of the chain). Each version that
changed is unparsed and tokenized on its own (a barrier between two) and searched like any shipped
stream, reported at the line of the statement that reads the names. A name assigned twice
(`h = f(h)`) is left alone: which value a reader sees depends on the path taken.

Restated expressions, which token coverage misses, are restatements.py's.

Read next: restatements.py.
"""

from __future__ import annotations

import ast
import builtins
import copy
import io
import json
import keyword
import re
import textwrap
import tokenize
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field

from grading.regions import Region, find_regions

K = 8  # tokens per run looked up; the shortest tile that counts
MIN_COVERAGE = 0.6  # share of a region's tokens a copy must cover to be a leak
MIN_TOKENS = 12  # and at least this many tokens (a shorter region leaks only whole)
INLINE_DEPTH = 3  # how many single-assignment names deep a spread copy is written back together

NAME, NUMBER, STRING, BARRIER = "<name>", "<number>", "<string>", "<stub>"  # never a Python token
_BUILTINS = frozenset(dir(builtins))
_SKIPPED = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
            tokenize.ENCODING, tokenize.ENDMARKER, tokenize.ERRORTOKEN}
_FSTRING_START = getattr(tokenize, "FSTRING_START", None)  # Python 3.12 splits f-strings into tokens
_FSTRING_END = getattr(tokenize, "FSTRING_END", None)
_FENCE = re.compile(r"^\s*(```|~~~)\s*([\w+-]*)")
_PYTHON_FENCES = ("", "python", "py", "python3", "pycon")


@dataclass(frozen=True)
class Leak:
    """A shipped place whose code covers most of a solution region."""

    region: Region
    path: str  # the leaking file, relative to the repository root
    first_line: int  # its lines in the reference file (in a notebook, in the cell)
    last_line: int
    cell: int | None  # the notebook cell (0-based), None for other files
    covered: int  # tokens of the region the copy covers
    size: int  # tokens of the region

    @property
    def where(self) -> str:
        cell = f" cell {self.cell}" if self.cell is not None else ""
        return f"{self.path}{cell}:{self.first_line}-{self.last_line}"

    def __str__(self) -> str:
        return (f"{self.region.todo} (lines {self.region.begin}-{self.region.end}) is restated at "
                f"{self.where} ({self.covered} of the region's {self.size} tokens, "
                f"{self.covered / self.size:.0%})")


@dataclass(frozen=True)
class Restatement:
    """A shipped expression with the shape of an expression of a solution region."""

    region: Region
    expression: str  # the region's, as code
    path: str
    line: int  # in the reference file (in a notebook, in the cell)
    cell: int | None
    code: str  # the shipped expression

    def __str__(self) -> str:
        cell = f" cell {self.cell}" if self.cell is not None else ""
        return (f"{self.region.todo} (lines {self.region.begin}-{self.region.end}): `{self.expression}` is "
                f"restated at {self.path}{cell}:{self.line} as `{self.code}`")


@dataclass
class LeakReport:
    regions: int
    files: int
    leaks: list[Leak] = field(default_factory=list)
    restated: list[Restatement] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.leaks and not self.restated

    def summary(self) -> str:
        head = f"leak check: {self.regions} regions against {self.files} files"
        if self.clean:
            return f"{head}: no leaks"
        found = [str(leak) for leak in self.leaks] + [str(r) for r in self.restated]
        return f"{head}: {len(found)} leaks\n" + "\n".join(f"  {line}" for line in found)


@dataclass
class _Stream:
    path: str
    cell: int | None
    kinds: list[str] = field(default_factory=list)  # normalised tokens
    lines: list[int] = field(default_factory=list)  # the line of each


def tokens(source: str, first_line: int = 1) -> tuple[list[str], list[int]]:
    """The normalised tokens of Python source and their lines (see the module docstring).

    Source that does not tokenize as a whole (a fragment in a Markdown page) is tokenized line by line,
    dropping the lines that fail.
    """
    raw = _raw(source)
    if raw is not None:
        return _normalise(raw, first_line)
    kinds: list[str] = []
    lines: list[int] = []
    for number, line in enumerate(source.splitlines(), start=first_line):
        raw = _raw(line.strip() + "\n")
        if raw is not None:
            line_kinds, _ = _normalise(raw, number)
            kinds += line_kinds
            lines += [number] * len(line_kinds)
    return kinds, lines


def _raw(source: str) -> list[tokenize.TokenInfo] | None:
    try:
        return list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):  # IndentationError is a SyntaxError
        return None


def _normalise(raw: list[tokenize.TokenInfo], first_line: int) -> tuple[list[str], list[int]]:
    kept = [t for t in raw if t.type not in _SKIPPED]
    kinds: list[str] = []
    lines: list[int] = []
    depth = 0  # open brackets: inside them `dim=` is a keyword argument, outside `x =` an assignment
    fstring = 0
    for index, token in enumerate(kept):
        if _FSTRING_START is not None and token.type == _FSTRING_START:
            fstring += 1
            if fstring > 1:
                continue
            kind = STRING
        elif fstring:
            fstring -= token.type == _FSTRING_END
            continue
        elif token.type == tokenize.NAME:
            before = kept[index - 1].string if index else ""
            after = kept[index + 1].string if index + 1 < len(kept) else ""
            api = (keyword.iskeyword(token.string) or before == "." or (depth and after == "=")
                   or (token.string in _BUILTINS and after == "("))
            kind = token.string if api else NAME
        elif token.type == tokenize.NUMBER:
            kind = NUMBER
        elif token.type == tokenize.STRING:
            kind = STRING
        else:
            kind = token.string
            if kind in ("(", "[", "{"):
                depth += 1
            elif kind in (")", "]", "}") and depth:
                depth -= 1
        kinds.append(kind)
        lines.append(token.start[0] + first_line - 1)
    return kinds, lines


def _code(path: str, text: str) -> Iterator[tuple[str, int, int | None]]:
    """(source, its first line, notebook cell or None) of each piece of Python in a non-.py file."""
    if path.endswith(".ipynb"):
        try:
            cells = json.loads(text).get("cells", [])
        except (ValueError, AttributeError):
            return
        for number, cell in enumerate(cells):
            if isinstance(cell, dict) and cell.get("cell_type") == "code":
                source = cell.get("source", "")
                source = "".join(source) if isinstance(source, list) else str(source)
                # IPython magics and shell escapes are not Python; keep the line count.
                yield "\n".join("" if line.lstrip()[:1] in ("%", "!") else line
                                for line in source.splitlines()) + "\n", 1, number
    elif path.endswith(".md"):
        block: list[str] | None = None
        start = 0
        for number, line in enumerate(text.splitlines(), start=1):
            fence = _FENCE.match(line)
            if block is None and fence and fence.group(2).lower() in _PYTHON_FENCES:
                block, start = [], number + 1
            elif block is not None and fence:
                yield textwrap.dedent("\n".join(line[4:] if line.startswith((">>> ", "... ")) else line
                                                for line in block)) + "\n", start, None
                block = None
            elif block is not None:
                block.append(line)


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def _scope_nodes(scope: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a scope, not those of the functions and classes nested in it."""
    for child in ast.iter_child_nodes(scope):
        yield child
        if not isinstance(child, _SCOPES):
            yield from _scope_nodes(child)


class _Inline(ast.NodeTransformer):
    """Write single-assignment names back: Name -> a copy of its value, when assigned on an earlier line."""

    def __init__(self, values: dict[str, ast.Assign], line: int, depth: int) -> None:
        self.values, self.line, self.depth = values, line, depth  # depth: how many levels to write back

    def visit_Name(self, node: ast.Name) -> ast.AST:
        assign = self.values.get(node.id)
        if (assign is None or not isinstance(node.ctx, ast.Load) or assign.lineno >= self.line
                or not self.depth):
            return node
        inner = _Inline(self.values, assign.lineno, self.depth - 1)
        return inner.visit(copy.deepcopy(assign.value))

    def visit_Lambda(self, node: ast.Lambda) -> ast.AST:
        return node  # another scope: its names are its own


def inlined(tree: ast.AST) -> Iterator[tuple[ast.stmt, int]]:
    """(statement with its single-assignment locals written back, its line) for every simple statement of
    every scope of `tree` that reads such a local (see the module docstring)."""
    functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for scope in [tree] + functions:
        stores: dict[str, int] = {}
        assigns: dict[str, ast.Assign] = {}
        if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for arg in ast.walk(scope.args):
                if isinstance(arg, ast.arg):
                    stores[arg.arg] = stores.get(arg.arg, 0) + 1
        statements = []
        for node in _scope_nodes(scope):
            if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                stores[node.id] = stores.get(node.id, 0) + 1
            elif isinstance(node, (ast.Global, ast.Nonlocal)):
                stores.update({name: 2 for name in node.names})
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                stores[node.name] = stores.get(node.name, 0) + 1
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    name = (alias.asname or alias.name).split(".")[0]
                    stores[name] = stores.get(name, 0) + 1
            if (isinstance(node, ast.Assign) and len(node.targets) == 1
                    and isinstance(node.targets[0], ast.Name)):
                assigns[node.targets[0].id] = node
            if isinstance(node, ast.stmt) and not isinstance(node, (*_SCOPES, ast.If, ast.For, ast.AsyncFor,
                                                                     ast.While, ast.With, ast.AsyncWith,
                                                                     ast.Try)):
                statements.append(node)
        values = {name: assign for name, assign in assigns.items() if stores.get(name) == 1}
        if not values:
            continue
        for statement in statements:
            seen = {ast.dump(statement)}
            for depth in range(1, INLINE_DEPTH + 1):  # each depth: `a = f(b)` may be the copy, or `f(g(c))`
                inline = _Inline(values, statement.lineno, depth)
                changed = inline.visit(copy.deepcopy(statement))
                if ast.dump(changed) in seen:
                    break
                seen.add(ast.dump(changed))
                yield changed, statement.lineno


def _inlined_stream(path: str, source: str, first_line: int = 1, cell: int | None = None) -> _Stream:
    """A shipped piece of Python searched again with its single-assignment locals written back."""
    stream = _Stream(path, cell)
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return stream
    for statement, line in inlined(tree):
        try:
            kinds, _ = tokens(ast.unparse(statement))
        except (ValueError, RecursionError):
            continue
        stream.kinds += kinds + [BARRIER]
        stream.lines += [line + first_line - 1] * (len(kinds) + 1)
    return stream


def _stubbed(text: str, regions: list[Region]) -> str:
    """A Python file's text with each region replaced by `pass` (its lines kept, so line numbers hold)."""
    lines = text.splitlines()
    for region in regions:
        first = lines[region.begin - 1]
        indent = first[:len(first) - len(first.lstrip())]
        lines[region.begin - 1:region.end] = [f"{indent}pass"] + [""] * (region.end - region.begin)
    return "\n".join(lines) + "\n"


def _split(path: str, text: str, regions: list[Region]) -> tuple[_Stream, list[tuple[Region, _Stream]]]:
    """A Python file's shipped stream (each region replaced by a barrier) and each region's stream."""
    kinds, lines = tokens(text)
    shipped = _Stream(path, None)
    own = [(region, _Stream(path, None)) for region in regions]
    for kind, line in zip(kinds, lines):
        region_stream = next((s for region, s in own if region.begin <= line <= region.end), None)
        if region_stream is None:
            shipped.kinds.append(kind)
            shipped.lines.append(line)
            continue
        region_stream.kinds.append(kind)  # a marker is a comment: every token here is the solution's
        region_stream.lines.append(line)
        if not shipped.kinds or shipped.kinds[-1] != BARRIER:
            shipped.kinds.append(BARRIER)
            shipped.lines.append(line)
    return shipped, own


def _index(stream: _Stream, k: int) -> dict[tuple[str, ...], list[int]]:
    """Every run of k tokens of a stream -> where it starts."""
    index: dict[tuple[str, ...], list[int]] = {}
    for j in range(len(stream.kinds) - k + 1):
        index.setdefault(tuple(stream.kinds[j:j + k]), []).append(j)
    return index


def _covered(region: list[str], index: dict[tuple[str, ...], list[int]], k: int) -> tuple[int, int, int]:
    """(region tokens covered, first and last target token) of the best stretch of one stream."""
    # Runs of k shared tokens on one diagonal (target - region position) join into common substrings.
    hits = sorted((j - i, i) for i in range(len(region) - k + 1)
                  for j in index.get(tuple(region[i:i + k]), ()))
    substrings: list[tuple[int, int, int]] = []  # (target start, region start, length)
    for diagonal, i in hits:
        if substrings:
            j0, i0, length = substrings[-1]
            if j0 - i0 == diagonal and i0 + length - k + 1 == i:
                substrings[-1] = (j0, i0, length + 1)
                continue
        substrings.append((diagonal + i, i, k))
    substrings.sort()
    best = (0, 0, 0)
    stretch = 2 * len(region)
    for start, (begin, _, _) in enumerate(substrings):
        inside = []
        for substring in substrings[start:]:
            if substring[0] - begin >= stretch:
                break
            if substring[0] + substring[2] - begin <= stretch:
                inside.append(substring)
        used_region: set[int] = set()
        used_target: set[int] = set()
        last = begin
        for j0, i0, length in sorted(inside, key=lambda s: -s[2]):  # tiles, longest first
            free = [t for t in range(length) if i0 + t not in used_region and j0 + t not in used_target]
            if len(free) >= k:
                used_region.update(i0 + t for t in free)
                used_target.update(j0 + t for t in free)
                last = max(last, j0 + length - 1)
        if len(used_region) > best[0]:
            best = (len(used_region), min(used_target), last)
    return best


def find_leaks(files: Mapping[str, str], todos: Collection[str] | None = None) -> LeakReport:
    """Check the shipped files, given as path -> reference text (regions still in), for copies of the
    regions; .py files are read whole, notebooks by code cell, Markdown by code block, others not.

    todos: the TODOs that become stubs (an edition's; all regions when None). A region not among them
    ships as reference code, so its code is searched like any other shipped code.
    """
    streams: list[_Stream] = []
    todo: list[tuple[Region, _Stream]] = []
    for path, text in sorted(files.items()):
        if path.endswith(".py"):
            regions = [r for r in find_regions(text, path) if todos is None or r.todo in todos]
            shipped, own = _split(path, text, regions)
            streams += [shipped, _inlined_stream(path, _stubbed(text, regions))]
            todo += own
        else:
            for source, first_line, cell in _code(path, text):
                streams += [_Stream(path, cell, *tokens(source, first_line)),
                            _inlined_stream(path, source, first_line, cell)]
    report = LeakReport(regions=len(todo), files=len({s.path for s in streams}))
    indexes: dict[tuple[int, int], dict[tuple[str, ...], list[int]]] = {}
    for region, stream in todo:
        size = len(stream.kinds)
        k = min(K, size)
        if not size:
            continue
        for number, target in enumerate(streams):
            if (number, k) not in indexes:
                indexes[(number, k)] = _index(target, k)
            covered, first, last = _covered(stream.kinds, indexes[(number, k)], k)
            if covered >= min(MIN_TOKENS, size) and covered >= MIN_COVERAGE * size:
                leak = Leak(region, target.path, target.lines[first], target.lines[last], target.cell,
                            covered, size)
                # A file's code and its written-back statements are two streams: report one place.
                if report.leaks and (report.leaks[-1].region, report.leaks[-1].path,
                                     report.leaks[-1].cell) == (region, target.path, target.cell):
                    if covered > report.leaks[-1].covered:
                        report.leaks[-1] = leak
                    continue
                report.leaks.append(leak)
    return report
