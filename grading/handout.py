"""Build the student handout: the lesson with the edition's TODOs as stubs, its graded tests, a README, the
notebooks and the set-up; what runs the lesson comes with it as one wheel, which its set-up installs.

    python -m grading.handout OUT_DIR                 the default edition (OUT_DIR empty, new or a handout)
    python -m grading.handout OUT_DIR --edition full  every component a TODO (config.py EDITIONS)
    python -m grading.handout OUT_DIR --no-check      skip the slow checks (the jobs, the tests on the stubs)
    python -m grading.handout --wheel DIR             the wheel alone: a course's update of the installed part

What OUT_DIR gets (layout.py says which files are the lesson and which the machinery):

    minbert/, optim/    the lesson; each region of the edition's components
                            # BEGIN SOLUTION
                            ...
                            # END SOLUTION
                        becomes `raise NotImplementedError("TODO: <file>::<function>")` at the region's
                        indentation, the other regions lose their marker lines and ship as working code
    tests/              tests/conftest.py and the edition's visible graded tests with their helpers and
                        stored outputs (never tests/graded/hidden/; their support modules are installed)
    notebooks/          config.py HANDOUT_NOTEBOOKS; data/sample/: the demo data
    wheels/             minbert_runtime-<version>-py3-none-any.whl (build_wheel): the machinery, built from
                        this commit; the set-up installs it, the autograder archive holds the same
    README.md, Makefile, setup.cfg, pyproject.toml, .gitignore: the student README and the set-up

It refuses unbalanced or nested markers (naming file and line), a file of the handout or of the wheel that
restates a solution region (leaks.py, restatements.py; this check always runs, about a second), and a file
of the handout, or a job's --help, that names a file of this repository the handout lacks
(documents.dead_references; the installed part is named by its modules, `minbert.loading.pretrained`). Then
it checks the result, with the wheel beside the lesson as the set-up installs it: no marker is left, every
module imports, every job answers --help, each tiny run of config.py JOB_TINY_RUNS stops at a TODO of the
edition (the main job at the first in reading order) and finishes with the solutions in, and every graded
test shipped fails with NotImplementedError naming a TODO of its own component (not with an import or
attribute error, not on another component's stub, none passes on the stubs, and one that stops at another
TODO of its component is listed in documents.py NEEDS, from which the README tells the order).

Read next: grade.py.
"""

from __future__ import annotations

import argparse
import configparser
import contextlib
import copy
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from grading.config import (COMPONENTS, DEFAULT_EDITION, EDITIONS, GRADED_TESTS, HANDOUT_NOTEBOOKS,
                            HIDDEN_TESTS, JOB_TINY_RUNS, component_todos, edition_components, edition_todos,
                            todo_component)
from grading.documents import NEEDS, dead_references, first_todo, student_readme
from grading.handout_probe import REPORT
from grading.layout import LESSON_PACKAGES, Layout, installed_as, layout, repository_files
from grading.leaks import Leak, LeakReport, Restatement, find_leaks
from grading.regions import Region, RegionError, find_regions, has_marker, strip_regions
from grading.restatements import find_restated
from grading.runner import run_tests
from tasks.training.flags import output_dir

STAFF_ROOT = Path(__file__).resolve().parents[1]
STAMP = ".minbert-handout"  # marks a folder this builder wrote, which it may overwrite
WHEELS = "wheels"  # the handout's folder holding the wheel, and the autograder archive's
WHEEL_PROJECT = "minbert-runtime"
MARKER = "minbert_handout"  # a module of the wheel: it says an installation runs a student's handout
COPIED = ("pyproject.toml", ".gitignore")  # README.md, Makefile and setup.cfg are the handout's own
MAKEFILE = "grading/student/Makefile"


class HandoutError(RuntimeError):
    """The handout cannot be built or fails a check; the message says where."""


@dataclass
class Handout:
    out: Path
    edition: str = DEFAULT_EDITION
    staff: Path = STAFF_ROOT
    files: list[str] = field(default_factory=list)  # what the builder wrote, relative to out
    regions: list[Region] = field(default_factory=list)  # the ones stubbed: the edition's TODOs
    tests_by_component: dict[str, list[str]] = field(default_factory=dict)  # shipped graded tests
    todo_of: dict[str, str] = field(default_factory=dict)  # shipped graded test -> the TODO it checks
    layout: Layout | None = None
    wheel: Path | None = None
    leak_report: LeakReport | None = None
    job_checks: dict[str, str] = field(default_factory=dict)  # job -> what check_jobs ran


def left_out_tests(tests, edition: str) -> frozenset[str]:
    """The graded test files of components outside the edition (one component per file)."""
    components = edition_components(edition)
    return frozenset(t.file for t in tests if t.component not in components)


def copied_files(files: list[str], split: Layout, left_out: frozenset[str]) -> list[str]:
    """The repository files the handout copies: the lesson, the visible graded tests of the edition (their
    helpers and stored outputs too, not their installed support), tests/conftest.py, the notebooks, the demo
    data and COPIED."""
    def wanted(f: str) -> bool:
        if f.startswith(f"{GRADED_TESTS}/"):
            return (not f.startswith(f"{HIDDEN_TESTS}/") and f not in left_out and "__pycache__" not in f
                    and f not in split.machinery)
        return (f in COPIED or f in HANDOUT_NOTEBOOKS or f == "tests/conftest.py"
                or f.startswith("data/sample/") and not f.endswith(".py"))
    return list(split.lesson) + [f for f in files if wanted(f)]


def is_job(text: str) -> bool:
    """A module run with `python -m`: it has an `if __name__ == "__main__":` block."""
    return bool(re.search(r"^if __name__ == [\"']__main__[\"']:", text, re.M))


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
    every_file = repository_files(staff)
    every_region: list[Region] = []
    for relative in every_file:  # every package file: a bad marker anywhere is refused
        if relative.endswith(".py") and not relative.startswith(("tests/", "grading/")):
            every_region += find_regions((staff / relative).read_text(encoding="utf-8"), relative)
    _check_todos(every_region)
    from grading.grade import graded_tests  # the staff's graded tests, with their markers

    tests = [t for t in graded_tests(staff) if t.component in edition_components(edition)]
    handout.layout = split = layout(staff, edition, every_file)
    copied = copied_files(every_file, split, left_out_tests(graded_tests(staff), edition))
    handout.leak_report = check_leaks(leak_sources(staff, edition), todos)
    for relative in copied:
        target = out / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if relative in split.lesson:
            text, regions = strip_regions((staff / relative).read_text(encoding="utf-8"), relative, todos)
            handout.regions += regions
            target.write_text(text, encoding="utf-8")
        else:
            shutil.copyfile(staff / relative, target)
        handout.files.append(relative)
    handout.wheel = build_wheel(out / WHEELS, staff, edition, split)
    handout.files.append(f"{WHEELS}/{handout.wheel.name}")
    (out / STAMP).write_text(f"written by python -m grading.handout (edition {edition}); may be overwritten "
                             "by it\n")
    shutil.copyfile(STAFF_ROOT / MAKEFILE, out / "Makefile")  # the builder's own file
    (out / "setup.cfg").write_text(lesson_setup_cfg(staff), encoding="utf-8")
    for test in tests:
        if not test.hidden_from_handout:
            handout.tests_by_component.setdefault(test.component, []).append(test.nodeid)
            handout.todo_of[test.nodeid] = test.todo
    (out / "README.md").write_text(student_readme(edition, tests, set(handout.files)), encoding="utf-8")
    handout.files += ["Makefile", "setup.cfg", "README.md"]
    refuse_dead_references(handout, every_file)
    if check:
        check_handout(handout)
    return handout


def refuse_dead_references(handout: Handout, staff_files: list[str], helps: dict[str, str] | None = None):
    dead = dead_references(handout.out, handout.files, handout.layout.machinery, staff_files, helps or {})
    if dead:
        raise HandoutError("the handout names files it does not have; name an installed file by its module "
                           "(minbert.loading.pretrained), reword it as plain text, or leave it out:\n  "
                           + "\n  ".join(dead))


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


# ----- the wheel: what runs the lesson, installed --------------------------------------------------------


def _setup_cfg(staff: Path) -> configparser.ConfigParser:
    parsed = configparser.ConfigParser(interpolation=None)
    parsed.read(staff / "setup.cfg", encoding="utf-8")
    return parsed


def _version(staff: Path) -> str:
    """setup.cfg's version with the commit as its local label (0.1.0+gf615700), where git knows one."""
    version = _setup_cfg(staff)["metadata"]["version"]
    commit = subprocess.run(["git", "rev-parse", "--short=7", "HEAD"], cwd=staff, capture_output=True,
                            text=True).stdout.strip()
    return f"{version}+g{commit}" if re.fullmatch(r"[0-9a-f]{7}", commit) else version


def build_wheel(into: Path, staff: Path = STAFF_ROOT, edition: str = DEFAULT_EDITION,
                split: Layout | None = None) -> Path:
    """The machinery of `edition` (layout.py) as one wheel in `into`, by setuptools through `pip wheel` from
    a staged folder: minbert/ and optim/ there have no __init__.py (the lesson's regular packages extend
    their __path__ with these folders), the other regions lose their markers, and MARKER says that this
    installation runs a handout. Returns the wheel's path."""
    split = split or layout(staff, edition)
    setup = _setup_cfg(staff)
    version = _version(staff)
    with tempfile.TemporaryDirectory(prefix="minbert-wheel-") as stage:
        stage = Path(stage)
        for relative in split.machinery:
            target = stage / installed_as(relative)
            target.parent.mkdir(parents=True, exist_ok=True)
            if relative.endswith(".py"):
                text = strip_regions((staff / relative).read_text(encoding="utf-8"), relative, frozenset())[0]
                target.write_text(text, encoding="utf-8")
            else:
                shutil.copyfile(staff / relative, target)
        (stage / f"{MARKER}.py").write_text(
            f'"""This installation runs a student handout of minbert {version}, edition {edition}: the jobs '
            'run the\nstudent\'s own code (tasks.training.process.in_handout), and a fast path only when '
            'asked for by name."""\n\n' f"EDITION = {edition!r}\nVERSION = {version!r}\n", encoding="utf-8")
        installed = [installed_as(f) for f in split.machinery]
        packages = sorted({f.split("/")[0] for f in installed if "/" in f})
        modules = [MARKER] + [f.removesuffix(".py") for f in installed if "/" not in f]
        wheel = configparser.ConfigParser(interpolation=None)
        wheel["metadata"] = {"name": WHEEL_PROJECT, "version": version, "description": "What runs the "
                             "minbert lesson: loading and saving, the tokenizer, the jobs, the fast paths"}
        wheel["options"] = {"python_requires": setup["options"]["python_requires"],
                            "install_requires": setup["options"]["install_requires"],
                            "packages": "find_namespace:", "py_modules": "\n".join(modules)}
        wheel["options.packages.find"] = {"include": "\n".join(f"{p}*" for p in packages)}
        wheel["options.package_data"] = {"*": "*.c"}
        wheel["options.extras_require"] = {"grading": setup["options.extras_require"]["grading"]}
        with open(stage / "setup.cfg", "w", encoding="utf-8") as f:
            wheel.write(f)
        shutil.copyfile(staff / "pyproject.toml", stage / "pyproject.toml")
        into.mkdir(parents=True, exist_ok=True)
        for old in into.glob("minbert_runtime-*.whl"):
            old.unlink()
        commit_time = subprocess.run(["git", "log", "-1", "--format=%ct"], cwd=staff, capture_output=True,
                                     text=True).stdout.strip()
        built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                                "--quiet", "--disable-pip-version-check", "-w", str(into), str(stage)],
                               capture_output=True, text=True,
                               env={**os.environ, "SOURCE_DATE_EPOCH": commit_time or "315532800"})
        found = sorted(into.glob("minbert_runtime-*.whl"))
        if built.returncode != 0 or len(found) != 1:
            raise HandoutError(f"pip wheel failed to build the installed part:\n{built.stderr[-3000:]}")
    return found[0]


def lesson_setup_cfg(staff: Path) -> str:
    """The handout's setup.cfg: the lesson as a project (installed editable by the Makefile) and the
    staff's pytest settings, whose markers the graded tests use."""
    setup, lesson = _setup_cfg(staff), configparser.ConfigParser(interpolation=None)
    lesson["metadata"] = {"name": "minbert-lesson", "version": setup["metadata"]["version"]}
    lesson["options"] = {"python_requires": setup["options"]["python_requires"],
                         "packages": ", ".join(LESSON_PACKAGES)}
    for section in ("tool:pytest", "flake8"):
        lesson[section] = dict(setup[section])
    text = io.StringIO()
    lesson.write(text)
    return ("# Your lesson, minbert/ and optim/, as a project; what runs it is installed from wheels/ "
            "(make setup).\n" + text.getvalue())


# ----- the leak check ---------------------------------------------------------------------------------


def leak_sources(staff: Path = STAFF_ROOT, edition: str = DEFAULT_EDITION) -> dict[str, str]:
    """What the handout of `edition` ships that can hold code (Python, notebooks, Markdown), its wheel's
    files included, as the staff wrote them."""
    from grading.grade import graded_tests

    files = repository_files(staff)
    split = layout(staff, edition, files)
    shipped = copied_files(files, split, left_out_tests(graded_tests(staff), edition)) + list(split.machinery)
    return {f: (staff / f).read_text(encoding="utf-8") for f in shipped
            if f.endswith((".py", ".ipynb", ".md"))}


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
        # unreadable or from an older layout of the report: computed again
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError, RecursionError):
            saved = json.loads(stored.read_text(encoding="utf-8"))
            found = [[kind(**{**item, "region": Region(**item["region"])}) for item in saved[key]]
                     for kind, key in ((Leak, "leaks"), (Restatement, "restated"))]
            _LEAK_REPORTS[digest] = LeakReport(saved["regions"], saved["files"], *found)
    if digest not in _LEAK_REPORTS:
        report = find_leaks(sources, todos=todos)
        report.restated = find_restated(sources, todos)
        _LEAK_REPORTS[digest] = report
        with contextlib.suppress(OSError):  # a read-only checkout still checks, only again next time
            LEAK_REPORT_CACHE.mkdir(parents=True, exist_ok=True)
            partial = stored.with_name(f"{stored.name}.{os.getpid()}.partial")
            partial.write_text(json.dumps(asdict(report)), encoding="utf-8")
            os.replace(partial, stored)
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


# ----- the checks that run it -------------------------------------------------------------------------


def check_handout(handout: Handout) -> None:
    """No marker left; the packages import and the jobs run (check_jobs); every shipped graded test fails on
    its own component's stub."""
    out = handout.out
    for relative in handout.files:
        if relative.endswith((".py", ".md", ".ipynb")) and has_marker((out / relative).read_text("utf-8")):
            raise HandoutError(f"{relative}: a solution marker is left in the handout")
    with tempfile.TemporaryDirectory(prefix="minbert-handout-check-") as scratch:
        check_jobs(handout, unpack(handout.wheel, Path(scratch) / "installed"))
        merged = Path(scratch) / "merged"  # the handout with the wheel's files in it, as the grader stages it
        shutil.copytree(out, merged)
        component_of = {n: c for c, nodes in handout.tests_by_component.items() for n in nodes}
        results = run_tests(unpack(handout.wheel, merged), list(component_of), expect_modules_under=merged)
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
                            "grading/documents.py, from which the README tells the order")
    if problems:
        raise HandoutError("student-visible tests must fail on a TODO stub of their own component:\n"
                           + "\n".join(problems))


def unpack(wheel: Path, where: Path) -> Path:
    """A pure wheel's files in `where`, as pip puts them in site-packages (the checks run beside them)."""
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(where)
    return where


def check_jobs(handout: Handout, installed: Path) -> None:
    """The packages import (each name of their __all__ included); every job of the wheel answers --help,
    which names no file the handout lacks; each job of config.py JOB_TINY_RUNS, run tiny, stops at a TODO of
    the edition (the main job at the first in reading order) and finishes with the solutions in."""
    jobs = sorted(f.removesuffix(".py").replace("/", ".") for f in handout.layout.machinery
                  if f.endswith(".py") and is_job((handout.staff / f).read_text(encoding="utf-8")))
    with tempfile.TemporaryDirectory(prefix="minbert-handout-check-") as scratch:
        solved = Path(scratch) / "solved"
        for relative in handout.files:
            target = solved / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            if relative in handout.layout.lesson:
                text, _ = strip_regions((handout.staff / relative).read_text(encoding="utf-8"), relative,
                                        frozenset())
                target.write_text(text, encoding="utf-8")
            else:
                shutil.copyfile(handout.out / relative, target)
        student = _probe(handout.out, installed, jobs, JOB_TINY_RUNS, Path(scratch) / "student-runs")
        with_solutions = _probe(solved, installed, [], JOB_TINY_RUNS, Path(scratch) / "solved-runs")
    todos, first = edition_todos(handout.edition), first_todo(handout.edition)
    problems = student["errors"]
    for job, outcome in student["runs"].items():
        stop = outcome.removeprefix("TODO: ")
        if job == "tasks.multitask" and stop != first:
            problems.append(f"python -m {job} (tiny run) stops at {stop!r}, not at the first TODO in reading "
                            f"order, {first}:\n{outcome}")
        elif stop not in todos:
            problems.append(f"python -m {job} (tiny run) does not stop at a TODO of the edition:\n{outcome}")
    for job, outcome in with_solutions["runs"].items():
        if outcome != "finished":
            problems.append(f"python -m {job} (tiny run, solutions in) does not finish:\n{outcome}")
    if problems:
        raise HandoutError("the handout's code does not run:\n" + "\n".join(problems))
    refuse_dead_references(handout, repository_files(handout.staff), student["helps"])
    for job in jobs:
        handout.job_checks[job] = (f"tiny run: stops at {student['runs'][job].removeprefix('TODO: ')}; with "
                                   "the solutions: finished" if job in JOB_TINY_RUNS else "--help")


def _probe(tree: Path, installed: Path, jobs: list[str], runs: dict[str, str], scratch: Path) -> dict:
    """handout_probe.py run in `tree` with the wheel's files beside it: its report."""
    spec = {"packages": list(LESSON_PACKAGES), "jobs": jobs, "runs": runs, "scratch": str(scratch)}
    source = (STAFF_ROOT / "grading" / "handout_probe.py").read_text(encoding="utf-8")
    result = subprocess.run([sys.executable, "-c", source, json.dumps(spec)], cwd=tree, capture_output=True,
                            text=True, env={**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{installed}",
                                            "PYTHONDONTWRITEBYTECODE": "1"})
    report = [line for line in result.stdout.splitlines() if line.startswith(REPORT)]
    if result.returncode != 0 or not report:
        raise HandoutError(f"the handout check's probe failed in {tree}:\n{result.stdout[-2000:]}\n"
                           f"{result.stderr[-4000:]}")
    return json.loads(report[-1].removeprefix(REPORT))


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
                        help="skip the checks that run Python (the jobs, the tests failing on the stubs); "
                             "the leak check and the check of the files the handout names always run")
    parser.add_argument("--wheel", action="store_true",
                        help="write only the wheel of the installed part into OUT_DIR (docs/teaching.md: "
                             "updating a course's installed part)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.wheel:
        wheel = build_wheel(Path(args.out), edition=args.edition)
        print(f"wrote {wheel}: students install it with `make setup` (or .venv/bin/pip install '{wheel.name}"
              "[grading]'); upload the autograder archive of the same commit")
        return 0
    try:
        handout = build(Path(args.out), check=not args.no_check, edition=args.edition)
    except (HandoutError, RegionError) as error:
        print(f"handout: {error}", file=sys.stderr)
        return 1
    python = [f for f in handout.files if f.endswith(".py") and not f.startswith("tests/")]
    lines = sum(len((handout.out / f).read_text(encoding="utf-8").splitlines()) for f in python)
    print(f"wrote {len(handout.files)} files to {handout.out} ({len(python)} Python files outside tests/, "
          f"{lines} lines); edition {handout.edition}, {len(handout.regions)} TODOs:")
    for region in handout.regions:
        print(f"  {region.todo}  ({todo_component(region.todo)})")
    print(f"installed part: {WHEELS}/{handout.wheel.name} ({len(handout.layout.machinery)} files; left out: "
          f"{', '.join(handout.layout.withheld) or 'none'})")
    for job, checked in handout.job_checks.items():
        print(f"  python -m {job}: {checked}")
    print(handout.leak_report.summary())
    return 0


if __name__ == "__main__":
    sys.exit(main())
