"""A pytest plugin that streams what happens to a JSON-lines file, for the grader's watcher.

Loaded in the child pytest process (`-p _minbert_grading_plugin`, copied beside the staging tree so
it imports nothing from the submission or the grader). Each event is one line written with os.write,
so nothing is lost when the child dies abruptly (os._exit, a segfault, a kill for a time limit):

    {"event": "collected", "items": [{"nodeid", "component", "points", "visibility", "todo", "doc"}, ...],
     "modules": {"minbert": "/path/to/minbert/__init__.py", ...}}
    {"event": "collect_error", "nodeid": ..., "text": ...}
    {"event": "start", "nodeid": ...}
    {"event": "report", "nodeid", "when", "outcome", "text", "exc_type", "exc_msg", "where", "duration"}
    {"event": "finish", "nodeid": ...}

The events go to the file descriptor $MINBERT_GRADING_EVENTS_FD, opened by the grader (the child cannot open
the file itself). Texts are cut to $MINBERT_GRADING_MAX_TEXT
characters (head and tail kept), so a test that prints megabytes cannot flood the grader. "where" lists
the last frames of the exception's traceback that lie in the submitted packages ("minbert/x.py:12 in f"),
so a hidden test's failure can say where it was raised without showing the test's code. It is empty
when the test or its helpers raised with no student code running: only then does grade.py show a hidden
test's message (a handout stub's aside), since the student's code chooses the messages it raises.
"""

from __future__ import annotations

import json
import os
import sys

import pytest

_MAX = int(os.environ.get("MINBERT_GRADING_MAX_TEXT", "4000"))
_PACKAGES = ("minbert", "optim", "tasks", "pretrain")


def _cut(text: str, limit: int = _MAX) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n... [{len(text) - 2 * half} characters cut] ...\n{text[-half:]}"


def _emit(event: dict) -> None:
    fd = os.environ.get("MINBERT_GRADING_EVENTS_FD")
    if fd:
        os.write(int(fd), (json.dumps(event) + "\n").encode("utf-8", "replace"))


def _marker_arg(item, name: str):
    marker = item.get_closest_marker(name)
    return marker.args[0] if marker is not None and marker.args else None


def pytest_collection_finish(session) -> None:
    items = [{"nodeid": item.nodeid, "component": _marker_arg(item, "component"),
              "points": _marker_arg(item, "points"), "visibility": _marker_arg(item, "visibility"),
              "todo": _marker_arg(item, "todo"),
              "doc": ((getattr(item, "obj", None) and item.obj.__doc__) or "").strip().split("\n")[0]}
             for item in session.items]
    modules = {name: getattr(sys.modules[name], "__file__", None)  # the lesson's packages (layout.py): the
               for name in ("minbert", "optim") if name in sys.modules}  # rest may be installed
    _emit({"event": "collected", "items": items, "modules": modules})


def pytest_collectreport(report) -> None:
    if report.failed:
        _emit({"event": "collect_error", "nodeid": report.nodeid, "text": _cut(str(report.longrepr))})


def pytest_runtest_logstart(nodeid, location) -> None:
    _emit({"event": "start", "nodeid": nodeid})


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    excinfo = call.excinfo
    report._grading_exc = None if excinfo is None else excinfo.typename
    report._grading_msg = None if excinfo is None else _cut(str(excinfo.value), 1000)
    report._grading_where = [] if excinfo is None else _where(item, excinfo)


def _where(item, excinfo) -> list[str]:
    """'minbert/x.py:12 in f' for the last frames of the traceback inside the submitted packages."""
    root = str(item.config.rootpath) + os.sep
    places = []
    for entry in excinfo.traceback:
        path = str(entry.path)
        if path.startswith(root) and path[len(root):].split(os.sep, 1)[0] in _PACKAGES:
            places.append(f"{path[len(root):]}:{entry.lineno + 1} in {entry.name}")
    return places[-3:]


def pytest_runtest_logreport(report) -> None:
    text = ""
    if report.outcome != "passed":
        text = str(report.longrepr) if report.longrepr is not None else ""
        if report.capstdout:
            text += "\n----- captured stdout -----\n" + _cut(report.capstdout, _MAX // 2)
        if report.capstderr:
            text += "\n----- captured stderr -----\n" + _cut(report.capstderr, _MAX // 2)
    _emit({"event": "report", "nodeid": report.nodeid, "when": report.when, "outcome": report.outcome,
           "text": _cut(text), "exc_type": getattr(report, "_grading_exc", None),
           "exc_msg": getattr(report, "_grading_msg", None), "where": getattr(report, "_grading_where", []),
           "duration": report.duration})


def pytest_runtest_logfinish(nodeid, location) -> None:
    _emit({"event": "finish", "nodeid": nodeid})
