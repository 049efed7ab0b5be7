"""The paste check: no TODO's points may be earned by a body that only calls a function the handout ships.

    python -m grading.paste                      the default edition; exit status 1 on a finding
    python -m grading.paste --edition full
    python -m grading.paste --todo minbert/attention.py::eager_attention   some TODOs only

The leak check (leaks.py) finds copies of a solution; it cannot see a shipped function that computes a
TODO's answer in other words, such as a test helper with the TODO's signature or a variant that reduces to
it. This check tries the paste: for each TODO of the edition, the body `return CANDIDATE(<its arguments>)`
is graded on the TODO's own graded tests (visible and hidden), once per candidate.

Candidates of a TODO: every function defined at the top level of a Python file the handout ships (the
lesson, the graded test files and helpers of the edition) or installs (its wheel's), and, for a method
TODO, the undecorated methods of its class, called on `self`. A function is tried with the TODO's
arguments after `self` and, for a method TODO, with `self` first too. A candidate must take them: as many
of the TODO's positional arguments, in order, as it has positional parameters (at least one, the TODO's
required ones and its own required ones), and the TODO's keyword-only arguments by name. Left out: the
edition's TODOs (stubs in the handout), entry points (`main` runs a job), test functions, fixtures, dunder
methods, and torch's own functions (not shipped code). Where both the TODO's parameter and the
candidate's are annotated, the annotations must admit a common type (`torch.Tensor` and `Tensor | None`
do, `Tensor` and `int` do not; array-likes count as one, numbers as one): a candidate that cannot take the
argument can earn nothing, and this cuts the candidates 13-fold (4,594 to 353 in the default edition).

How: a staging tree holds the handout's files and the hidden tests; each region of the edition asks
paste_runtime.py, loaded as a pytest plugin in one child process, what to be: the stub, the reference solution
(the TODO being checked with no candidate, and the TODOs it needs first: documents.py NEEDS), or the paste.
The plugin runs each graded test once with the reference (it must earn its points, else the harness is wrong)
and once per candidate. A finding is a candidate that earns any of the TODO's points:

    minbert/attention.py::eager_attention <- tests/graded/graded_helpers.py::reference_attention:
        earns 13 of 13 points (tests ...)   [one line]

Read next: paste_runtime.py.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from grading.config import COMPONENTS, DEFAULT_EDITION, EDITIONS, HIDDEN_TESTS, edition_todos
from grading.documents import NEEDS
from grading.grade import graded_tests
from grading.handout import copied_files, leak_sources
from grading.layout import layout, repository_files
from grading.paste_runtime import RUNTIME
from grading.regions import find_regions

STAFF_ROOT = Path(__file__).resolve().parents[1]
CHILD_LIMIT_S = 900  # the whole child process


# ----- signatures and candidates (parent) -------------------------------------------------------------


@dataclass(frozen=True)
class Signature:
    positional: tuple[str, ...]  # names, `self` included for a method
    required: int  # how many of them have no default
    keywords: tuple[str, ...]  # keyword-only parameters
    required_keywords: tuple[str, ...]
    star_args: bool
    star_kwargs: bool
    kinds: tuple[frozenset[str] | None, ...] = ()  # per positional parameter: its annotation's kinds

    @staticmethod
    def of(node: ast.FunctionDef) -> Signature:
        a = node.args
        parameters = a.posonlyargs + a.args
        positional = tuple(p.arg for p in parameters)
        keywords = tuple(p.arg for p in a.kwonlyargs)
        return Signature(positional, len(positional) - len(a.defaults), keywords,
                         tuple(p.arg for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is None),
                         a.vararg is not None, a.kwarg is not None,
                         tuple(kinds(p.annotation) for p in parameters))

    def drop_first(self) -> Signature:  # a method seen through `self.name`
        return dataclasses.replace(self, positional=self.positional[1:], required=max(self.required - 1, 0),
                                   kinds=self.kinds[1:])


# Annotations that can hold the same argument: an array may come as any of these, a number as any.
_KIND_FAMILIES = ({"ndarray", "ArrayLike", "Sequence", "list", "tuple", "Iterable", "Collection"},
                  {"int", "float", "bool", "Number"}, {"Tensor", "Parameter"})


def kinds(annotation: ast.expr | None) -> frozenset[str] | None:
    """What an annotation admits, as type names (`torch.Tensor | None` -> {"Tensor"}); None: anything."""
    if annotation is None:
        return None
    names: set[str] = set()
    for part in ast.unparse(annotation).strip("\"'").split("|"):
        name = part.split("[", 1)[0].strip().rsplit(".", 1)[-1]
        if name in ("Any", "object"):
            return None
        if name != "None":
            names |= next((family for family in _KIND_FAMILIES if name in family), {name})
    return frozenset(names) or None


def annotations_agree(todo: Signature, candidate: Signature, count: int, shift: int = 0) -> bool:
    """Whether each of the `count` arguments the TODO passes may be what the candidate's parameter takes
    (the candidate's first `shift` parameters take other arguments: `self`). Unannotated takes anything."""
    pairs = zip(todo.kinds[:count], candidate.kinds[shift:shift + count])
    return all(a is None or b is None or a & b for a, b in pairs)


def takes(candidate: Signature, given: int, required: int, keywords: tuple[str, ...]) -> int | None:
    """How many of `given` positional arguments (the first `required` of which must go) the candidate
    takes, with the keyword-only `keywords`; None when it cannot be called so."""
    count = given if candidate.star_args else min(given, len(candidate.positional))
    named = set(candidate.keywords) | set(candidate.positional[count:])
    if count < required or count < candidate.required or given and not count:  # no argument: no answer
        return None
    if not candidate.star_kwargs and not set(keywords) <= named:
        return None
    return count if set(candidate.required_keywords) <= set(keywords) else None


@dataclass(frozen=True)
class Candidate:
    name: str  # what the report shows
    module: str  # importable name of its file, in the child
    qualname: str
    count: int  # positional arguments passed
    with_self: bool = False  # a function given the method TODO's `self` first
    on_self: bool = False  # a method of the TODO's class, called as self.<name>


@dataclass(frozen=True)
class Function:
    path: str
    qualname: str
    signature: Signature
    decorated: bool


def functions(path: str, text: str) -> list[Function]:
    """The top-level functions and the methods of top-level classes of one file."""
    tree = ast.parse(text, filename=path)
    found = []
    for node in tree.body:
        members = [(node, "")] if isinstance(node, ast.FunctionDef) else [
            (child, node.name + ".") for child in node.body if isinstance(child, ast.FunctionDef)
        ] if isinstance(node, ast.ClassDef) else []
        found += [Function(path, prefix + f.name, Signature.of(f), bool(f.decorator_list))
                  for f, prefix in members]
    return found


def module_name(path: str, files: set[str]) -> str:
    """The name the file imports by: its packages (folders with __init__.py) dotted, from the first folder
    without one, which is on sys.path (the tree's root; tests/graded, put there by its conftest)."""
    parts = path[:-3].split("/")
    start = len(parts) - 1
    while start > 0 and "/".join(parts[:start]) + "/__init__.py" in files:
        start -= 1
    return ".".join(parts[start:])


def excluded(function: Function) -> bool:
    name = function.qualname.rsplit(".", 1)[-1]
    in_tests = function.path.startswith("tests/")
    return (name == "main" or name.startswith("__") or function.path.endswith("conftest.py")
            or in_tests and (name.startswith("test_") or function.decorated))


def candidates(todo_function: Function, shipped: dict[str, list[Function]], stubs: frozenset[str],
               files: set[str]) -> list[Candidate]:
    """The functions of `shipped` whose signature can take the TODO's arguments (see the module docstring);
    files: every file of the tree, for the candidates' module names."""
    todo_class = todo_function.qualname.rpartition(".")[0]
    signature = todo_function.signature.drop_first() if todo_class else todo_function.signature
    given, required, keywords = len(signature.positional), signature.required, signature.keywords
    # With `self` first, the module is the first argument: a function annotated for it takes a Module.
    with_self = dataclasses.replace(signature, positional=("self", *signature.positional),
                                    required=signature.required + 1,
                                    kinds=(frozenset({todo_class, "Module"}), *signature.kinds))
    found = []
    for path, defined in shipped.items():
        for f in defined:
            if f"{path}::{f.qualname}" in stubs or excluded(f):
                continue
            name, module = f"{path}::{f.qualname}", module_name(path, files)
            if "." not in f.qualname:
                count = takes(f.signature, given, required, keywords)
                if count is not None and annotations_agree(signature, f.signature, count):
                    found.append(Candidate(name, module, f.qualname, count))
                count = todo_class and takes(f.signature, given + 1, required + 1, keywords)
                if count and annotations_agree(with_self, f.signature, count):
                    found.append(Candidate(f"{name} (self first)", module, f.qualname, count, with_self=True))
            elif (path == todo_function.path and not f.decorated
                  and f.qualname.rpartition(".")[0] == todo_class
                  and (count := takes(f.signature.drop_first(), given, required, keywords)) is not None
                  and annotations_agree(signature, f.signature, count, shift=1)):
                found.append(Candidate(name, module, f.qualname, count, on_self=True))
    return found


# ----- the staging tree (parent) ----------------------------------------------------------------------


def _function_node(tree: ast.Module, qualname: str) -> ast.FunctionDef:
    node: ast.AST = tree
    for part in qualname.split("."):
        node = next(n for n in node.body if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name == part)
    return node


def pasteable(text: str, path: str, todos: frozenset[str]) -> str:
    """The file with each region of `todos` asking the runtime whether to be the stub, the paste or itself;
    the other regions' markers dropped (they ship as reference code)."""
    regions = find_regions(text, path)
    if not regions:
        return text
    tree = ast.parse(text, filename=path)
    lines = text.splitlines(keepends=True)
    for region in reversed(regions):  # from the bottom, so line numbers above stay put
        body = lines[region.begin:region.end - 1]
        if region.todo in todos:
            args = _function_node(tree, region.function).args
            passed = ([p.arg for p in args.posonlyargs + args.args]
                      + [f"{p.arg}={p.arg}" for p in args.kwonlyargs])
            i, runtime = region.indent, f'__import__("{RUNTIME}")'
            body = [f'{i}_minbert_paste = {runtime}.mode("{region.todo}")\n',
                    f'{i}if _minbert_paste == "paste":\n',
                    f'{i}    return {runtime}.call("{region.todo}", {", ".join(passed)})\n',
                    f'{i}if _minbert_paste == "stub":\n',
                    f'{i}    raise NotImplementedError("TODO: {region.todo}")\n'] + body
        lines[region.begin - 1:region.end] = body
    return "".join(lines)


def stage(staff: Path, where: Path, edition: str, extra: dict[str, str]) -> None:
    """The handout's files and its wheel's (every region of the edition pasteable), the hidden tests, the
    staff's setup.cfg, and `extra`."""
    files, todos = repository_files(staff), edition_todos(edition)
    split = layout(staff, edition, files)
    shipped = copied_files(files, split, frozenset()) + list(split.machinery) + ["setup.cfg"]
    for relative in shipped + [f for f in files if f.startswith(f"{HIDDEN_TESTS}/")]:
        target = where / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if relative.endswith(".py"):
            target.write_text(pasteable((staff / relative).read_text(encoding="utf-8"), relative, todos),
                              encoding="utf-8")
        else:
            shutil.copyfile(staff / relative, target)
    for relative, text in extra.items():
        (where / relative).parent.mkdir(parents=True, exist_ok=True)
        (where / relative).write_text(pasteable(text, relative, todos), encoding="utf-8")


# ----- the report (parent) ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Finding:
    todo: str
    candidate: str
    earned: float
    total: float
    tests: tuple[str, ...]  # the test functions it passes

    def __str__(self) -> str:
        return (f"{self.todo} <- {self.candidate}: earns {self.earned:g} of {self.total:g} points "
                f"(tests {', '.join(self.tests)})")


@dataclass
class PasteReport:
    edition: str
    candidates: dict[str, list[str]] = field(default_factory=dict)  # TODO -> candidate names
    findings: list[Finding] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # the harness's: a reference that fails, an import
    runs: int = 0  # tests run, the references' included
    seconds: float = 0.0

    @property
    def clean(self) -> bool:
        return not self.findings and not self.problems

    def summary(self) -> str:
        total = sum(map(len, self.candidates.values()))
        lines = [f"paste check ({self.edition}): {len(self.candidates)} TODOs, {total} candidates, "
                 f"{self.runs} test runs in {self.seconds:.0f} s: "
                 + (f"{len(self.findings)} findings" if self.findings else "no findings")]
        lines += [f"  {finding}" for finding in self.findings]
        lines += [f"  problem: {problem}" for problem in self.problems]
        return "\n".join(lines)


def check(edition: str = DEFAULT_EDITION, staff: Path = STAFF_ROOT, todos: list[str] | None = None,
          extra: dict[str, str] | None = None, among: list[str] | None = None) -> PasteReport:
    """Paste every candidate into every TODO of `edition` (or of `todos`) and grade it on the TODO's tests.

    extra: more shipped files, path -> text, planted into the tree (tests plant leaks with it).
    among: take candidates from these files only (default: every shipped Python file)."""
    began = time.monotonic()
    stubs = edition_todos(edition)
    chosen = [t for c in COMPONENTS for t in COMPONENTS[c] if t in stubs and (todos is None or t in todos)]
    if todos is not None and set(todos) - set(chosen):
        raise ValueError(f"TODOs {sorted(set(todos) - set(chosen))} are not TODOs of edition {edition!r}")
    tests = [t for t in graded_tests(staff) if t.todo in chosen]
    sources = {p: text for p, text in leak_sources(staff, edition).items() if p.endswith(".py")}
    sources.update(extra or {})
    shipped = {path: functions(path, text) for path, text in sources.items()}
    todo_functions = {f"{f.path}::{f.qualname}": f for defined in shipped.values() for f in defined}
    report = PasteReport(edition)
    pool = shipped if among is None else {path: shipped[path] for path in among}
    files = set(shipped) | set(repository_files(staff))  # for module names: grading/ is a package here
    by_todo = {todo: candidates(todo_functions[todo], pool, stubs, files) for todo in chosen}
    report.candidates = {todo: [c.name for c in found] for todo, found in by_todo.items()}
    spec = {"tests": {t.nodeid: t.todo for t in tests},
            "needs": {todo: list(NEEDS.get(todo, ())) for todo in chosen},
            "candidates": {todo: [c.__dict__ for c in found] for todo, found in by_todo.items()}}
    with tempfile.TemporaryDirectory(prefix="minbert-paste-") as where:
        where = Path(where)
        stage(staff, where, edition, extra or {})
        results = _run_child(where, staff, spec, [t.nodeid for t in tests])
    passed: dict[tuple[str, str | None], set[str]] = {}
    for line in results:
        if "problem" in line:
            report.problems.append(line["problem"])
            continue
        report.runs += 1
        if line["passed"]:
            passed.setdefault((spec["tests"][line["nodeid"]], line["candidate"]), set()).add(line["nodeid"])
    for todo in chosen:
        own = [t for t in tests if t.todo == todo]
        total = sum(t.points for t in own)
        reference = sum(t.points for t in own if t.nodeid in passed.get((todo, None), ()))
        if reference < total:
            report.problems.append(f"{todo}: the reference solution earns {reference:g} of {total:g} points "
                                   "under the check, so its candidates cannot be judged")
        for candidate in report.candidates[todo]:
            won = [t for t in own if t.nodeid in passed.get((todo, candidate), ())]
            if won:
                report.findings.append(Finding(todo, candidate, sum(t.points for t in won), total,
                                               tuple(t.nodeid.rsplit("::", 1)[-1] for t in won)))
    report.seconds = time.monotonic() - began
    return report


def _run_child(where: Path, staff: Path, spec: dict, nodeids: list[str]) -> list[dict]:
    (where / "paste-spec.json").write_text(json.dumps(spec), encoding="utf-8")
    results = where / "paste-results.jsonl"
    env = dict(os.environ, PYTHONPATH=f"{where}{os.pathsep}{staff}", PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
               PYTHONDONTWRITEBYTECODE="1", MINBERT_PASTE_SPEC=str(where / "paste-spec.json"),
               MINBERT_PASTE_RESULTS=str(results))
    # --tb=no: failures are the rule here, and formatting their tracebacks is most of the cost
    command = [sys.executable, "-m", "pytest", *nodeids, "-p", "grading.paste_runtime", "--rootdir",
               str(where), "-c", str(where / "setup.cfg"), "-p", "no:cacheprovider", "-q", "--no-header",
               "-W", "ignore", "--tb=no"]
    try:
        child = subprocess.run(command, cwd=where, env=env, capture_output=True, text=True,
                               timeout=CHILD_LIMIT_S)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"the paste check's pytest ran past {CHILD_LIMIT_S} s") from None
    lines = [json.loads(line) for line in results.read_text().splitlines()] if results.exists() else []
    done = {line.get("nodeid") for line in lines}
    if child.returncode not in (0, 1) or set(nodeids) - done:  # 1: some test failed, as most pastes do
        raise RuntimeError(f"the paste check's pytest ended with status {child.returncode} before running "
                           f"{sorted(set(nodeids) - done)[:5]}:\n{(child.stdout + child.stderr)[-3000:]}")
    return lines


# ----- command line -----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grading.paste", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--edition", choices=sorted(EDITIONS), default=DEFAULT_EDITION,
                        help=f"whose TODOs are stubs and checked (grading/config.py EDITIONS; default: "
                             f"{DEFAULT_EDITION})")
    parser.add_argument("--todo", action="append", default=None, metavar="FILE::FUNCTION",
                        help="check only this TODO of the edition (repeatable; default: all of them)")
    parser.add_argument("--list", action="store_true", help="also print every TODO's candidates")
    args = parser.parse_args(argv)
    print(f"paste check: grading every candidate of every TODO of edition {args.edition} on its tests ...",
          file=sys.stderr, flush=True)
    report = check(args.edition, todos=args.todo)
    for todo, names in report.candidates.items():
        print(f"{todo}: {len(names)} candidates" + "".join(f"\n    {n}" for n in names if args.list))
    print(report.summary())
    return 0 if report.clean else 1


if __name__ == "__main__":
    sys.exit(main())
