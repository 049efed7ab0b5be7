"""The paste check's runtime: a pytest plugin in the check's child process, and what staged regions ask.

paste.py stages the handout with each TODO's region asking this module (imported as RUNTIME) whether to
be the stub, the reference solution or the paste, and starts pytest with `-p grading.paste_runtime`. For
each graded test of a TODO the plugin runs the test once with the reference (it must earn its points, else
the harness is wrong) and once per candidate, and writes one JSON line per run to MINBERT_PASTE_RESULTS.

Read next: paste.py (which reads those lines into findings).
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import sys
import time
from pathlib import Path

RUN_LIMIT_S = 60  # one test with one candidate; the first run of a file also builds its fixtures (busy cores)
RUNTIME = "_minbert_paste"  # the name staged regions import this module by

_SPEC: dict = {}
_NOW: dict = {}  # {"todo": whose test runs, "candidate": a Candidate's fields, None for the reference}
_RESOLVED: dict[str, object] = {}


class PasteTimeout(Exception):
    """One test with one candidate ran past RUN_LIMIT_S."""


def mode(todo: str) -> str:
    """What a staged region is during the current run: "paste", "reference" or "stub"."""
    if todo == _NOW.get("todo"):
        return "reference" if _NOW["candidate"] is None else "paste"
    return "reference" if todo in _SPEC["needs"].get(_NOW.get("todo"), ()) else "stub"


def call(todo: str, *args, **keywords):
    """The pasted body: the current candidate called with the TODO's arguments."""
    candidate = _NOW["candidate"]
    if candidate["on_self"]:
        target, args = getattr(args[0], candidate["qualname"].rsplit(".", 1)[-1]), args[1:]
    else:
        target = _RESOLVED[candidate["name"]]
        args = args if candidate["with_self"] or "." not in todo.split("::")[1] else args[1:]
    return target(*args[:candidate["count"]], **keywords)


def _write(line: dict) -> None:
    with open(os.environ["MINBERT_PASTE_RESULTS"], "a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")


def pytest_configure(config) -> None:
    if os.environ.get("MINBERT_PASTE_SPEC"):
        _SPEC.update(json.loads(Path(os.environ["MINBERT_PASTE_SPEC"]).read_text(encoding="utf-8")))
        sys.modules[RUNTIME] = sys.modules[__name__]


def pytest_collection_finish(session) -> None:
    """Import every function candidate now (tests/graded is on sys.path by now, from its conftest)."""
    for found in _SPEC.get("candidates", {}).values():
        for candidate in found:
            if candidate["on_self"] or candidate["name"] in _RESOLVED:
                continue
            try:
                module = importlib.import_module(candidate["module"])
                _RESOLVED[candidate["name"]] = getattr(module, candidate["qualname"])
            except Exception as error:  # noqa: BLE001 - any import failure is reported, not fatal
                _write({"problem": f"cannot import candidate {candidate['name']} as {candidate['module']}: "
                                   f"{type(error).__name__}: {error}"})
                _RESOLVED[candidate["name"]] = None


def _alarm(signum, frame):
    raise PasteTimeout(f"ran past {RUN_LIMIT_S} s")


def pytest_runtest_protocol(item, nextitem):
    if not _SPEC:
        return None
    from _pytest.runner import runtestprotocol

    todo = _SPEC["tests"].get(item.nodeid)
    runs = [None] + [c for c in _SPEC["candidates"].get(todo, []) if c["on_self"] or _RESOLVED.get(c["name"])]
    previous = signal.signal(signal.SIGALRM, _alarm)
    try:
        for number, candidate in enumerate(runs):
            _NOW.update(todo=todo, candidate=candidate)
            signal.setitimer(signal.ITIMER_REAL, RUN_LIMIT_S)
            began = time.monotonic()
            # Between runs of the same test, tear down its own fixtures but keep its module's and session's:
            # teardown keeps the nodes on the chain of `nextitem`, here the test's parent.
            try:
                last = number == len(runs) - 1
                reports = runtestprotocol(item, log=False, nextitem=nextitem if last else item.parent)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            _write({"nodeid": item.nodeid, "candidate": candidate and candidate["name"],
                    "passed": all(r.passed for r in reports) and any(r.when == "call" for r in reports),
                    "seconds": round(time.monotonic() - began, 3)})
    finally:
        _NOW.clear()
        signal.signal(signal.SIGALRM, previous)
    return True
