"""Grade a submission with the staff's graded tests and write Gradescope's results.json.

    python -m grading.grade                                   grade this checkout (the reference: full marks)
    python -m grading.grade --submission ../student --out results.json
    python -m grading.grade --submission DIR --edition full   the edition the handout was built for
    python -m grading.grade --submission DIR --components attention layer --timeout 10

The submission contributes only its lesson files (layout.py: minbert/'s and optim/'s, in the student's
handout). Everything else comes from the staff copy beside this grader: tests/conftest.py, tests/graded/
(hidden tests included), setup.cfg, and the machinery (the staff tree's, or the installed wheel on
Gradescope). So a submission that edits the tests, adds a conftest.py, changes the pytest settings or edits
the installed part is graded exactly as if it had not. A lesson file the submission lacks is taken from the
staff copy with the edition's solution regions stubbed out, so it earns nothing there.

Only the tests of the edition's components run (config.py EDITIONS; the handout is built for one edition).
Points, components and visibility are pytest markers on the tests (see grading/config.py). Each test earns
its points when it passes and nothing otherwise; a component's score is the sum of its tests'. A test that
runs past --timeout seconds, crashes the interpreter or floods the output fails alone (grading/runner.py).

What a student reads for a failed test: the test's docstring line, the failure's message (the graded tests
say what is wrong in the student's terms), and for a visible test its short traceback and captured output.
A hidden test shows the test's own message and where in the student's code it was raised, never its source
or output, nor the message of an exception raised while the student's code ran (their code chooses it, and
could quote the hidden tests it read). Paths of the grader, the staging folder and the Python installation,
and the lines of the hidden tests, are cut out of everything written.

Read next: schema.py (the results.json format), handout.py.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import importlib.util
import json
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from grading.config import (COMPONENTS, DEFAULT_EDITION, DEFAULT_VISIBILITY, EDITIONS, GRADED_TESTS,
                            SUBMITTED_PACKAGES, VISIBILITIES, WHOLE_MODEL, edition_components, edition_todos)
from grading.layout import layout
from grading.regions import RegionError, strip_regions
from grading.runner import TestResult, collect, run_tests
from grading.schema import validate
from grading.strip import strip_source, strip_tensors
from tasks.training.flags import existing_dir, nonempty, output_file, positive

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
    todo: str = ""  # the TODO it checks, one of its component's

    @property
    def hidden_from_handout(self) -> bool:
        return self.nodeid.startswith(f"{GRADED_TESTS}/hidden/")

    @property
    def file(self) -> str:
        return self.nodeid.split("::", 1)[0]


# ----- the staff's tests ---------------------------------------------------------------------------


@functools.lru_cache(maxsize=4)
def graded_tests(staff: Path = STAFF_ROOT) -> tuple[GradedTest, ...]:
    """Every graded test of the staff copy, with its component, points and visibility, checked."""
    items, errors = collect(staff, [GRADED_TESTS])
    if errors:
        raise RuntimeError("the staff's graded tests do not collect:\n" + "\n".join(errors.values()))
    tests, problems = [], []
    file_component: dict[str, str] = {}
    for item in items:
        nodeid, component, points = item["nodeid"], item["component"], item["points"]
        visibility = item["visibility"] or DEFAULT_VISIBILITY
        todo = ""
        if component not in COMPONENTS:
            problems.append(f"{nodeid}: component {component!r} is not one of {sorted(COMPONENTS)} "
                            "(pytestmark = pytest.mark.component(...))")
        else:
            todo, problem = _resolve_todo(nodeid, component, item.get("todo"))
            if problem:
                problems.append(problem)
        if not isinstance(points, (int, float)) or isinstance(points, bool) or points <= 0:
            problems.append(f"{nodeid}: needs @pytest.mark.points(N) with N > 0, got {points!r}")
        if visibility not in VISIBILITIES:
            problems.append(f"{nodeid}: visibility {visibility!r} is not one of {VISIBILITIES}")
        test = GradedTest(nodeid, component, float(points or 0), visibility, item.get("doc", ""), todo)
        if file_component.setdefault(test.file, component) != component:
            problems.append(f"{nodeid}: {test.file} mixes components {file_component[test.file]!r} and "
                            f"{component!r}; one file per component (an edition ships or drops whole files)")
        tests.append(test)
    missing = [c for c in COMPONENTS if not any(t.component == c for t in tests)]
    if missing:
        problems.append(f"components without a graded test: {missing}")
    if problems:
        raise RuntimeError("graded tests are misdeclared:\n  " + "\n  ".join(problems))
    return tuple(tests)


def _resolve_todo(nodeid: str, component: str, declared: str | None) -> tuple[str, str]:
    """(the TODO a test checks, a problem or ""): @pytest.mark.todo names it in full, as Class.method or
    by its last name, unique within the component. A whole-model component's tests check no one TODO: ""."""
    todos = COMPONENTS[component]
    if component in WHOLE_MODEL:
        return "", (f"{nodeid}: {component!r} checks the whole model, no one TODO; drop its @pytest.mark.todo"
                    if declared is not None else "")
    if declared is None:
        if len(todos) == 1:
            return todos[0], ""
        names = [t.split("::", 1)[1] for t in todos]
        return "", (f"{nodeid}: component {component!r} has several TODOs; say which one the test checks "
                    f"with @pytest.mark.todo(NAME), NAME one of {names}")
    matches = [t for t in todos  # in full, as Class.method, or by its last name
               if declared in (t, t.split("::", 1)[1]) or t.endswith(f".{declared}")]
    if len(matches) != 1:
        return "", f"{nodeid}: todo {declared!r} is not one of the TODOs of {component!r}: {list(todos)}"
    return matches[0], ""


# ----- the staging tree ----------------------------------------------------------------------------


def find_submission_root(submission: Path) -> Path:
    """The folder holding the packages: the submission itself, or one level or two below (a zip's folder)."""
    candidates = [submission] + sorted(p for p in submission.glob("*") if p.is_dir()) + sorted(
        p for p in submission.glob("*/*") if p.is_dir())
    for candidate in candidates:
        if any((candidate / package / "__init__.py").is_file() for package in SUBMITTED_PACKAGES[:3]):
            return candidate
    return submission


def stage(submission: Path, staff: Path, where: Path, edition: str = DEFAULT_EDITION) -> list[str]:
    """Build the tree the tests run in; return notes for the student (files taken from the handout).

    The submission contributes the lesson (layout.py); a lesson file it lacks is the staff's with the
    edition's TODOs stubbed. The machinery is the staff tree's where it holds it (this repository); the
    autograder's archive holds none, and there the wheel setup.sh installed provides it (the lesson's
    packages extend their __path__ with its folders).
    """
    notes: list[str] = []
    root = find_submission_root(submission)
    if root != submission:
        notes.append(f"found the submitted packages in {root.relative_to(submission)}/")
    shutil.copy(staff / "setup.cfg", where / "setup.cfg")
    (where / "tests").mkdir()
    shutil.copy(staff / "tests" / "conftest.py", where / "tests" / "conftest.py")
    for path in sorted((staff / GRADED_TESTS).rglob("*")):  # without what they expect (strip.py)
        target = where / path.relative_to(staff)
        if path.is_dir() or "__pycache__" in path.parts or path.name in STAFF_SCRIPTS:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix == ".py":
            target.write_text(strip_source(path.read_text(encoding="utf-8")), encoding="utf-8")
        elif path.suffix == ".safetensors":
            strip_tensors(path, target)
        else:
            shutil.copy(path, target)
    split = layout(staff, edition)
    for relative in split.lesson + tuple(f for f in split.machinery if f.split("/")[0] in SUBMITTED_PACKAGES):
        target = where / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if relative not in split.lesson:
            shutil.copy(staff / relative, target)
        elif (root / relative).is_file():
            shutil.copy(root / relative, target)
        else:
            text = (staff / relative).read_text(encoding="utf-8")
            try:
                stubbed, regions = strip_regions(text, relative, edition_todos(edition))
            except RegionError:
                stubbed, regions = text, []
            target.write_text(stubbed, encoding="utf-8")
            if regions:
                notes.append(f"{relative} is missing from the submission: graded with the handout's stubs")
    return notes


STAFF_SCRIPTS = ("make_references.py",)  # not tests: it writes the stored outputs out of the solutions


# ----- the reference's run ------------------------------------------------------------------------------

EXPECTATIONS = "grading/expectations.json"  # the reference's run, as the autograder archive stores it
_expectations: dict[Path, dict[str, list[dict]]] = {}
_expectations_lock = threading.Lock()


def expectations(staff: Path = STAFF_ROOT, nodeids: list[str] | None = None) -> dict[str, list[dict]]:
    """nodeid -> what each check of the test expects, in order (graded_helpers: the reference's run), for
    `nodeids` (default: every graded test). The autograder archive stores them (it holds no solution to
    run); a staff checkout runs its own graded tests on its own packages, each once per process."""
    nodeids = [t.nodeid for t in graded_tests(staff)] if nodeids is None else nodeids
    with _expectations_lock:
        known = _expectations.setdefault(staff, {})
        stored = staff / EXPECTATIONS
        if not known and stored.is_file():
            known.update(json.loads(stored.read_text(encoding="utf-8")))
        missing = [n for n in nodeids if n not in known]
        if missing:
            known.update(reference_run(staff, missing))
        return {n: known[n] for n in nodeids}


def reference_run(staff: Path, nodeids: list[str]) -> dict[str, list[dict]]:
    results = run_tests(staff, nodeids, extra_env={"MINBERT_GRADING_RECORD": "expected"},
                        expect_modules_under=staff)
    # A test passes on values the child cannot know: one check of a value, not properties only (check_that).
    wrong = [f"{n}: {r.outcome} {r.exc_msg or r.text[:500]}" for n, r in results.items()
             if r.outcome != "passed" or not any(check.get("kind") != "that" for check in r.checks)]
    if wrong:
        raise RuntimeError("grader error: the reference does not pass its graded tests, or one checks no "
                           "value (only properties, check_that):\n" + "\n".join(wrong))
    return {nodeid: results[nodeid].checks for nodeid in nodeids}


@functools.lru_cache(maxsize=4)
def verdict_module(staff: Path = STAFF_ROOT):
    """tests/graded/verdict.py of the staff copy: how a check is decided, the same code a student's run
    uses (it imports torch and safetensors only)."""
    path = staff / GRADED_TESTS / "verdict.py"
    spec = importlib.util.spec_from_file_location("minbert_graded_verdict", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def decide(result: TestResult, expected: list[dict], verdict) -> TestResult:
    """The submission's result for one test, decided here: its checks in order against the reference's
    (the first that fails is the one a student reads), then the test's own end (an exception, a fail(), a
    crash, a timeout); a test that ends without making every check fails."""
    for number, record in enumerate(result.checks):
        if number == len(expected):
            return _failed(result, f"the test made more checks than its {len(expected)}: it did not run "
                           "as written")
        want = expected[number]
        if not isinstance(record, dict) or record.get("kind") != want["kind"]:
            return _failed(result, f"check {number + 1} of the test is not the one it makes there: the "
                           "test did not run as written")
        # a property's message is the child's: it quotes what the child computed (check_that)
        what = str(record.get("message") or want["what"])[:4000] if want["kind"] == "that" else want["what"]
        message = verdict.failure(want["kind"], verdict.decode(record.get("actual") or {}), {
            **want, "expected": verdict.decode(want["expected"]), "what": what,
            "mistakes": [(verdict.decode(wrong), why) for wrong, why in want.get("mistakes") or ()]})
        if message:
            return _failed(result, message, f"(checked at {want['line']})")
    if result.outcome == "passed" and len(result.checks) < len(expected):
        return _failed(result, f"the test ended after {len(result.checks)} of its {len(expected)} checks "
                       "without failing: it did not run as written")
    return result


def _failed(result: TestResult, message: str, text: str = "") -> TestResult:
    return dataclasses.replace(result, outcome="failed", exc_type="AssertionError", exc_msg=message, where=[],
                               text=text)


# ----- grading ----------------------------------------------------------------------------------------


def grade(submission: Path, *, staff: Path = STAFF_ROOT, time_limit: float = 30.0,
          components: list[str] | None = None, edition: str = DEFAULT_EDITION) -> dict:
    """Grade `submission` for `edition` and return the results.json dictionary (validated against the
    schema). components: a subset of the edition's to grade (default: all of them)."""
    began = time.monotonic()
    order = edition_components(edition)
    outside = [c for c in components or () if c not in order]
    if outside:
        raise ValueError(f"components {outside} are not graded in edition {edition!r} (it grades "
                         f"{list(order)})")
    tests = [t for t in graded_tests(staff)
             if t.component in order and (components is None or t.component in components)]
    print(f"grading: running {len(tests)} graded tests of edition {edition} on {submission}", file=sys.stderr,
          flush=True)
    with tempfile.TemporaryDirectory(prefix="minbert-stage-") as where, ThreadPoolExecutor(1) as pool:
        where = Path(where)
        os.chmod(where, 0o755)  # the child's user reads it (and writes nothing there)
        notes = stage(Path(submission).resolve(), staff, where, edition)
        expected = pool.submit(expectations, staff, [t.nodeid for t in tests])  # beside the child
        results = run_tests(where, [t.nodeid for t in tests], time_limit=time_limit, untrusted=True,
                            extra_env={"MINBERT_GRADING_RECORD": "actual"}, expect_modules_under=where)
        verdict, expected = verdict_module(staff), expected.result()
        results = {t.nodeid: decide(results[t.nodeid], expected[t.nodeid], verdict) for t in tests}
        withheld, originals = hidden_code(staff), stripped_lines(staff)

        def scrub(text: str) -> str:
            return withhold(restore(scrub_paths(text, where, staff), originals), withheld)

        return build_results(tests, results, notes, time.monotonic() - began, order, scrub)


def scrub_paths(text: str, where: Path, staff: Path) -> str:
    """`text` without the paths of the Python installation, the staging tree and the grader, in that order
    (a virtual environment may lie inside the grader's checkout): installed packages read
    `<installed>/torch/...`, the standard library `<python>/...`, the staging tree's files relative paths,
    the grader `<grader>/...`."""
    text = _SITE_PACKAGES.sub("<installed>/", text)
    for prefix in sorted({sys.prefix, sys.base_prefix, sys.exec_prefix}, key=len, reverse=True):
        text = text.replace(f"{prefix}{os.sep}", "<python>/")
    text = _PYTHON_LIB.sub("<python>/", text)
    for root, shown in ((where, ""), (staff, "<grader>/")):
        for path in (root, root.resolve()):
            text = text.replace(f"{path}{os.sep}", shown)
    return _TEMPORARY.sub("<tmp>/", text)


_SITE_PACKAGES = re.compile(r"[^\s\"'(<]*[/\\](?:site|dist)-packages[/\\]")
_PYTHON_LIB = re.compile(r"[^\s\"'(<]*[/\\]lib[/\\]python3(?:\.\d+)?[/\\]")
_TEMPORARY = re.compile(r"[^\s\"'(<]*[/\\]minbert-(?:grading|stage)-[^/\\\s]*[/\\]")


@functools.lru_cache(maxsize=4)
def hidden_code(staff: Path = STAFF_ROOT) -> tuple[str, ...]:
    """The lines of the hidden tests that no shipped file holds, longest first: cut out of every output,
    should the student's code, which runs beside the hidden tests and can read them, print or raise their
    text (a copy made unrecognisable still gets through; docs/teaching.md, What students see)."""
    def lines(paths) -> set[str]:
        return {line.strip() for path in paths for line in path.read_text(encoding="utf-8").splitlines()}

    shipped = lines((staff / GRADED_TESTS).glob("*.py")) | lines([staff / "tests" / "conftest.py"])
    files = list((staff / GRADED_TESTS / "hidden").rglob("*.py"))
    hidden = lines(files) | {line.strip() for path in files  # and as the child's copy has them (strip.py)
                             for line in strip_source(path.read_text(encoding="utf-8")).splitlines()}
    return tuple(sorted((line for line in hidden - shipped if len(line) >= HIDDEN_LINE_MIN), key=len,
                        reverse=True))


@functools.lru_cache(maxsize=4)
def stripped_lines(staff: Path = STAFF_ROOT) -> dict[str, str]:
    """A shipped test's line as the child's copy has it -> as the student's copy has it, where they differ
    and the child's is found once: a visible test's traceback shows the student's own line."""
    pairs: dict[str, set[str]] = {}
    for path in (staff / GRADED_TESTS).glob("*.py"):
        text = path.read_text(encoding="utf-8")
        for mine, theirs in zip(strip_source(text).splitlines(), text.splitlines()):
            if mine != theirs and mine.strip():
                pairs.setdefault(mine.strip(), set()).add(theirs.strip())
    return {mine: theirs.pop() for mine, theirs in pairs.items() if len(theirs) == 1}


def restore(text: str, originals: dict[str, str]) -> str:
    return "\n".join(line[:len(line) - len(line.lstrip())] + originals[line.strip()]
                     if line.strip() in originals else line for line in text.split("\n"))


HIDDEN_LINE_MIN = 20  # characters; shorter lines (`return x`, `)`) say nothing and would cut common text
WITHHELD = "[a line of a hidden test: withheld]"


def withhold(text: str, lines: tuple[str, ...]) -> str:
    for line in lines:
        if line in text:
            text = text.replace(line, WITHHELD)
    return text


def feedback(test: GradedTest, result: TestResult) -> str:
    """What the student reads for one test: its docstring line; if it failed, the failure's message
    first, then (visible tests only) the short traceback and the captured output."""
    lines = [test.doc] if test.doc else []
    if result.outcome != "passed" and test.hidden_from_handout:
        lines += [f"{result.outcome}: {hidden_headline(result)}",
                  "(a hidden test: its code and its output are not shown)"]
    elif result.outcome != "passed":
        lines += [f"{result.outcome}: {headline(result)}", "", result.text]
    return "\n".join(lines)


def hidden_headline(result: TestResult) -> str:
    """A hidden test's failure in words that cannot carry its code. The test's own message, or the
    grader's (a crash, a collection error); but for an exception raised while the student's code ran,
    only its type and place, since its message is the student's to choose and could quote any file
    their code read, the hidden tests included (a handout stub's fixed message excepted)."""
    where = "".join(f"\n  raised at {place}" for place in result.where)
    if result.outcome == "timeout":
        return f"ran past the time limit{where}"
    if result.outcome == "skipped":  # pytest.skip can be called from the student's code too
        return "(its reason is not shown)"
    if result.exc_type is None:  # the runner's words: a crash, a collection error
        return result.text.strip().split("\n")[0]
    if not result.where or (result.exc_type == "NotImplementedError" and result.exc_msg in _STUB_MESSAGES):
        return headline(result)
    return f"{result.exc_type}: its message is not shown (raised in your code during a hidden test){where}"


_STUB_MESSAGES = {f"TODO: {todo}" for todos in COMPONENTS.values() for todo in todos}


def headline(result: TestResult) -> str:
    """The failure's message, without pytest's re-statement of the assert (which quotes the test's code)."""
    if not result.exc_type:
        return result.text.strip().split("\n", 1)[0]
    message: list[str] = []
    for line in (result.exc_msg or "").splitlines():
        if line.startswith("assert ") or line.startswith("AssertionError: assert "):
            break
        message.append(line)
    text = "\n".join(message).strip()
    where = "".join(f"\n  raised at {place}" for place in result.where)
    return f"{result.exc_type}: {text}{where}" if text else f"{result.exc_type}{where}"


def build_results(tests: list[GradedTest], results: dict[str, TestResult], notes: list[str],
                  seconds: float, order: tuple[str, ...] | None = None, scrub=lambda text: text) -> dict:
    entries = []
    order = list(order or COMPONENTS)
    counters: dict[str, int] = {}
    # A component's shipped tests before its hidden ones: the first failure a student reads is one whose
    # code they have and can run.
    for test in sorted(tests, key=lambda t: (order.index(t.component), t.hidden_from_handout)):
        counters[test.component] = number = counters.get(test.component, 0) + 1
        result = results[test.nodeid]
        passed = result.outcome == "passed"
        entries.append({
            "name": f"{test.component}: {test.nodeid.split('::', 1)[1]}",
            "number": f"{order.index(test.component) + 1}.{number}",
            "score": test.points if passed else 0.0,
            "max_score": test.points,
            "status": "passed" if passed else "failed",
            "output": _cut(scrub(feedback(test, result)), OUTPUT_LIMIT),
            "visibility": test.visibility,
            "tags": [test.component],
        })
    lines = ["Score by component (TODOs in brackets):"]
    per_component = component_scores({"tests": entries})
    width = max(map(len, per_component), default=0)
    for component, (got, total) in per_component.items():
        todos = ", ".join(COMPONENTS[component]) or "the whole model: " + ", ".join(WHOLE_MODEL[component])
        lines.append(f"  {component:<{width}}  {got:g} / {total:g}   [{todos}]")
    lines += [f"Note: {scrub(note)}" for note in notes]
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m grading.grade", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--submission", type=existing_dir, default=None,
                        help="the student's repository (default: /autograder/submission when it exists, "
                             "else this checkout)")
    parser.add_argument("--out", type=output_file, default=Path("results.json"),
                        help="where to write Gradescope's results.json (default: ./results.json)")
    parser.add_argument("--timeout", type=positive, default=30.0,
                        help="seconds one test may run before it fails (default: 30)")
    parser.add_argument("--edition", choices=sorted(EDITIONS), default=DEFAULT_EDITION,
                        help="the edition the handout was built for: its components are graded, the rest "
                             f"are not (grading/config.py EDITIONS; default: {DEFAULT_EDITION})")
    parser.add_argument("--components", nargs="+", choices=sorted(COMPONENTS), default=None,
                        help="grade only these of the edition's components (default: all of them)")
    # Not existing_dir: a missing or broken staff copy is a grader failure, which must still leave a valid
    # results.json for Gradescope (grade() raises, main writes the failure); only an empty path is refused.
    parser.add_argument("--staff", type=nonempty, default=STAFF_ROOT,
                        help="the staff copy whose tests are used (default: the checkout holding "
                             "this grader)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.staff, args.out = Path(args.staff).resolve(), Path(args.out).resolve()  # the types check a path
    if args.submission is not None:
        args.submission = Path(args.submission).resolve()
    os.chdir("/")  # no process's working directory points at the staff tree (/proc/<grader>/cwd)
    if args.submission is not None:  # a folder: its type checked that
        submission = Path(args.submission)
    else:
        gradescope = Path("/autograder/submission")
        submission = gradescope if gradescope.is_dir() else STAFF_ROOT
    try:
        results = grade(submission, staff=args.staff, time_limit=args.timeout,
                        components=args.components, edition=args.edition)
    except Exception as error:  # a grader failure still leaves a valid results.json behind
        # The full error for staff (the autograder's stdout is hidden); the student gets it without paths.
        print(f"grading failed: {type(error).__name__}: {error}", file=sys.stderr)
        reason = scrub_paths(f"{type(error).__name__}: {error}", Path(tempfile.gettempdir()), args.staff)
        results = {"score": 0.0, "execution_time": 0, "visibility": "visible",
                   "stdout_visibility": STDOUT_VISIBILITY, "tests": [],
                   "output": f"The autograder failed ({reason[:2000]}). This is not your fault: please tell "
                             "the course staff."}
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
