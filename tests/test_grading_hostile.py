"""Hostile submissions: a handout that computes nothing, plus a trick that tries to raise its grade.

Each trick sits in the cosine TODO (or at the top of its file) of an otherwise untouched handout, returns
zeros instead of raising, and must score 0 of the cosine tests' 6 points: the verdict is decided in the
grader's process from what the child recorded, against the reference's run (grading/grade.py, decide),
and the child's copy of the tests computes no expected value (grading/strip.py). The tricks are those of
the grading report of 2026-12-01 (patching pytest from an import, rewriting a graded helper's code,
replacing torch's functions, a detached process that rewrites results.json after the grader exits,
importing the staff solution through /proc/<grader>/cwd, processes left alive) and their neighbours (recording what a check expects
instead of what was computed, reading it from the test's frames, forging the child's event stream,
properties alone, writing into the staging tree). Where the grader runs as root the child is another
user (GRADING_USER, nobody), and the tests that need that skip elsewhere, saying why.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from grading.config import COMPONENTS, SUBMITTED_PACKAGES
from grading.grade import STAFF_ROOT, component_scores, grade
from grading.runner import child_user
from grading.regions import strip_regions

TODO = COMPONENTS["cosine"][0]
FILE = TODO.split("::")[0]
ZEROS = "    return torch.zeros(u.shape[:-1], dtype=u.dtype)\n"
ROOT = child_user() is not None  # root, and another user can run this environment
NEEDS_ROOT = pytest.mark.skipif(not ROOT, reason="the child runs as another user only where the grader is "
                                "root and that user can run the environment (as on Gradescope); here it is "
                                "this user, and nothing holds against it")


def submission(at: Path, body: str = "", top: str = "") -> Path:
    """The handout's cosine file in a copy of the packages, its TODO replaced by `body` then zeros, `top`
    after its `from __future__` import (its first statement). Folders readable by another user (the child
    runs as one where we are root)."""
    for package in SUBMITTED_PACKAGES:
        shutil.copytree(STAFF_ROOT / package, at / package, ignore=shutil.ignore_patterns("__pycache__"))
    path = at / FILE
    stub, _ = strip_regions(path.read_text(), FILE, frozenset({TODO}))
    line = f'    raise NotImplementedError("TODO: {TODO}")\n'
    assert stub.count(line) == 1
    future = "from __future__ import annotations\n"  # `top` after it: before it, the file would not compile
    assert stub.count(future) == 1
    stub = stub.replace(future, future + textwrap.dedent(top))
    path.write_text(stub.replace(line, textwrap.indent(textwrap.dedent(body), "    ") + ZEROS))
    compile(path.read_text(), str(path), "exec")  # a trick that cannot run proves nothing
    return at


@pytest.fixture
def where():
    """A folder outside pytest's (whose base is 0700), open to the child's user."""
    folder = Path(tempfile.mkdtemp(prefix="minbert-hostile-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def cosine_score(sub: Path) -> float:
    return component_scores(grade(sub, components=["cosine"], time_limit=10.0))["cosine"][0]


HELPERS = "        import graded_helpers, verdict\n"  # at the bodies' indentation (dedented with them)
TRICKS = {
    # reported 2026-12-01: the test "passes" without running
    "pytest's Function.runtest patched at import": dict(
        top="import _pytest.python\n_pytest.python.Function.runtest = lambda self: None\n"),
    # reported 2026-12-01: the helpers decide nothing
    "the graded helpers' __code__ rewritten": dict(body=HELPERS + """
        for name in ("check_close", "check_value", "check_equal", "check_that", "fail"):
            getattr(graded_helpers, name).__code__ = (lambda *a, **k: None).__code__
        """),
    # reported 2026-12-01: the comparisons all say yes
    "F.cosine_similarity and torch.allclose replaced": dict(body="""
        import torch.nn.functional as F
        F.cosine_similarity = lambda a, b, *rest, **options: torch.zeros(a.shape[:-1], dtype=a.dtype)
        torch.allclose = lambda *a, **k: True
        torch.equal = lambda *a, **k: True
        """),
    # neighbours: what a check expects, recorded as what was computed
    "each check records its expected value": dict(body=HELPERS + """
        graded_helpers._check = lambda kind, actual, expected: graded_helpers._record(
            kind=kind, actual=verdict.encode(expected.get("expected")))
        """),
    "each check records the test's other tensors (its frames' locals)": dict(body=HELPERS + """
        import sys
        def snoop(kind, actual, expected):
            frame, seen = sys._getframe(1), []
            while frame is not None:
                seen += [v for v in frame.f_locals.values() if isinstance(v, torch.Tensor) and v is not actual
                         and isinstance(actual, torch.Tensor) and v.shape == actual.shape]
                frame = frame.f_back
            graded_helpers._record(kind=kind, actual=verdict.encode(seen[0] if seen else actual))
        graded_helpers._check = snoop
        """),
    "checks forged on the event stream, properties all true": dict(body=HELPERS + """
        import json, os
        def forge(kind, actual, expected):
            fd = int(os.environ["MINBERT_GRADING_EVENTS_FD"])
            for value in (True, 1.0, 0.0):
                os.write(fd, (json.dumps({"event": "check", "kind": kind, "actual": verdict.encode(value)})
                              + "\\n").encode())
        graded_helpers._check = forge
        graded_helpers.check_that = lambda condition, message: graded_helpers._record(
            kind="that", actual=verdict.encode(True), message="")
        """),
    "the staging tree's helpers rewritten for the next test process": dict(body="""
        import os, pathlib
        helpers = pathlib.Path(os.getcwd()) / "tests" / "graded" / "graded_helpers.py"
        try:
            source = helpers.read_text()
            helpers.write_text(source.replace('MODE = os.environ.get("MINBERT_GRADING_RECORD", "")',
                                              'MODE = "local"'))
        except OSError:
            pass
        os._exit(1)  # the grader starts a new child for the tests left
        """),
}


@pytest.mark.slow
@pytest.mark.parametrize("trick", list(TRICKS), ids=lambda name: name.replace(" ", "-")[:40])
def test_a_trick_in_the_child_raises_no_grade(trick, where):
    assert cosine_score(submission(where / "sub", **TRICKS[trick])) == 0


@pytest.mark.slow
def test_the_reference_with_the_same_zeros_elsewhere_still_earns_its_points(where):
    # The control: the probe's harness grades a working cosine as working (the tricks' 0 is theirs).
    sub = submission(where / "sub", body="return (u * v).sum(-1) / (u.norm(dim=-1) * "
                                         "v.norm(dim=-1)).clamp(min=eps)\n")
    assert cosine_score(sub) == 6


# ----- what outlives the child -------------------------------------------------------------------------

DAEMON = """
    import os, sys, time
    marker = {marker!r}
    if os.fork() == 0:  # double fork and setsid: a daemon that init, not the test, would adopt
        os.setsid()
        if os.fork() == 0:
            def cmdline(p):
                try:
                    return open(f"/proc/{{p}}/cmdline", "rb").read()
                except OSError:
                    return b""
            grader = [p for p in os.listdir("/proc") if p.isdigit() and b"grading.grade" in cmdline(p)]
            out = {out!r}
            for _ in range(600):
                with open(marker, "a") as f:  # alive
                    f.write(".")
                if all(not os.path.exists(f"/proc/{{p}}") for p in grader):
                    try:  # the grader is gone: rewrite its results
                        with open(out, "w") as f:
                            f.write('{{"score": 100.0, "tests": [], "output": "hacked"}}')
                    except OSError:
                        pass
                time.sleep(0.05)
        os._exit(0)
    """


def run_grader(sub: Path, out: Path) -> subprocess.CompletedProcess:
    """The grader as Gradescope runs it: its own process, started from the staff tree."""
    return subprocess.run([sys.executable, "-m", "grading.grade", "--submission", str(sub), "--out", str(out),
                           "--components", "cosine", "--timeout", "10"], cwd=STAFF_ROOT, capture_output=True,
                          text=True, timeout=600)


@pytest.mark.slow
def test_a_detached_process_is_killed_before_the_grader_writes_its_results(where):
    marker, out = where / "alive", where / "results" / "results.json"
    os.chmod(where, 0o777)  # the child's user may write its marker here
    sub = submission(where / "sub", body=DAEMON.format(marker=str(marker), out=str(out)))
    assert run_grader(sub, out).returncode == 0
    results = json.loads(out.read_text())
    assert results["score"] == 0 and "hacked" not in out.read_text()
    assert marker.exists(), "the daemon never ran: the probe proves nothing"
    size = marker.stat().st_size
    time.sleep(1.0)
    assert marker.stat().st_size == size, "the daemon is still alive after the grader exited"
    assert json.loads(out.read_text())["score"] == 0


LEFTOVERS = """
    import subprocess
    subprocess.Popen(["sleep", "{marker}"])  # a child left running
    subprocess.Popen(["setsid", "sh", "-c", "sleep {marker} & sleep {marker}"], start_new_session=True)
    """


@pytest.mark.slow
def test_no_process_of_the_submission_outlives_its_grading(where):
    marker = f"{300 + os.getpid() % 1000}.{time.time_ns() % 10**6:06d}"  # a sleep no one else runs
    assert cosine_score(submission(where / "sub", body=LEFTOVERS.format(marker=marker))) == 0
    assert not running(marker), f"processes left alive: {running(marker)}"


def running(marker: str) -> list[str]:
    """The processes whose command line holds `marker`."""
    alive = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                alive.append(pid)
        except OSError:
            continue
    return alive


STEAL = """
    import importlib.util, os
    pid, found = os.getpid(), None
    while pid > 1 and found is None:  # the ancestors' working directories, up to the grader's
        candidate = f"/proc/{pid}/cwd/{file}"
        try:
            if os.path.exists(candidate) and "BEGIN SOLUTION" in open(candidate).read():
                found = candidate
            if b"grading.grade" in open(f"/proc/{pid}/cmdline", "rb").read():
                break  # beyond the grader lie whoever started it (a shell), which it does not choose
        except OSError:
            pass
        pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
    if found:
        spec = importlib.util.spec_from_file_location("staff_solution", found)
        staff = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(staff)
        return staff.cosine_similarity(u, v, eps)
    """


@pytest.mark.slow
def test_the_staff_solution_cannot_be_imported_through_the_graders_working_directory(where):
    out = where / "results.json"
    sub = submission(where / "sub", body=STEAL.replace("{file}", FILE))
    run = run_grader(sub, out)
    assert run.returncode == 0, run.stderr[-2000:]
    assert json.loads(out.read_text())["score"] == 0


@NEEDS_ROOT
def test_the_child_runs_as_another_user_without_root_groups(where):
    sub = submission(where / "sub", body="""
        import os
        if os.geteuid() == 0 or os.getgroups() or os.getsid(0) != os.getpid():
            return (u * v).sum(-1) / (u.norm(dim=-1) * v.norm(dim=-1)).clamp(min=eps)
        """)
    assert cosine_score(sub) == 0  # as root, with a group, or in the grader's session it would score 6
