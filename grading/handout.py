"""Build the student repository: solution regions become stubs, hidden tests and the grader stay behind.

    python -m grading.handout OUT_DIR                 the default edition (OUT_DIR empty, new or a handout)
    python -m grading.handout OUT_DIR --edition full  every component a TODO (config.py EDITIONS)
    python -m grading.handout OUT_DIR --no-check      skip the slow checks (imports, tests failing as TODOs)

What OUT_DIR gets: every file of this repository (tracked or not ignored by git) except grading/, the
project's own tests (only tests/conftest.py and the visible graded tests of the edition's components in
tests/graded/ go), the hidden tests (tests/graded/hidden/), docs/teaching.md and README.md, which is
replaced by a student README listing every TODO with its points and the tests that check it. In every
Python file each region of the edition's components

    # BEGIN SOLUTION
    ...
    # END SOLUTION

becomes `raise NotImplementedError("TODO: <file>::<function>")` at the region's indentation; the other
regions lose their marker lines and ship as working reference code.

It refuses unbalanced or nested markers (naming file and line), code anywhere in the handout that
restates a solution region, renamed or reformatted (leaks.py; this check always runs, it takes about a
second), and a shipped document that links to or names a file the handout leaves out. Then it checks the
result: no marker is left, every package module imports, and every graded test shipped to students fails
with NotImplementedError naming a TODO of the test's own component (not with an import or attribute
error, not on another component's stub, none passes on the stubs, and one that stops at another TODO of
its component is listed in documents.py NEEDS, from which the README tells the order).

Read next: grade.py.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from grading.config import (COMPONENTS, DEFAULT_EDITION, EDITIONS, GRADED_TESTS, HANDOUT_EXCLUDE_DIRS,
                            HANDOUT_EXCLUDE_FILES, HANDOUT_KEEP_TESTS, HIDDEN_TESTS, SUBMITTED_PACKAGES,
                            component_todos, edition_components, edition_todos, todo_component)
from grading.documents import NEEDS, dead_references, student_readme
from grading.leaks import LeakReport, find_leaks
from grading.regions import Region, RegionError, find_regions, has_marker, strip_regions
from grading.restatements import find_restated
from grading.runner import run_tests
from tasks.training.flags import output_dir

STAFF_ROOT = Path(__file__).resolve().parents[1]
STAMP = ".minbert-handout"  # marks a folder this builder wrote, which it may overwrite


class HandoutError(RuntimeError):
    """The handout cannot be built or fails a check; the message says where."""


@dataclass
class Handout:
    out: Path
    edition: str = DEFAULT_EDITION
    files: list[str] = field(default_factory=list)
    regions: list[Region] = field(default_factory=list)  # the ones stubbed: the edition's TODOs
    tests_by_component: dict[str, list[str]] = field(default_factory=dict)  # shipped graded tests
    todo_of: dict[str, str] = field(default_factory=dict)  # shipped graded test -> the TODO it checks
    leak_report: LeakReport | None = None


def repository_files(root: Path) -> list[str]:
    """The repository's files: git's tracked and untracked-but-not-ignored files, else a filtered walk."""
    try:
        listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=root,
                                capture_output=True, check=True).stdout.decode().split("\0")
        files = [f for f in listed if f and (root / f).is_file()]
        if files:
            return sorted(files)
    except (OSError, subprocess.CalledProcessError):
        pass
    skip = {".git", ".venv", "__pycache__", ".pytest_cache", ".hypothesis", "runs", "build", "dist"}
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*")
                  if p.is_file() and not skip & set(p.relative_to(root).parts)
                  and not any(part.endswith(".egg-info") for part in p.parts))


def shipped(relative: str, left_out_tests: frozenset[str] = frozenset()) -> bool:
    """Whether a repository file goes into the handout (left_out_tests: graded test files of components
    outside the edition)."""
    if relative in HANDOUT_EXCLUDE_FILES or relative in left_out_tests:
        return False
    if relative.startswith(f"{HIDDEN_TESTS}/"):
        return False
    if relative in HANDOUT_KEEP_TESTS or relative.startswith(f"{GRADED_TESTS}/"):
        return True
    return relative.split("/", 1)[0] not in HANDOUT_EXCLUDE_DIRS


def left_out_tests(tests, edition: str) -> frozenset[str]:
    """The graded test files of components outside the edition (one component per file)."""
    components = edition_components(edition)
    return frozenset(t.file for t in tests if t.component not in components)


def build(out: Path, staff: Path = STAFF_ROOT, check: bool = True, edition: str = DEFAULT_EDITION) -> Handout:
    """Write the handout of `edition` into `out` and, with `check`, verify it (see the module docstring)."""
    if edition not in EDITIONS:
        raise HandoutError(f"unknown edition {edition!r}; grading/config.py EDITIONS has {sorted(EDITIONS)}")
    out = Path(out).resolve()
    if out.exists() and any(out.iterdir()):
        if not (out / STAMP).is_file():
            raise HandoutError(f"{out} is not empty and is not a handout this builder wrote; give an empty "
                               "or new folder")
        shutil.rmtree(out)
    if out == staff or staff in out.parents and out.relative_to(staff).parts[0] not in ("build", "runs"):
        raise HandoutError(f"{out} lies inside the repository; write the handout elsewhere (or under build/)")
    handout = Handout(out, edition)
    todos = edition_todos(edition)
    staged: dict[str, bytes] = {}
    every_region: list[Region] = []
    every_file = repository_files(staff)
    for relative in every_file:
        if not shipped(relative):
            continue
        data = (staff / relative).read_bytes()
        if relative.endswith(".py"):
            text = data.decode("utf-8")
            every_region += find_regions(text, relative)  # RegionError names file:line
            text, regions = strip_regions(text, relative, todos)
            handout.regions += regions
            data = text.encode("utf-8")
        staged[relative] = data
    _check_todos(every_region)
    from grading.grade import graded_tests  # the staff's graded tests, with their markers

    components = edition_components(edition)
    tests = [t for t in graded_tests(staff) if t.component in components]
    left_out = left_out_tests(graded_tests(staff), edition)
    staged = {relative: data for relative, data in staged.items() if relative not in left_out}
    handout.leak_report = check_leaks(leak_sources(staff, left_out), todos)
    for relative, data in staged.items():
        target = out / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        handout.files.append(relative)
    (out / STAMP).write_text(f"written by python -m grading.handout (edition {edition}); may be overwritten "
                             "by it\n")
    for test in tests:
        if not test.hidden_from_handout:
            handout.tests_by_component.setdefault(test.component, []).append(test.nodeid)
            handout.todo_of[test.nodeid] = test.todo
    (out / "README.md").write_text(student_readme(edition, tests), encoding="utf-8")
    handout.files.append("README.md")
    dead = dead_references(out, handout.files, every_file)
    if dead:
        raise HandoutError("the handout's documents point at files it does not ship; reword them as plain "
                           "text, or leave the document out (grading/config.py HANDOUT_EXCLUDE_FILES):\n  "
                           + "\n  ".join(dead))
    if check:
        check_handout(handout)
    return handout


def _check_todos(regions: list[Region]) -> None:
    found = [r.todo for r in regions]
    for region in regions:
        try:
            todo_component(region.todo)
        except KeyError as error:
            raise HandoutError(f"{region.path}:{region.begin}: {error.args[0]}") from None
    expected = [t for todos in COMPONENTS.values() for t in todos]
    missing = [t for t in expected if t not in found]
    if missing:
        raise HandoutError(f"grading/config.py lists TODOs with no solution region: {missing}")


def leak_sources(staff: Path = STAFF_ROOT, left_out: frozenset[str] = frozenset()) -> dict[str, str]:
    """The shipped files that can hold code (Python, notebooks, Markdown), as the staff wrote them
    (left_out: the graded test files an edition does not ship; by default every one ships)."""
    sources = {}
    for relative in repository_files(staff):
        if shipped(relative, left_out) and relative.endswith((".py", ".ipynb", ".md")):
            try:
                sources[relative] = (staff / relative).read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue
    return sources


def check_leaks(sources: dict[str, str], todos: frozenset[str] | None = None) -> LeakReport:
    """Refuse a handout in which some file restates a solution region of `todos`, as a copy (leaks.py) or
    as one of its expressions (restatements.py)."""
    report = find_leaks(sources, todos=todos)
    report.restated = find_restated(sources, todos)
    if not report.clean:
        raise HandoutError(f"{report.summary()}\nthe handout would ship these solutions; remove each copy "
                           "(call the TODO's function, compute a test's expectation another way, or move "
                           "the shared lines out of the region into a helper): docs/teaching.md, Building "
                           "the handout")
    return report


def check_handout(handout: Handout) -> None:
    """No marker left; the packages import; every shipped graded test fails on its own component's stub."""
    out = handout.out
    for relative in handout.files:
        try:
            text = (out / relative).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        if has_marker(text):
            raise HandoutError(f"{relative}: a solution marker is left in the handout")
    probe = ("import importlib, pkgutil, sys\n"
             f"for name in {list(SUBMITTED_PACKAGES)!r}:\n"
             "    try:\n        package = importlib.import_module(name)\n"
             "    except ModuleNotFoundError:\n        continue\n"
             "    assert package.__file__.startswith(sys.argv[1]), (name, package.__file__)\n"
             "    for info in pkgutil.walk_packages(package.__path__, name + '.'):\n"
             "        importlib.import_module(info.name)\n")
    result = subprocess.run([sys.executable, "-c", probe, str(out)], cwd=out, capture_output=True,
                            text=True, env=_env(out))
    if result.returncode != 0:
        raise HandoutError(f"the handout's packages do not import cleanly:\n{result.stderr[-4000:]}")
    component_of = {n: c for c, nodes in handout.tests_by_component.items() for n in nodes}
    results = run_tests(out, list(component_of), expect_modules_under=out)
    problems = []
    for nodeid, component in component_of.items():
        r = results[nodeid]
        stub = (r.exc_msg or "").removeprefix("TODO: ").strip()
        if r.outcome == "passed":
            problems.append(f"{nodeid} passes on the handout: it checks nothing a student writes")
        elif r.exc_type != "NotImplementedError" or not (r.exc_msg or "").startswith("TODO: "):
            problems.append(f"{nodeid} fails with {r.exc_type or r.outcome} ({r.exc_msg or ''}), not with "
                            f"the stub's NotImplementedError:\n{r.text[:1500]}")
        elif stub not in component_todos(component):
            problems.append(f"{nodeid} ({component}) fails on the stub of {stub}, another component's TODO: "
                            "give the test a stand-in for it (tests/graded/graded_helpers.py)")
        elif (todo := handout.todo_of.get(nodeid)) and stub != todo and stub not in NEEDS.get(todo, ()):
            problems.append(f"{nodeid} checks {todo} but stops at the stub of {stub}: add it to NEEDS in "
                            "grading/documents.py, from which the student README tells the order")
    if problems:
        raise HandoutError("student-visible tests must fail on a TODO stub of their own component:\n"
                           + "\n".join(problems))


def _env(root: Path) -> dict:
    import os

    env = dict(os.environ)
    env["PYTHONPATH"] = str(root)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m grading.handout", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    # A new folder or an existing one; whether an existing one may be overwritten is build()'s check.
    parser.add_argument("out", type=output_dir, metavar="OUT_DIR",
                        help="where to write the student repository (empty, new, or a previous handout)")
    parser.add_argument("--edition", choices=sorted(EDITIONS), default=DEFAULT_EDITION,
                        help="which components are TODOs (grading/config.py EDITIONS; default: "
                             f"{DEFAULT_EDITION}); the other regions ship as reference code")
    parser.add_argument("--no-check", action="store_true",
                        help="skip the checks that run Python (imports, tests failing on the stubs); "
                             "the leak check always runs")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        handout = build(Path(args.out), check=not args.no_check, edition=args.edition)
    except (HandoutError, RegionError) as error:
        print(f"handout: {error}", file=sys.stderr)
        return 1
    print(f"wrote {len(handout.files)} files to {handout.out}; edition {handout.edition}, "
          f"{len(handout.regions)} TODOs:")
    for region in handout.regions:
        print(f"  {region.todo}  ({todo_component(region.todo)})")
    print(handout.leak_report.summary())
    return 0


if __name__ == "__main__":
    sys.exit(main())
