"""The import rules of docs/architecture.md, checked on the code: every arrow points down.

Imports are read with `ast` from every file (function-level imports included), so a new import that
points up fails here with the file, the line and the rule it breaks. Between packages the layers of the
doc decide; inside a package no two modules may import each other, even through others or from inside a
function; inside minbert/ the doc's file table is the order, each file importing only files above it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Package -> the packages of ours it may import (docs/architecture.md, "The layers").
ALLOWED = {
    "minbert": {"minbert"},
    "optim": {"optim"},
    "tasks": {"tasks", "minbert", "optim"},
    "pretrain": {"pretrain", "tasks", "minbert", "optim"},
    "experiments": {"experiments", "pretrain", "tasks", "minbert", "optim"},
    "grading": {"grading"},
}
OURS = set(ALLOWED) | {"bench", "tests"}
# The one module below them that a package may import beside ALLOWED: grading's flags are checked by the
# same rule as every job's (tasks/training/flags.py imports only the standard library).
SHARED = {"tasks.training.flags"}

# Inside tasks/: subpackage -> the parts of tasks it may import ("tasks" alone: the jobs at the top).
TASKS_ALLOWED = {
    "tasks.data": {"tasks.data"},
    "tasks.evaluation": {"tasks.evaluation"},
    "tasks.models": {"tasks.models", "tasks.data", "tasks.evaluation"},
    "tasks.training": {"tasks.training", "tasks.data", "tasks.evaluation"},
}
JOBS = ("multitask", "sentiment", "classify", "hierarchical", "tag")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in the file, relative ones resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module_name(path).rsplit(".", 1)[0] if path.name != "__init__.py" else module_name(path)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parents = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parents, base]).strip(".")
            # `from tasks import metrics` imports the submodule tasks.metrics
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return found


def files_of(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def own_module(name: str, modules: set[str]) -> str | None:
    """The module of ours an imported name lives in (`minbert.model.BertModel` -> `minbert.model`)."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in modules:
            return ".".join(parts[:end])
    return None


def import_graph(package: str) -> dict[str, dict[str, int]]:
    """module -> {module of the same package it imports: the line}, function-level imports included."""
    paths = {module_name(path): path for path in files_of(package)}
    graph: dict[str, dict[str, int]] = {}
    for module, path in paths.items():
        graph[module] = {}
        for line, name in imports(path):
            target = own_module(name, set(paths))
            if target is not None and target != module:
                graph[module].setdefault(target, line)
    return graph


def find_cycle(graph: dict[str, dict[str, int]]) -> list[str] | None:
    """One import cycle as [a, b, ..., a], or None (a depth-first search)."""
    done: set[str] = set()
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        if module in path:
            return path[path.index(module):] + [module]
        if module in done:
            return None
        path.append(module)
        for target in graph[module]:
            if cycle := visit(target):
                return cycle
        path.pop()
        done.add(module)
        return None

    for module in sorted(graph):
        if cycle := visit(module):
            return cycle
    return None


def minbert_order() -> list[str]:
    """The files of docs/architecture.md's minbert/ table, in the table's order."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("\n## minbert/", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `(\w+\.py)` \|", section, flags=re.MULTILINE)


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_packages_import_only_what_is_below_them(package):
    wrong = []
    for module in SHARED:  # what makes it safe to share: it imports nothing of ours
        assert not [n for _, n in imports(ROOT / (module.replace(".",
                                                                 "/") + ".py")) if n.split(".")[0] in OURS]
    for path in files_of(package):
        for line, name in imports(path):
            top = name.split(".")[0]
            if top in OURS and top not in ALLOWED[package] and not {name, name.rsplit(".", 1)[0]} & SHARED:
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    assert not wrong, f"{package}/ may import only {sorted(ALLOWED[package])}:\n" + "\n".join(wrong)


def _tasks_part(name: str) -> str:
    parts = name.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 and f"tasks.{parts[1]}" in TASKS_ALLOWED else "tasks"


@pytest.mark.parametrize("subpackage", sorted(TASKS_ALLOWED))
def test_tasks_subpackages_never_import_the_jobs_or_each_other_upwards(subpackage):
    wrong = []
    for path in files_of(subpackage.replace(".", "/")):
        for line, name in imports(path):
            if name.split(".")[0] != "tasks":
                continue
            part = _tasks_part(name)
            if part not in TASKS_ALLOWED[subpackage]:
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    allowed = sorted(TASKS_ALLOWED[subpackage])
    assert not wrong, f"{subpackage} may import only {allowed}:\n" + "\n".join(wrong)


def test_the_jobs_sit_at_the_top_of_tasks_and_are_runnable_modules():
    for job in JOBS:
        text = (ROOT / "tasks" / f"{job}.py").read_text(encoding="utf-8")
        assert 'if __name__ == "__main__":' in text, f"tasks/{job}.py is not runnable with python -m"
    loose = sorted(p.name for p in (ROOT / "tasks").glob("*.py")
                   if p.stem not in JOBS and p.name != "__init__.py")
    assert not loose, f"tasks/ holds only the jobs; these belong in a subpackage: {loose}"


@pytest.mark.parametrize("package", sorted({*ALLOWED, "bench"}))
def test_no_import_cycle_inside_a_package(package):
    graph = import_graph(package)
    cycle = find_cycle(graph)
    assert cycle is None, f"{package}/ imports in a circle: " + " -> ".join(
        f"{a} (line {graph[a][b]})" for a, b in zip(cycle, cycle[1:])) + f" -> {cycle[-1]}"


def test_minbert_imports_its_own_modules_only_at_the_top_of_a_file():
    """An import inside a function is how a circle hides; minbert/ has none to hide."""
    late = []
    for path in files_of("minbert"):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for function in ast.walk(tree):
            if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                late += [f"{path.relative_to(ROOT)}:{node.lineno} in {function.name}()"
                         for node in ast.walk(function) if isinstance(node, (ast.Import, ast.ImportFrom))
                         and any(name.split(".")[0] == "minbert" for name in _names(node))]
    assert not late, "move these imports to the top of the file:\n" + "\n".join(late)


def _names(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    return ["minbert" if node.level else node.module or ""]  # a relative import inside minbert is ours


def test_minbert_files_import_only_files_above_them_in_the_docs_table():
    order = minbert_order()
    files = sorted(path.name for path in (ROOT / "minbert").glob("*.py"))
    assert sorted(order) == files, ("docs/architecture.md's minbert/ table and the folder differ: only in "
                                    f"the table {sorted(set(order) - set(files))}, only in the folder "
                                    f"{sorted(set(files) - set(order))}")
    rank = {f"minbert.{name[:-3]}" if name != "__init__.py" else "minbert": i for i, name in enumerate(order)}
    graph = import_graph("minbert")
    wrong = [f"minbert/{order[rank[module]]}:{line} imports {target}, which the table lists below it"
             for module, targets in graph.items() for target, line in targets.items()
             if rank[target] > rank[module]]
    assert not wrong, "\n".join(wrong)


def test_the_shared_data_folder_beside_the_checkout_is_found_without_minbert_data(monkeypatch):
    """tasks/training/job.py finds ../shared/data from its own place in the checkout (a moved file must
    update how many folders up the checkout's parent is)."""
    from tasks.training.job import data_root

    monkeypatch.delenv("MINBERT_DATA", raising=False)
    beside = ROOT.parent / "shared" / "data"
    if beside.is_dir():
        assert data_root(None).resolve() == beside.resolve()
    else:
        with pytest.raises(SystemExit, match=str(beside)):
            data_root(None)


def test_no_job_imports_another_job():
    """A job's code that another job needs belongs in a subpackage (docs/architecture.md, tasks/)."""
    wrong = [f"tasks/{job}.py:{line} imports {name}"
             for job in JOBS for line, name in imports(ROOT / "tasks" / f"{job}.py")
             if any(name == f"tasks.{other}" or name.startswith(f"tasks.{other}.")
                    for other in JOBS if other != job)]
    assert not wrong, "jobs never import each other:\n" + "\n".join(wrong)


def files_run_by(module: str) -> set[str]:
    """Every file of ours that importing `module` runs (its imports, theirs, ...), package __init__s aside."""
    modules = {module_name(p): p for package in ALLOWED for p in files_of(package)}
    seen, todo = set(), [module]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        todo += [target for _, name in imports(modules[current])
                 if (target := own_module(name, set(modules))) is not None]
    return {str(modules[m].relative_to(ROOT)) for m in seen if modules[m].name != "__init__.py"}


def test_the_main_jobs_way_in_the_docs_is_every_file_it_runs():
    """docs/architecture.md's hop list names exactly the files `python -m tasks.multitask` imports."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("\n## The main job's way", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"`((?:minbert|optim|tasks|pretrain)/[\w/]+\.py)`", section))
    run = files_run_by("tasks.multitask")
    assert not run - listed, f"docs/architecture.md's main-job list lacks {sorted(run - listed)}"
    assert not listed - run, f"docs/architecture.md's main-job list names files the job does not run: " \
                             f"{sorted(listed - run)}"
