"""What the handout ships: the files an edition needs, computed from the code.

    python -m grading.handout --list [--edition full]   list them (handout.py), with the jobs and notebooks

The Python files are an import closure (every `import` and `from ... import` of the project's own
packages, at any depth in a file, each package's `__init__.py` on the way, and module names written as
strings: `importlib.import_module("minbert.x")`, a lazy `__init__`'s table, `[python, "-m", "tasks.x"]`) of
    - the files holding the edition's TODOs (config.py COMPONENTS, EDITIONS),
    - the edition's shipped graded tests, with the conftest.py files above them,
    - the main job (MAIN_JOB), and each other job (a module with `if __name__ == "__main__":`) that reaches
      a TODO of the edition that no job before it reaches (the main job first, then the others in name
      order; one job that runs a TODO is enough): what a job reaches is followed by name from
      the top-level code of the files it imports (its own `if __name__` block included) through their
      definitions,
    - each notebook whose imports, and the jobs its code names, all lie in that set.
Beside the Python files: the repository's top-level files (Makefile, setup.cfg, pyproject.toml,
.gitignore), each file or folder that a shipped module names by a relative path written as strings
(`Path(__file__).parent / "reference" / "model.safetensors"`, `... / "data" / "sample"`), and each
document that a shipped notebook or document links to. handout.py leaves out of this what config.py
excludes (the hidden tests, the fast paths, the staff pages) and checks that no shipped document
names a file left out.

Read next: handout.py.
"""

from __future__ import annotations

import ast
import functools
import json
import posixpath
import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from grading.config import HANDOUT_KEEP_FILES, SUBMITTED_PACKAGES, edition_todos

MAIN_JOB = "tasks/multitask.py"  # `make run`; it always ships
OWN_PACKAGES = SUBMITTED_PACKAGES + ("tests",)  # the packages whose imports the closure follows
_MODULE = re.compile(r"\.{0,3}[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*$")
_DASH_M = re.compile(r"-m\s+([A-Za-z_][\w.]*)")
_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)")


@dataclass
class Contents:
    """An edition's shipped files and why: the closure's roots, the jobs and notebooks it ships."""
    files: set[str] = field(default_factory=set)
    jobs: list[str] = field(default_factory=list)  # module names, the main job first
    notebooks: list[str] = field(default_factory=list)
    left_out_notebooks: dict[str, str] = field(default_factory=dict)  # notebook -> why


# ----- one Python file's imports -----------------------------------------------------------------


@functools.lru_cache(maxsize=1024)
def _parse(text: str, relative: str) -> ast.Module:
    return ast.parse(text, relative)


def module_file(name: str, files: set[str]) -> str | None:
    """The repository file of a dotted module name: a/b.py or a/b/__init__.py."""
    path = name.replace(".", "/")
    for candidate in (f"{path}.py", f"{path}/__init__.py"):
        if candidate in files:
            return candidate
    return None


def _package_of(relative: str) -> str:
    """The dotted package a file lies in (its folder)."""
    return posixpath.dirname(relative).replace("/", ".")


def _resolve(name: str, relative: str, level: int = 0) -> str:
    """An import's absolute dotted name, for `from .x import` (level 1), `from .. import` and so on."""
    if not level:
        return name
    base = _package_of(relative).split(".")
    base = base[:len(base) - (level - 1)] if level > 1 else base
    return ".".join(part for part in (*base, name) if part)


def _with_packages(name: str, files: set[str], folder: str = "") -> set[str]:
    """The files `import name` runs: each package's __init__.py on the way and the module itself. A name
    outside the project's packages is looked up beside the importing file and in the folders above it
    (pytest puts a test's folder on sys.path; tests/graded/conftest.py does too)."""
    parts = name.split(".")
    if parts[0] in OWN_PACKAGES:
        prefixes = [""]
    else:
        here = PurePosixPath(folder)
        prefixes = [f"{p}." for p in (here, *here.parents) if str(p) != "."] if folder else []
        prefixes = [p.replace("/", ".") for p in prefixes]
    for prefix in prefixes:
        chain = [module_file(prefix + ".".join(parts[:n]), files) for n in range(1, len(parts) + 1)]
        if chain[-1]:
            return {f for f in chain if f}
    return set()


def imports(relative: str, text: str, files: set[str]) -> set[str]:
    """The repository files that importing `relative` (a Python file with source `text`) may run: its
    imports at any depth, package __init__s included, and module names written as strings."""
    tree = _parse(text, relative)
    folder = posixpath.dirname(relative)
    is_init = relative.endswith("/__init__.py")
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found |= _with_packages(alias.name, files, folder)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(node.module or "", relative, node.level)
            if base:
                found |= _with_packages(base, files, folder)
            for alias in node.names:  # `from pkg import module`
                found |= _with_packages(f"{base}.{alias.name}" if base else alias.name, files, folder)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            found |= _named_modules(node.value, relative, files, is_init)
    found.discard(relative)
    return {f for f in found if f in files}


def _named_modules(value: str, relative: str, files: set[str], is_init: bool) -> set[str]:
    """The module a string names, as a whole: a dotted name of the project's ("minbert.hub", or ".hub" and,
    in a package's __init__, a bare submodule "hub", as a lazy __init__'s table holds them)."""
    names = []
    value = value.strip()
    if _MODULE.match(value):
        level = len(value) - len(value.lstrip("."))
        if level:
            names.append(_resolve(value.lstrip("."), relative, level))
        elif "." in value and value.split(".")[0] in OWN_PACKAGES:
            names.append(value)
        elif is_init:
            names.append(_resolve(value, relative, 1))
    found: set[str] = set()
    for name in names:
        if name.split(".")[0] in OWN_PACKAGES and module_file(name, files):
            found |= _with_packages(name, files)
    return found


def closure(roots, files: set[str], sources: dict[str, str], memo: dict | None = None) -> set[str]:
    """`roots` and every Python file they import, transitively (sources: path -> text; memo: each file's
    imports, kept between calls)."""
    memo = {} if memo is None else memo
    done: set[str] = set()
    todo = [r for r in roots if r in sources]
    while todo:
        relative = todo.pop()
        if relative in done:
            continue
        done.add(relative)
        if relative not in memo:
            memo[relative] = imports(relative, sources[relative], files)
        todo += memo[relative] - done
    return done


# ----- which jobs reach a TODO -------------------------------------------------------------------


def is_job(text: str) -> bool:
    """A module run with `python -m`: it has an `if __name__ == "__main__":` block."""
    return bool(re.search(r"^if __name__ == [\"']__main__[\"']:", text, re.M))


def _names(node: ast.AST) -> set[str]:
    """The names a piece of code uses: variables, attributes and what it imports."""
    used = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            used.add(n.id)
        elif isinstance(n, ast.Attribute):
            used.add(n.attr)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            used.update((a.asname or a.name).split(".")[0] for a in n.names)
            used.update(a.name.split(".")[-1] for a in n.names)
    return used


@functools.lru_cache(maxsize=1024)
def _outline(text: str, relative: str) -> tuple[tuple[tuple[str, frozenset[str]], ...], frozenset[str]]:
    """A file's top-level definitions with the names each uses, and the names its other top-level code
    uses."""
    definitions, used = [], set()
    for node in _parse(text, relative).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            definitions.append((node.name, frozenset(_names(node))))
        else:
            used |= _names(node)
    return tuple(definitions), frozenset(used)


def reached(modules: set[str], sources: dict[str, str]) -> set[str]:
    """The top-level definitions (`file::name`) of `modules` (a job's import closure) that the job may run:
    from the top-level code of each module (the job's `if __name__` block included), each name used leads
    to every definition of that name (by name, not by type: it errs on the side of shipping)."""
    definitions: dict[str, list[tuple[str, frozenset[str]]]] = {}
    used: set[str] = set()
    for relative in modules:
        defined, top = _outline(sources[relative], relative)
        used |= top
        for name, names in defined:
            definitions.setdefault(name, []).append((relative, names))
    seen: set[str] = set()
    todo = list(used)
    while todo:
        name = todo.pop()
        for relative, names in definitions.get(name, ()):
            key = f"{relative}::{name}"
            if key not in seen:
                seen.add(key)
                todo += names - used
                used |= names
    return seen


def _todo_key(todo: str) -> str:
    """'minbert/layer.py::AddNorm.forward' -> 'minbert/layer.py::AddNorm' (its top-level definition)."""
    path, name = todo.split("::")
    return f"{path}::{name.split('.')[0]}"


# ----- files named by path -------------------------------------------------------------------------


@functools.lru_cache(maxsize=1024)
def _path_strings(text: str, relative: str) -> frozenset[str]:
    """Relative paths a module builds from strings: `x / "data" / "sample"` gives data/sample, and a
    string such as "reference/model.safetensors" or "model.safetensors" itself."""
    found = set()
    for node in ast.walk(_parse(text, relative)):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            parts, cur = [], node
            while isinstance(cur, ast.BinOp) and isinstance(cur.op, ast.Div) \
                    and isinstance(cur.right, ast.Constant) and isinstance(cur.right.value, str):
                parts.insert(0, cur.right.value)
                cur = cur.left
            if len(parts) > 1:
                found.add("/".join(parts))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and re.fullmatch(
                r"[\w.-]+(?:/[\w.-]+)*\.\w+|[\w.-]+(?:/[\w.-]+)+", node.value):
            found.add(node.value)
    return frozenset(found)


def named_files(sources: dict[str, str], python: set[str], files: set[str]) -> set[str]:
    """The repository's other files that the modules in `python` name by a relative path: a file whose path
    ends with one of theirs, or (two parts or more) every file of a folder whose path ends with it (a
    Python file there too, such as the script that made the data)."""
    others = [f for f in files if f not in python]
    found = set()
    for relative in python:
        for path in _path_strings(sources[relative], relative):
            for f in others:
                if f == path or f.endswith("/" + path) or ("/" in path and (
                        f.startswith(path + "/") or f"/{path}/" in f)):
                    found.add(f)
    return found


def linked_documents(start: set[str], files: set[str], read) -> set[str]:
    """The documents (and figures) that the Markdown and notebooks of `start` link to, transitively."""
    found, todo = set(), [f for f in start if f.endswith((".md", ".ipynb"))]
    while todo:
        relative = todo.pop()
        for target in _LINK.findall(read(relative)):
            if re.match(r"#|[a-zA-Z][\w+.-]*:", target):
                continue
            path = posixpath.normpath(posixpath.join(posixpath.dirname(relative), target.split("#")[0]))
            if path in files and path not in found and path not in start:
                found.add(path)
                if path.endswith((".md", ".ipynb")):
                    todo.append(path)
    return found


# ----- notebooks -------------------------------------------------------------------------------


def notebook_code(text: str) -> str:
    """A notebook's code cells as one Python text (magics and shell lines become comments)."""
    cells = json.loads(text).get("cells", [])
    lines = []
    for cell in cells:
        if cell.get("cell_type") == "code":
            source = "".join(cell.get("source", []))
            lines += [("# " + line) if line.lstrip().startswith(("%", "!")) else line
                      for line in source.splitlines()]
    return "\n".join(lines)


def notebook_needs(relative: str, text: str, files: set[str]) -> set[str] | None:
    """The project's Python files a notebook imports, and the jobs its code names (`python -m X`); None
    when its code does not parse (then what it needs cannot be told)."""
    code = notebook_code(text)
    try:
        found = imports(relative.removesuffix(".ipynb") + ".py", code, files)
    except SyntaxError:
        return None
    for name in _DASH_M.findall(code):
        if name.split(".")[0] in OWN_PACKAGES:
            found.add(module_file(name, files) or f"{name.replace('.', '/')}.py")
    return found


# ----- the edition's contents ------------------------------------------------------------------------


def contents(edition: str, files: list[str], read, shipped_tests: list[str], candidate) -> Contents:
    """What `edition` ships out of the repository's `files`.

    read: path -> text. shipped_tests: the edition's graded test files the handout ships.
    candidate: path -> whether config.py's exclusions allow the file at all (the hidden tests, the
    grader, the fast paths and the staff pages never ship)."""
    allowed = {f for f in files if candidate(f)}
    python = {f for f in allowed if f.endswith(".py")}
    sources = {f: read(f) for f in python}
    todos = edition_todos(edition)
    todo_files = {t.split("::")[0] for t in todos}
    conftests = {f for f in python if f.endswith("/conftest.py")
                 and any(t.startswith(posixpath.dirname(f) + "/") for t in shipped_tests)}
    # HANDOUT_KEEP_FILES: tools students run themselves (the prediction-file check), imported by nothing
    roots = todo_files | set(shipped_tests) | conftests | {MAIN_JOB} | (set(HANDOUT_KEEP_FILES) & python)
    jobs = {f for f in python if is_job(sources[f]) and f.split("/")[0] in SUBMITTED_PACKAGES}
    memo: dict[str, set[str]] = {}
    main_reaches = reached(closure([MAIN_JOB], python, sources, memo), sources)
    todo_keys = {_todo_key(t) for t in todos}
    result = Contents(jobs=[MAIN_JOB] if MAIN_JOB in python else [])
    covered = main_reaches & todo_keys  # the TODOs a shipped job already runs
    for job in sorted(jobs - {MAIN_JOB}):
        uses = reached(closure([job], python, sources, memo), sources) & todo_keys
        if uses - covered:  # one job per TODO is enough to run it (pre-training, not tagging, for the LM loss)
            roots.add(job)
            result.jobs.append(job)
            covered |= uses
    shipped = closure(roots, python, sources, memo)
    data = named_files(sources, shipped, allowed)
    while data & python - shipped:  # a named folder's scripts, and what they import
        shipped = closure(shipped | data, python, sources, memo)
        data = named_files(sources, shipped, allowed)
    for notebook in sorted(f for f in allowed if f.endswith(".ipynb")):
        needs = notebook_needs(notebook, read(notebook), python)
        missing = ["(its code does not parse)"] if needs is None else sorted(needs - shipped)
        if missing:
            result.left_out_notebooks[notebook] = "needs " + ", ".join(missing)
        else:
            result.notebooks.append(notebook)
    top_level = {f for f in allowed if "/" not in f}
    documents = linked_documents(set(result.notebooks) | {f for f in data if f.endswith(".md")}, allowed,
                                 read)
    result.jobs += sorted(jobs & shipped - set(result.jobs))  # imported by what ships: it runs too
    result.files = shipped | set(result.notebooks) | top_level | data | documents
    result.jobs = [j.removesuffix(".py").replace("/", ".") for j in result.jobs]
    return result
