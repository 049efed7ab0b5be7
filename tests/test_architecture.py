"""The import rules of docs/architecture.md, checked on the code: every arrow points down.

Imports are read with `ast` from every file (function-level imports included), so a new import that
points up fails here with the file, the line and the rule it breaks.
"""

from __future__ import annotations

import ast
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
# same rule as every job's (tasks/training/arguments.py imports only the standard library).
SHARED = {"tasks.training.arguments"}

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


def test_no_source_file_grows_past_the_layout_budget():
    """docs/architecture.md: one concept per file, none past ~400 lines (tests and notebooks aside)."""
    budget = 420
    long = [f"{p.relative_to(ROOT)}: {n} lines"
            for package in (*ALLOWED, "bench") for p in files_of(package)
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > budget]
    assert not long, "split these by concept:\n" + "\n".join(long)


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
