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

import functools
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import sysconfig
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
    checks: list[dict] = field(default_factory=list)  # what the graded helpers recorded, in order (plugin.py)


@dataclass
class _Session:
    results: dict[str, TestResult] = field(default_factory=dict)
    collected: list[dict] = field(default_factory=list)
    modules: dict[str, str | None] = field(default_factory=dict)
    collect_errors: dict[str, str] = field(default_factory=dict)
    started: list[str] = field(default_factory=list)
    current: str | None = None
    checks: dict[str, list[dict]] = field(default_factory=dict)
    ended: str = "normal"  # normal | crashed | timeout | startup-timeout
    returncode: int | None = None
    output: str = ""


@functools.lru_cache(maxsize=8)
def _has_pytest_timeout(python: tuple[str, ...], path: tuple[str, ...]) -> bool:
    return subprocess.run([*python, "-c", "import pytest_timeout"], capture_output=True,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(path)}).returncode == 0


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


def _limit_output() -> None:  # runs in the supervisor before exec; the child inherits it
    import resource
    resource.setrlimit(resource.RLIMIT_FSIZE, (OUTPUT_LIMIT_BYTES, OUTPUT_LIMIT_BYTES))


@functools.lru_cache(maxsize=8)
def child_user() -> pwd.struct_passwd | None:
    """Who runs the submission: $GRADING_USER (default nobody) where the grader is root, else the grader.
    Where nobody cannot run this Python with its packages (a checkout in a folder only root may enter, such as
    a clone in a 0700 temporary folder) and GRADING_USER is not set, the grader's own user, said once on
    stderr: on Gradescope setup.sh installs the environment where nobody reads it."""
    if os.geteuid() != 0:
        return None
    user = pwd.getpwnam(os.environ.get("GRADING_USER") or "nobody")
    try:
        child_python(user.pw_name)
    except RuntimeError as error:
        if os.environ.get("GRADING_USER"):
            raise
        print(f"warning: {error}; the submission runs as this user instead, in its own session",
              file=sys.stderr)
        return None
    return user


@functools.lru_cache(maxsize=8)
def child_python(user: str | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the command that starts Python for the child's user, the folders to add to its path): this Python
    itself, or, where that user cannot run it with pytest importable (pyenv's Python under /root, mode 0700),
    the system's python3.M of the same version with the environment's packages on the path (-S: no site, so
    no .pth file of the grader's checkout)."""
    if user is None or _runs_as(user, [sys.executable], ()):
        return (sys.executable,), ()
    packages = tuple(dict.fromkeys(sysconfig.get_paths()[key] for key in ("purelib", "platlib")))
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for folder in ("/usr/local/bin", "/usr/bin"):
        candidate = [os.path.join(folder, version), "-S"]
        if os.path.exists(candidate[0]) and _runs_as(user, candidate, packages):
            return tuple(candidate), packages
    raise RuntimeError(f"grader error: user {user} cannot run {sys.executable} with pytest, nor {version} "
                       f"with {packages[0]}: make the environment readable by that user, or set GRADING_USER")


def _runs_as(user: str, python: list[str], path: tuple[str, ...]) -> bool:
    try:
        return subprocess.run([*python, "-c", "import pytest"], user=user, group=pwd.getpwnam(user).pw_gid,
                              extra_groups=[], capture_output=True, cwd="/",
                              env={"PYTHONPATH": os.pathsep.join(path)}).returncode == 0
    except OSError:  # not executable by that user
        return False


def _run_session(root: Path, nodeids: list[str], *, time_limit: float, startup_limit: float,
                 collect_only: bool = False, extra_env: dict | None = None, untrusted: bool = False
                 ) -> _Session:
    """One child pytest under a supervisor (sandbox.py); `untrusted`: as child_user() where that is another
    user, with a home of its own and the environment's packages on the path."""
    work = Path(tempfile.mkdtemp(prefix="minbert-grading-"))
    user = child_user() if untrusted else None
    try:
        os.chmod(work, 0o711)  # the child may read its plugin, not list or open the events and output files
        plugin_dir, home = work / "plugin", work / "home"
        plugin_dir.mkdir(mode=0o755)
        home.mkdir(mode=0o700)
        shutil.copy(Path(__file__).with_name("plugin.py"), plugin_dir / f"{PLUGIN_MODULE}.py")
        shutil.copy(Path(__file__).with_name("sandbox.py"), work / "sandbox.py")
        if user is not None:
            os.chown(home, user.pw_uid, user.pw_gid)
        interpreter, packages = child_python(user and user.pw_name)
        events, output = work / "events.jsonl", work / "output.txt"
        events_fd = os.open(events, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "MINBERT_GRADING"))}
        env.update(PYTHONPATH=os.pathsep.join([str(root), str(plugin_dir), *packages]),
                   PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", PYTHONDONTWRITEBYTECODE="1", PYTHONHASHSEED="0",
                   MINBERT_GRADING_EVENTS_FD=str(events_fd), MINBERT_GRADING_FDS=str(events_fd),
                   HOME=str(home), TMPDIR=str(home), PWD=str(root))
        env.update(extra_env or {})
        command = [*interpreter, "-m", "pytest", *nodeids, "-p", PLUGIN_MODULE, "--rootdir", str(root),
                   "-c", str(root / "setup.cfg"), "-p", "no:cacheprovider", "-q", "--no-header",
                   "--tb=short", "--continue-on-collection-errors", "-W", "ignore::DeprecationWarning"]
        if collect_only:
            command.append("--collect-only")
        elif _has_pytest_timeout(interpreter, packages):
            command += ["-p", "pytest_timeout", "--timeout", str(time_limit)]
        supervisor = [sys.executable, "-I", str(work / "sandbox.py"),
                      *(["--user", user.pw_name] if user else []), "--", *command]
        session = _Session()
        with open(output, "wb") as out:
            child = subprocess.Popen(supervisor, cwd=root, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                     stderr=subprocess.STDOUT, pass_fds=(events_fd,),
                                     preexec_fn=_limit_output if os.name == "posix" else None)
            os.close(events_fd)
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
                kind = _handle(event, session, reports)
            except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
                continue  # not ours (a submission writing to its own events; nested past what json holds)
            last_event = now
            if kind == "start":
                current_since = now
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


def _handle(event: dict, session: _Session, reports: dict[str, list[dict]]) -> str:
    """Take one event of the child's stream (plugin.py) into `session`; a malformed one raises."""
    kind = event["event"]
    if kind == "collected":
        session.collected, session.modules = list(event["items"]), dict(event.get("modules", {}))
    elif kind == "collect_error":
        session.collect_errors[str(event["nodeid"])] = str(event.get("text", ""))
    elif kind == "start":
        session.current = str(event["nodeid"])
        session.started.append(session.current)
    elif kind == "report":
        reports.setdefault(str(event["nodeid"]), []).append(event)
    elif kind == "check" and session.current is not None:
        session.checks.setdefault(session.current, []).append(event)
    elif kind == "finish":
        nodeid = str(event["nodeid"])
        session.results[nodeid] = _combine(nodeid, reports.pop(nodeid, []))
        session.results[nodeid].checks = session.checks.pop(nodeid, [])
        session.current = None
    return kind


def _kill(supervisor: subprocess.Popen) -> None:
    """End the child through its supervisor, which then sweeps its tree (a SIGKILL to the supervisor itself
    would hand the child's orphans to init)."""
    supervisor.terminate()
    try:
        supervisor.wait(timeout=30)
    except subprocess.TimeoutExpired:
        supervisor.kill()


def _combine(nodeid: str, reports: list[dict]) -> TestResult:
    """One result from a test's setup, call and teardown reports."""
    duration = sum(r.get("duration") or 0.0 for r in reports)
    for report in reports:
        if report["outcome"] == "failed":
            text = str(report.get("text", ""))
            timed_out = "Timeout" in (report.get("exc_type") or "") or "Timeout >" in text
            outcome = "timeout" if timed_out else "failed"
            if report["when"] != "call":
                text = f"(error in test {report['when']})\n{text}"
            where = [str(w) for w in report.get("where") or []]
            return TestResult(nodeid, outcome, text, _text(report.get("exc_type")),
                              _text(report.get("exc_msg")), duration, where)
    for report in reports:
        if report["outcome"] == "skipped":
            return TestResult(nodeid, "skipped", f"skipped: {report.get('text', '')}", None, None, duration)
    if any(r["when"] == "call" and r["outcome"] == "passed" for r in reports):
        return TestResult(nodeid, "passed", "", None, None, duration)
    return TestResult(nodeid, "failed", "the test did not report a result", None, None, duration)


def _text(value) -> str | None:
    return None if value is None else str(value)


def _file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


SPLIT_STARTUP_LIMIT_S = 30.0  # per file, once a whole session hung before its first test


def run_tests(root: Path, nodeids: list[str], *, time_limit: float = 30.0, startup_limit: float = 60.0,
              extra_env: dict | None = None, expect_modules_under: Path | None = None,
              untrusted: bool = False) -> dict[str, TestResult]:
    """Run `nodeids` (relative to `root`) and return one result for each, whatever happens to the children.
    untrusted: the tree holds a submission (run as child_user(), see _run_session).

    expect_modules_under: if given, the packages the tests imported must come from this folder; a test
    session that imported them from anywhere else (an installed copy) is a grader error, raised.
    """
    results: dict[str, TestResult] = {}
    queue: list[tuple[list[str], float]] = [(list(nodeids), startup_limit)]
    while queue:
        group, group_startup_limit = queue.pop(0)
        session = _run_session(root, group, time_limit=time_limit, startup_limit=group_startup_limit,
                               extra_env=extra_env, untrusted=untrusted)
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
                                          f"Output of the test process (cut):\n{session.output}",
                                          checks=session.checks.get(culprit, []))
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


def collect(root: Path, paths: list[str]) -> tuple[list[dict], dict[str, str]]:
    """Collect tests under `paths` without running them: (items with their markers, collection errors)."""
    session = _run_session(root, paths, time_limit=60.0, startup_limit=180.0, collect_only=True)
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
