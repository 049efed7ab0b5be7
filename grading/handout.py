"""Build the student repository: solution regions become stubs, hidden tests and the grader stay behind.

    python -m grading.handout OUT_DIR                 the default edition (OUT_DIR empty, new or a handout)
    python -m grading.handout OUT_DIR --edition full  every component a TODO (config.py EDITIONS)
    python -m grading.handout OUT_DIR --no-check      skip the slow checks (imports, jobs, tests on the stubs)
    python -m grading.handout --list [--edition full]  what the edition ships, without writing it

What OUT_DIR gets: what the edition needs (contents.py computes it from the code): the import closure of
the files holding its TODOs, the visible graded tests of its components (with tests/conftest.py and the
helpers and reference files they read), the main job and each other job that uses one of its TODOs; the
notebooks that run on these, the demo data the jobs read and the top-level build files. Never grading/, the
project's own tests, the hidden tests (tests/graded/hidden/), nor config.py HANDOUT_EXCLUDE_FILES and
HANDOUT_FAST_PATHS (the fast paths, by name); so bench/, experiments/ and the jobs no TODO needs stay in this
repository. README.md is replaced by a student README listing every TODO with its points and the tests that
check it. In every Python file each region of the edition's components

    # BEGIN SOLUTION
    ...
    # END SOLUTION

becomes `raise NotImplementedError("TODO: <file>::<function>")` at the region's indentation; the other
regions lose their marker lines and ship as working reference code.

It refuses unbalanced or nested markers (naming file and line), code anywhere in the handout that
restates a solution region, renamed or reformatted (leaks.py; this check always runs, it takes about a
second), and a shipped document that links to or names a file the handout leaves out. Then it checks the
result: no marker is left, every package module imports (and every name of a package's __all__ can be read),
every shipped job runs (check_jobs: `--help`, and a tiny run that finishes or stops at a TODO of the edition,
and finishes with the solutions in), and every graded test shipped to students fails with NotImplementedError
naming a TODO of the test's own component (not with an import or attribute error, not on another
component's stub, none passes on the stubs, and one that stops at another TODO of its component is listed
in documents.py NEEDS, from which the README tells the order).

Read next: grade.py.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from grading.config import (COMPONENTS, DEFAULT_EDITION, EDITIONS, GRADED_TESTS, HANDOUT_EXCLUDE_DIRS,
                            HANDOUT_EXCLUDE_FILES, HANDOUT_FAST_PATHS, HANDOUT_KEEP_TESTS, HIDDEN_TESTS,
                            JOB_TINY_RUNS, SUBMITTED_PACKAGES, component_todos, edition_components,
                            edition_todos, todo_component)
from grading.contents import Contents, contents
from grading.config import HANDOUT_KEEP_FILES
from grading.documents import NEEDS, dead_references, student_readme
from grading.handout_probe import REPORT
from grading.leaks import Leak, LeakReport, Restatement, find_leaks
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
    staff: Path = STAFF_ROOT
    files: list[str] = field(default_factory=list)
    regions: list[Region] = field(default_factory=list)  # the ones stubbed: the edition's TODOs
    tests_by_component: dict[str, list[str]] = field(default_factory=dict)  # shipped graded tests
    todo_of: dict[str, str] = field(default_factory=dict)  # shipped graded test -> the TODO it checks
    leak_report: LeakReport | None = None
    contents: Contents | None = None  # what the edition ships, and which jobs and notebooks
    job_checks: dict[str, str] = field(default_factory=dict)  # shipped job -> what check_jobs ran


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


def may_ship(relative: str, left_out_tests: frozenset[str] = frozenset()) -> bool:
    """Whether config.py's exclusions let a repository file into a handout (left_out_tests: graded test
    files of components outside the edition); which of these an edition ships is edition_contents'."""
    if relative in HANDOUT_EXCLUDE_FILES or relative in left_out_tests:
        return False
    if any(relative == p or p.endswith("/") and relative.startswith(p) for p in HANDOUT_FAST_PATHS):
        return False  # a path, or a folder's (ending with "/")
    if relative.startswith(f"{HIDDEN_TESTS}/"):
        return False
    if relative in HANDOUT_KEEP_TESTS + HANDOUT_KEEP_FILES or relative.startswith(f"{GRADED_TESTS}/"):
        return True
    return relative.split("/", 1)[0] not in HANDOUT_EXCLUDE_DIRS


def left_out_tests(tests, edition: str) -> frozenset[str]:
    """The graded test files of components outside the edition (one component per file)."""
    components = edition_components(edition)
    return frozenset(t.file for t in tests if t.component not in components)


def edition_contents(edition: str, staff: Path = STAFF_ROOT) -> Contents:
    """What the handout of `edition` ships (contents.py): the import closure of its TODOs, their tests and
    the jobs that use them, the notebooks that run on these, and the files they name."""
    from grading.grade import graded_tests

    every = graded_tests(staff)
    components = edition_components(edition)
    tests = sorted({t.file for t in every if t.component in components and not t.hidden_from_handout})
    left_out = left_out_tests(every, edition)
    return contents(edition, repository_files(staff), lambda r: (staff / r).read_text(encoding="utf-8"),
                    tests, lambda r: may_ship(r, left_out))


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
    handout = Handout(out, edition, staff)
    todos = edition_todos(edition)
    staged: dict[str, bytes] = {}
    every_region: list[Region] = []
    every_file = repository_files(staff)
    for relative in every_file:  # every file that may ship: a bad marker anywhere is refused
        if not may_ship(relative):
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
    handout.contents = edition_contents(edition, staff)
    staged = {relative: data for relative, data in staged.items() if relative in handout.contents.files}
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
    (out / "README.md").write_text(student_readme(edition, tests, set(handout.files)), encoding="utf-8")
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
        if may_ship(relative, left_out) and relative.endswith((".py", ".ipynb", ".md")):
            try:
                sources[relative] = (staff / relative).read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue
    return sources


# Reports of check_leaks by the hash of what it read and of the checker's own code: the check takes tens of
# seconds, and the test suite builds each edition several times, in two processes (pytest-xdist). Kept in
# memory and under build/ (git-ignored), written whole or not at all, as JSON: a cache file read back can hold
# no code (a pickle could run any).
_LEAK_REPORTS: dict[str, LeakReport] = {}
LEAK_REPORT_CACHE = STAFF_ROOT / "build" / "leak-reports"
_CHECKER_FILES = ("grading/leaks.py", "grading/restatements.py", "grading/regions.py")


def find_leaks_and_restatements(sources: dict[str, str], todos: frozenset[str] | None = None) -> LeakReport:
    """leaks.find_leaks with restatements.find_restated's findings, computed once per content."""
    checker = [(STAFF_ROOT / f).read_text(encoding="utf-8") for f in _CHECKER_FILES] + [sys.version]
    key = [sorted(sources.items()), sorted(todos) if todos is not None else None, checker]
    digest = hashlib.sha256(json.dumps(key).encode("utf-8")).hexdigest()
    stored = LEAK_REPORT_CACHE / f"{digest}.json"
    if digest not in _LEAK_REPORTS and stored.is_file():
        try:
            saved = json.loads(stored.read_text(encoding="utf-8"))
            found = [[kind(**{**item, "region": Region(**item["region"])}) for item in saved[key]]
                     for kind, key in ((Leak, "leaks"), (Restatement, "restated"))]
            _LEAK_REPORTS[digest] = LeakReport(saved["regions"], saved["files"], *found)
        except (OSError, ValueError, KeyError, TypeError, RecursionError):
            pass  # unreadable or from an older layout of the report: compute it again
    if digest not in _LEAK_REPORTS:
        report = find_leaks(sources, todos=todos)
        report.restated = find_restated(sources, todos)
        _LEAK_REPORTS[digest] = report
        try:
            LEAK_REPORT_CACHE.mkdir(parents=True, exist_ok=True)
            partial = stored.with_name(f"{stored.name}.{os.getpid()}.partial")
            partial.write_text(json.dumps(asdict(report)), encoding="utf-8")
            os.replace(partial, stored)
        except OSError:
            pass  # a read-only checkout still checks, only again next time
    return copy.deepcopy(_LEAK_REPORTS[digest])


def check_leaks(sources: dict[str, str], todos: frozenset[str] | None = None) -> LeakReport:
    """Refuse a handout in which some file restates a solution region of `todos`, as a copy (leaks.py) or
    as one of its expressions (restatements.py)."""
    report = find_leaks_and_restatements(sources, todos)
    if not report.clean:
        raise HandoutError(f"{report.summary()}\nthe handout would ship these solutions; remove each copy "
                           "(call the TODO's function, compute a test's expectation another way, or move "
                           "the shared lines out of the region into a helper): docs/teaching.md, Building "
                           "the handout")
    return report


def check_handout(handout: Handout) -> None:
    """No marker left; the packages import and the jobs run (check_jobs); every shipped graded test fails on
    its own component's stub."""
    out = handout.out
    for relative in handout.files:
        try:
            text = (out / relative).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        if has_marker(text):
            raise HandoutError(f"{relative}: a solution marker is left in the handout")
    check_jobs(handout)
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


def check_jobs(handout: Handout) -> None:
    """The packages import (each name of their __all__ included); every shipped job answers --help; each
    job of config.py JOB_TINY_RUNS, run tiny, finishes or stops at a TODO of the edition in the handout, and
    finishes with the solutions in (the same files, so nothing its path needs is left out)."""
    runs = {job: flags for job, flags in JOB_TINY_RUNS.items() if job in handout.contents.jobs}
    with tempfile.TemporaryDirectory(prefix="minbert-handout-check-") as scratch:
        solved = Path(scratch) / "solved"
        for relative in handout.files:
            target = solved / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            if relative.endswith(".py"):
                text, _ = strip_regions((handout.staff / relative).read_text(encoding="utf-8"), relative,
                                        frozenset())
                target.write_text(text, encoding="utf-8")
            else:
                shutil.copyfile(handout.out / relative, target)
        student = _probe(handout.out, handout.contents.jobs, runs, Path(scratch) / "student-runs")
        with_solutions = _probe(solved, [], runs, Path(scratch) / "solved-runs") if runs else {"runs": {}}
    todos = edition_todos(handout.edition)
    problems = student["errors"]
    for job, outcome in student["runs"].items():
        if outcome != "finished" and outcome.removeprefix("TODO: ") not in todos:
            problems.append(f"python -m {job} (tiny run) neither finishes nor stops at a TODO of the "
                            f"edition:\n{outcome}")
    for job, outcome in with_solutions["runs"].items():
        if outcome != "finished":
            problems.append(f"python -m {job} (tiny run, solutions in) does not finish; does its path need "
                            f"a file the handout leaves out?\n{outcome}")
    if problems:
        raise HandoutError("the handout's code does not run (contents.py chose its files):\n"
                           + "\n".join(problems))
    for job in handout.contents.jobs:
        handout.job_checks[job] = (f"tiny run: {student['runs'][job].removeprefix('TODO: ')}"
                                   + ("" if student["runs"][job] == "finished" else " (its stub)")
                                   + "; with the solutions: finished" if job in runs else "--help")


def _probe(tree: Path, jobs: list[str], runs: dict[str, str], scratch: Path) -> dict:
    """handout_probe.py run in `tree`: its report."""
    spec = {"packages": list(SUBMITTED_PACKAGES), "jobs": jobs, "runs": runs, "scratch": str(scratch)}
    source = (STAFF_ROOT / "grading" / "handout_probe.py").read_text(encoding="utf-8")
    result = subprocess.run([sys.executable, "-c", source, json.dumps(spec)], cwd=tree, capture_output=True,
                            text=True, env=_env(tree))
    report = [line for line in result.stdout.splitlines() if line.startswith(REPORT)]
    if result.returncode != 0 or not report:
        raise HandoutError(f"the handout check's probe failed in {tree}:\n{result.stdout[-2000:]}\n"
                           f"{result.stderr[-4000:]}")
    return json.loads(report[-1].removeprefix(REPORT))


def _env(root: Path) -> dict:

    env = dict(os.environ)
    env["PYTHONPATH"] = str(root)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m grading.handout", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    # A new folder or an existing one; whether an existing one may be overwritten is build()'s check.
    parser.add_argument("out", type=output_dir, metavar="OUT_DIR", nargs="?",
                        help="where to write the student repository (empty, new, or a previous handout)")
    parser.add_argument("--edition", choices=sorted(EDITIONS), default=DEFAULT_EDITION,
                        help="which components are TODOs (grading/config.py EDITIONS; default: "
                             f"{DEFAULT_EDITION}); the other regions ship as reference code")
    parser.add_argument("--no-check", action="store_true",
                        help="skip the checks that run Python (imports, jobs, tests failing on the stubs); "
                             "the leak check always runs")
    parser.add_argument("--list", action="store_true",
                        help="write nothing: print the files the edition ships (grading/contents.py), its jobs "
                             "and notebooks, and the notebooks left out")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.list:
        shipped = edition_contents(args.edition)
        print("\n".join(sorted(shipped.files)))
        print(f"\njobs: {', '.join(shipped.jobs)}\nnotebooks: {', '.join(shipped.notebooks) or 'none'}")
        for notebook, why in shipped.left_out_notebooks.items():
            print(f"left out: {notebook} ({why})")
        return 0
    if args.out is None:
        parser.error("give OUT_DIR, the folder to write the handout into (or --list)")
    try:
        handout = build(Path(args.out), check=not args.no_check, edition=args.edition)
    except (HandoutError, RegionError) as error:
        print(f"handout: {error}", file=sys.stderr)
        return 1
    print(f"wrote {len(handout.files)} files to {handout.out}; edition {handout.edition}, "
          f"{len(handout.regions)} TODOs:")
    for region in handout.regions:
        print(f"  {region.todo}  ({todo_component(region.todo)})")
    print(f"jobs: {', '.join(handout.contents.jobs)}; notebooks: {', '.join(handout.contents.notebooks)}")
    for job, checked in handout.job_checks.items():
        print(f"  python -m {job}: {checked}")
    print(handout.leak_report.summary())
    return 0


if __name__ == "__main__":
    sys.exit(main())
