"""Grade a submission with the staff's graded tests and write Gradescope's results.json.

    python -m grading.grade                                   grade this checkout (the reference: full marks)
    python -m grading.grade --submission ../student --out results.json
    python -m grading.grade --submission DIR --components attention layer --timeout 10

The submission contributes only the Python files of its packages (minbert/, optim/, tasks/, pretrain/).
Everything else comes from the staff copy beside this grader: tests/conftest.py, tests/graded/ (hidden
tests included), setup.cfg. So a submission that edits the tests, adds a conftest.py or changes the pytest
settings is graded exactly as if it had not. A package file the submission lacks is taken from the staff
copy with its solution regions stubbed out, so it earns nothing.

Points, components and visibility are pytest markers on the tests (see grading/config.py). Each test earns
its points when it passes and nothing otherwise; a component's score is the sum of its tests'. A test that
runs past --timeout seconds, crashes the interpreter or floods the output fails alone (grading/runner.py).

Read next: schema.py (the results.json format), handout.py.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from grading.config import (COMPONENTS, DEFAULT_VISIBILITY, GRADED_TESTS, SUBMITTED_PACKAGES, VISIBILITIES)
from grading.regions import RegionError, strip_regions
from grading.runner import TestResult, collect, run_tests
from grading.schema import validate

STAFF_ROOT = Path(__file__).resolve().parents[1]
OUTPUT_LIMIT = 8000  # characters of a test's output in results.json
STDOUT_VISIBILITY = "hidden"  # the autograder's own stdout: staff only


@dataclass(frozen=True)
class GradedTest:
    nodeid: str
    component: str
    points: float
    visibility: str
    doc: str

    @property
    def hidden_from_handout(self) -> bool:
        return self.nodeid.startswith(f"{GRADED_TESTS}/hidden/")


# ----- the staff's tests ---------------------------------------------------------------------------


@functools.lru_cache(maxsize=4)
def graded_tests(staff: Path = STAFF_ROOT) -> tuple[GradedTest, ...]:
    """Every graded test of the staff copy, with its component, points and visibility, checked."""
    items, errors = collect(staff, [GRADED_TESTS])
    if errors:
        raise RuntimeError("the staff's graded tests do not collect:\n" + "\n".join(errors.values()))
    tests, problems = [], []
    for item in items:
        nodeid, component, points = item["nodeid"], item["component"], item["points"]
        visibility = item["visibility"] or DEFAULT_VISIBILITY
        if component not in COMPONENTS:
            problems.append(f"{nodeid}: component {component!r} is not one of {sorted(COMPONENTS)} "
                            "(pytestmark = pytest.mark.component(...))")
        if not isinstance(points, (int, float)) or isinstance(points, bool) or points <= 0:
            problems.append(f"{nodeid}: needs @pytest.mark.points(N) with N > 0, got {points!r}")
        if visibility not in VISIBILITIES:
            problems.append(f"{nodeid}: visibility {visibility!r} is not one of {VISIBILITIES}")
        tests.append(GradedTest(nodeid, component, float(points or 0), visibility, item.get("doc", "")))
    missing = [c for c in COMPONENTS if not any(t.component == c for t in tests)]
    if missing:
        problems.append(f"components without a graded test: {missing}")
    if problems:
        raise RuntimeError("graded tests are misdeclared:\n  " + "\n  ".join(problems))
    return tuple(tests)


# ----- the staging tree ----------------------------------------------------------------------------


def find_submission_root(submission: Path) -> Path:
    """The folder holding the packages: the submission itself, or one level or two below (a zip's folder)."""
    candidates = [submission] + sorted(p for p in submission.glob("*") if p.is_dir()) + sorted(
        p for p in submission.glob("*/*") if p.is_dir())
    for candidate in candidates:
        if any((candidate / package / "__init__.py").is_file() for package in SUBMITTED_PACKAGES[:3]):
            return candidate
    return submission


def stage(submission: Path, staff: Path, where: Path) -> list[str]:
    """Build the tree the tests run in; return notes for the student (files taken from the handout)."""
    notes: list[str] = []
    root = find_submission_root(submission)
    if root != submission:
        notes.append(f"found the submitted packages in {root.relative_to(submission)}/")
    shutil.copy(staff / "setup.cfg", where / "setup.cfg")
    (where / "tests").mkdir()
    shutil.copy(staff / "tests" / "conftest.py", where / "tests" / "conftest.py")
    shutil.copytree(staff / GRADED_TESTS, where / GRADED_TESTS,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for package in SUBMITTED_PACKAGES:
        staff_files = {p.relative_to(staff).as_posix() for p in (staff / package).rglob("*.py")
                       if "__pycache__" not in p.parts}
        theirs = {p.relative_to(root).as_posix() for p in (root / package).rglob("*.py")
                  if "__pycache__" not in p.parts} if (root / package).is_dir() else set()
        for relative in sorted(staff_files | theirs):
            target = where / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            if relative in theirs:
                shutil.copy(root / relative, target)
                continue
            text = (staff / relative).read_text(encoding="utf-8")
            try:
                stubbed, regions = strip_regions(text, relative)
            except RegionError:
                stubbed, regions = text, []
            target.write_text(stubbed, encoding="utf-8")
            if regions:
                notes.append(f"{relative} is missing from the submission: graded with the handout's stubs")
    return notes


# ----- grading ----------------------------------------------------------------------------------------


def grade(submission: Path, *, staff: Path = STAFF_ROOT, time_limit: float = 30.0,
          components: list[str] | None = None, python: str | None = None) -> dict:
    """Grade `submission` and return the results.json dictionary (validated against the schema)."""
    began = time.monotonic()
    tests = [t for t in graded_tests(staff) if components is None or t.component in components]
    print(f"grading: running {len(tests)} graded tests on {submission}", file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(prefix="minbert-stage-") as where:
        where = Path(where)
        notes = stage(Path(submission).resolve(), staff, where)
        results = run_tests(where, [t.nodeid for t in tests], time_limit=time_limit, python=python,
                            expect_modules_under=where)
    return build_results(tests, results, notes, time.monotonic() - began)


def build_results(tests: list[GradedTest], results: dict[str, TestResult], notes: list[str],
                  seconds: float) -> dict:
    entries, per_component = [], {}
    order = list(COMPONENTS)
    counters: dict[str, int] = {}
    for test in sorted(tests, key=lambda t: order.index(t.component)):
        counters[test.component] = number = counters.get(test.component, 0) + 1
        result = results[test.nodeid]
        passed = result.outcome == "passed"
        score = test.points if passed else 0.0
        got, total = per_component.get(test.component, (0.0, 0.0))
        per_component[test.component] = (got + score, total + test.points)
        name = test.nodeid.split("::", 1)[1]
        output = "" if passed else f"{result.outcome}: {result.text}"
        if test.doc:
            output = f"{test.doc}\n{output}" if output else test.doc
        entries.append({
            "name": f"{test.component}: {name}",
            "number": f"{order.index(test.component) + 1}.{number}",
            "score": score,
            "max_score": test.points,
            "status": "passed" if passed else "failed",
            "output": _cut(output, OUTPUT_LIMIT),
            "visibility": test.visibility,
            "tags": [test.component],
        })
    lines = ["Score by component (TODOs in brackets):"]
    for component, (got, total) in per_component.items():
        lines.append(f"  {component:<12} {got:g} / {total:g}   [{', '.join(COMPONENTS[component])}]")
    lines += [f"Note: {note}" for note in notes]
    results_json = {
        "score": sum(e["score"] for e in entries),
        "execution_time": int(round(seconds)),
        "output": "\n".join(lines),
        "visibility": "visible",
        "stdout_visibility": STDOUT_VISIBILITY,
        "tests": entries,
    }
    validate(results_json)
    return results_json


def component_scores(results_json: dict) -> dict[str, tuple[float, float]]:
    """{component: (score, max score)} from a results.json dictionary."""
    scores: dict[str, tuple[float, float]] = {}
    for test in results_json["tests"]:
        component = test["tags"][0]
        got, total = scores.get(component, (0.0, 0.0))
        scores[component] = (got + test["score"], total + test["max_score"])
    return scores


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit // 2]}\n... [{len(text) - limit} characters cut] ...\n{text[-limit // 2:]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grading.grade", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--submission", type=Path, default=None,
                        help="the student's repository (default: /autograder/submission when it exists, "
                             "else this checkout)")
    parser.add_argument("--out", type=Path, default=Path("results.json"),
                        help="where to write Gradescope's results.json (default: ./results.json)")
    parser.add_argument("--timeout", type=float, default=30.0,
                        help="seconds one test may run before it fails (default: 30)")
    parser.add_argument("--components", nargs="+", choices=sorted(COMPONENTS), default=None,
                        help="grade only these components (default: all)")
    parser.add_argument("--staff", type=Path, default=STAFF_ROOT,
                        help="the staff copy whose tests are used (default: the checkout holding "
                             "this grader)")
    args = parser.parse_args(argv)
    submission = args.submission
    if submission is None:
        gradescope = Path("/autograder/submission")
        submission = gradescope if gradescope.is_dir() else STAFF_ROOT
    if not submission.is_dir():
        parser.error(f"--submission {submission} is not a directory")
    try:
        results = grade(submission, staff=args.staff.resolve(), time_limit=args.timeout,
                        components=args.components)
    except Exception as error:  # a grader failure still leaves a valid results.json behind
        results = {"score": 0.0, "execution_time": 0, "visibility": "visible",
                   "stdout_visibility": STDOUT_VISIBILITY, "tests": [],
                   "output": f"The autograder failed ({type(error).__name__}: {error}). This is not your "
                             "fault: please tell the course staff."}
        print(results["output"], file=sys.stderr)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_name(args.out.name + ".tmp")
    tmp.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, args.out)
    print(results["output"])
    total = sum(t["max_score"] for t in results["tests"])
    print(f"Total: {results['score']:g} / {total:g}  ->  {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
