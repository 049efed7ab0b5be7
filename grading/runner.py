"""Run pytest tests in child processes under a watcher: hangs, crashes and floods of output are contained.

One child runs a whole group of tests (one interpreter start for many tests; importing torch costs
seconds). A watcher reads the child's event stream (plugin.py) and
- kills the child when one test runs past the time limit (pytest-timeout, when installed, fails it
  cleanly first; the kill is the backstop for code that ignores the alarm or hangs inside C);
- when the child dies (crash, os._exit, kill), marks the test that was running as crashed or timed out
  and starts a new child for the tests that had not run yet;
- when the child dies before any test starts (an import that crashes or hangs), splits the group into
  one group per test file, so only the files that cannot be imported lose their tests.
The child's output goes to a file capped by RLIMIT_FSIZE; only its head and tail are read back.

Read next: grade.py.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

PLUGIN_MODULE = "_minbert_grading_plugin"
OUTPUT_LIMIT_BYTES = 64 * 2**20  # RLIMIT_FSIZE of the child: a flood of prints ends it, not the disk
KILL_GRACE_S = 3.0  # beyond the per-test limit, before the watcher kills (pytest-timeout acts first)


@dataclass
class TestResult:
    nodeid: str
    outcome: str  # passed | failed | skipped | timeout | crashed | not run
    text: str = ""  # what went wrong, for the student
    exc_type: str | None = None  # the exception's type name, when a test raised
    exc_msg: str | None = None
    duration: float = 0.0
    where: list[str] = field(default_factory=list)  # frames in the submitted packages, innermost last


@dataclass
class _Session:
    results: dict[str, TestResult] = field(default_factory=dict)
    collected: list[dict] = field(default_factory=list)
    modules: dict[str, str | None] = field(default_factory=dict)
    collect_errors: dict[str, str] = field(default_factory=dict)
    started: list[str] = field(default_factory=list)
    current: str | None = None
    ended: str = "normal"  # normal | crashed | timeout | startup-timeout
    returncode: int | None = None
    output: str = ""


def _has_pytest_timeout(python: str) -> bool:
    if python == sys.executable:
        try:
            import pytest_timeout  # noqa: F401
            return True
        except ImportError:
            return False
    return subprocess.run([python, "-c", "import pytest_timeout"], capture_output=True).returncode == 0


def _tail(path: Path, limit: int = 6000) -> str:
    """The head and tail of a file of any size, decoded leniently."""
    size = path.stat().st_size if path.exists() else 0
    with open(path, "rb") if path.exists() else open(os.devnull, "rb") as f:
        if size <= limit:
            return f.read().decode("utf-8", "replace")
        head = f.read(limit // 3).decode("utf-8", "replace")
        f.seek(size - 2 * limit // 3)
        tail = f.read().decode("utf-8", "replace")
    return f"{head}\n... [{size - limit} bytes cut] ...\n{tail}"


def _limit_output() -> None:  # runs in the child before exec
    import resource
    resource.setrlimit(resource.RLIMIT_FSIZE, (OUTPUT_LIMIT_BYTES, OUTPUT_LIMIT_BYTES))


def _run_session(root: Path, nodeids: list[str], *, time_limit: float, startup_limit: float,
                 python: str, collect_only: bool = False, extra_env: dict | None = None) -> _Session:
    work = Path(tempfile.mkdtemp(prefix="minbert-grading-"))
    try:
        plugin_dir = work / "plugin"
        plugin_dir.mkdir()
        shutil.copy(Path(__file__).with_name("plugin.py"), plugin_dir / f"{PLUGIN_MODULE}.py")
        events, output = work / "events.jsonl", work / "output.txt"
        events.touch()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "MINBERT_GRADING"))}
        env.update(PYTHONPATH=f"{root}{os.pathsep}{plugin_dir}", PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
                   PYTHONDONTWRITEBYTECODE="1", MINBERT_GRADING_EVENTS=str(events), PYTHONHASHSEED="0")
        env.update(extra_env or {})
        command = [python, "-m", "pytest", *nodeids, "-p", PLUGIN_MODULE, "--rootdir", str(root),
                   "-c", str(root / "setup.cfg"), "-p", "no:cacheprovider", "-q", "--no-header",
                   "--tb=short", "--continue-on-collection-errors", "-W", "ignore::DeprecationWarning"]
        if collect_only:
            command.append("--collect-only")
        elif _has_pytest_timeout(python):
            command += ["-p", "pytest_timeout", "--timeout", str(time_limit)]
        session = _Session()
        with open(output, "wb") as out:
            child = subprocess.Popen(command, cwd=root, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                     stderr=subprocess.STDOUT, start_new_session=True,
                                     preexec_fn=_limit_output if os.name == "posix" else None)
            session.returncode = _watch(child, events, session, time_limit, startup_limit)
        session.output = _tail(output)
        return session
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _watch(child: subprocess.Popen, events: Path, session: _Session, time_limit: float,
           startup_limit: float) -> int:
    began = last_event = time.monotonic()
    current_since = 0.0
    offset = 0
    reports: dict[str, list[dict]] = {}
    while True:
        returncode = child.poll()
        with open(events, "rb") as f:
            f.seek(offset)
            chunk = f.read()
        complete = chunk[: chunk.rfind(b"\n") + 1]
        offset += len(complete)
        now = time.monotonic()
        for line in complete.splitlines():
            try:
                event = json.loads(line)
            except (ValueError, RecursionError):  # RecursionError: nested past what json.loads holds
                continue  # not ours (a submission writing to the file): ignore
            if not isinstance(event, dict):
                continue  # not ours either
            last_event = now
            kind = event.get("event")
            if kind == "collected":
                session.collected, session.modules = event["items"], event.get("modules", {})
            elif kind == "collect_error":
                session.collect_errors[event["nodeid"]] = event.get("text", "")
            elif kind == "start":
                session.current, current_since = event["nodeid"], now
                session.started.append(event["nodeid"])
            elif kind == "report":
                reports.setdefault(event["nodeid"], []).append(event)
            elif kind == "finish":
                nodeid = event["nodeid"]
                session.results[nodeid] = _combine(nodeid, reports.pop(nodeid, []))
                session.current = None
        if returncode is not None:
            if returncode < 0 or returncode not in (0, 1, 2, 5) or session.current is not None:
                session.ended = "crashed"
            return returncode
        if session.current is not None and now - current_since > time_limit + KILL_GRACE_S:
            session.ended = "timeout"
        elif session.current is None and now - last_event > startup_limit:
            session.ended = "startup-timeout"  # importing, collecting or between tests for too long
        if session.ended != "normal":
            _kill(child)
            return child.wait()
        time.sleep(0.05 if now - began < 5 else 0.1)


def _kill(child: subprocess.Popen) -> None:
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        child.kill()


def _combine(nodeid: str, reports: list[dict]) -> TestResult:
    """One result from a test's setup, call and teardown reports."""
    duration = sum(r.get("duration") or 0.0 for r in reports)
    for report in reports:
        if report["outcome"] == "failed":
            text = report.get("text", "")
            timed_out = "Timeout" in (report.get("exc_type") or "") or "Timeout >" in text
            outcome = "timeout" if timed_out else "failed"
            if report["when"] != "call":
                text = f"(error in test {report['when']})\n{text}"
            return TestResult(nodeid, outcome, text, report.get("exc_type"), report.get("exc_msg"), duration,
                              report.get("where") or [])
    for report in reports:
        if report["outcome"] == "skipped":
            return TestResult(nodeid, "skipped", f"skipped: {report.get('text', '')}", None, None, duration)
    if any(r["when"] == "call" and r["outcome"] == "passed" for r in reports):
        return TestResult(nodeid, "passed", "", None, None, duration)
    return TestResult(nodeid, "failed", "the test did not report a result", None, None, duration)


def _file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


SPLIT_STARTUP_LIMIT_S = 30.0  # per file, once a whole session hung before its first test


def run_tests(root: Path, nodeids: list[str], *, time_limit: float = 30.0, startup_limit: float = 60.0,
              python: str | None = None, extra_env: dict | None = None,
              expect_modules_under: Path | None = None) -> dict[str, TestResult]:
    """Run `nodeids` (relative to `root`) and return one result for each, whatever happens to the children.

    expect_modules_under: if given, the packages the tests imported must come from this folder; a test
    session that imported them from anywhere else (an installed copy) is a grader error, raised.
    """
    python = python or sys.executable
    results: dict[str, TestResult] = {}
    queue: list[tuple[list[str], float]] = [(list(nodeids), startup_limit)]
    while queue:
        group, group_startup_limit = queue.pop(0)
        session = _run_session(root, group, time_limit=time_limit, startup_limit=group_startup_limit,
                               python=python, extra_env=extra_env)
        if expect_modules_under is not None:
            for name, path in session.modules.items():
                if path and not Path(path).resolve().is_relative_to(Path(expect_modules_under).resolve()):
                    raise RuntimeError(f"grader error: the tests imported {name} from {path}, not from the "
                                       f"staging tree {expect_modules_under}; is PYTHONPATH overridden?")
        results.update({k: v for k, v in session.results.items() if k in group})
        left = [n for n in group if n not in results]
        if not left:
            continue
        why = {"timeout": "time limit exceeded", "crashed": "the test process crashed",
               "startup-timeout": "time limit exceeded before the tests started (a hang at import?)",
               "normal": "not run"}[session.ended]
        if session.ended != "normal" and session.current is not None:
            culprit = session.current
            outcome = "timeout" if session.ended == "timeout" else "crashed"
            detail = (f"killed after {time_limit:g} s" if outcome == "timeout"
                      else _describe(session.returncode))
            results[culprit] = TestResult(culprit, outcome, f"{why} ({detail}) while running this test.\n"
                                          f"Output of the test process (cut):\n{session.output}")
            rest = [n for n in left if n != culprit]
            if rest:
                queue.insert(0, (rest, group_startup_limit))
            continue
        files = sorted({_file_of(n) for n in left})
        if session.ended != "normal" and not session.started and len(files) > 1:
            # Isolate the file(s) whose imports crash or hang; a hang then costs at most 30 s per file.
            limit = min(group_startup_limit, SPLIT_STARTUP_LIMIT_S)
            queue[:0] = [([n for n in left if _file_of(n) == f], limit) for f in files]
            continue
        for nodeid in left:
            errors = [text for module, text in session.collect_errors.items() if nodeid.startswith(module)]
            text = errors[0] if errors else session.output
            detail = "" if session.ended == "normal" else f" ({_describe(session.returncode)})"
            results[nodeid] = TestResult(nodeid, "not run" if session.ended == "normal" else "crashed",
                                         f"{why}{detail}: the test file could not be collected or the "
                                         f"session ended early.\n{text}")
    return results


def collect(root: Path, paths: list[str], *, python: str | None = None, startup_limit: float = 180.0,
            extra_env: dict | None = None) -> tuple[list[dict], dict[str, str]]:
    """Collect tests under `paths` without running them: (items with their markers, collection errors)."""
    session = _run_session(root, paths, time_limit=60.0, startup_limit=startup_limit,
                           python=python or sys.executable, collect_only=True, extra_env=extra_env)
    if session.ended != "normal" and not session.collected:
        raise RuntimeError(f"collecting {paths} in {root} failed ({session.ended}):\n{session.output}")
    return session.collected, session.collect_errors


def _describe(returncode: int | None) -> str:
    if returncode is None:
        return "no exit status"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        extra = " (output over the size limit)" if name == "SIGXFSZ" else ""
        return f"killed by {name}{extra}"
    return f"exit status {returncode}"
