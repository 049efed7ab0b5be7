"""Graded tests: small, fast, one file per component, each test independent of the other TODOs.

Every test declares its component (module-level `pytestmark`) and points (`@pytest.mark.points`); the
autograder reads them, and so does the points table at the end of `pytest tests/graded`; where a component
has several TODOs, a test also names the one it checks (`@pytest.mark.todo`). A test of one component never
runs another component's TODO: where it needs one (the layer needs attention, the head split and the FFN),
it uses `graded_helpers.use_stand_ins` or a stand-in of its own, so a bug in one TODO costs points in that
component only. Failures say what is wrong through `graded_helpers.check_close` / `check_value` / `fail`.
Files in hidden/ are not in the handout.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from minbert.config import BertConfig

sys.path.insert(0, str(Path(__file__).resolve().parent))  # graded_helpers, for hidden/ too

import graded_helpers  # noqa: E402 (found through the line above)
from crashes import explain, student_frame  # noqa: E402

SUBMITTED = ("minbert", "optim", "tasks", "pretrain")  # the packages whose frames are the student's


def axes(item) -> dict[str, int]:
    """The test's axis sizes: its `axes` marker, else its module's AXES; a crash names its shapes' axes in
    these letters (crashes.explain). Without either, sizes stay numbers: a wrong name would mislead more."""
    marker = item.get_closest_marker("axes")
    return marker.kwargs if marker else getattr(item.module, "AXES", {})


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem):
    """A crash in the student's code fails naming their line, its operands' shapes in the test's axis
    names and the slip it shows (crashes.explain), the raw exception kept as the cause. A test that trips over
    what the student's code returned (None from a missing `return`, a list, a tuple where a tensor
    belongs) fails saying so, instead of crashing with a TypeError in the test's own lines: the reference
    passes every graded test, so a TypeError or AttributeError raised outside the student's code is
    always about their value."""
    root = pyfuncitem.config.rootpath.resolve()
    graded_helpers.AXES = axes(pyfuncitem)
    try:
        return (yield)
    except Exception as error:
        try:
            explained = explain(error, root, SUBMITTED, axes(pyfuncitem))
        except Exception:  # noqa: BLE001 - an explanation that fails leaves the crash as it was
            explained = None
        if explained:
            raise AssertionError(explained) from error
        if not isinstance(error, (TypeError, AttributeError)) or student_frame(error.__traceback__, root,
                                                                               SUBMITTED):
            raise
        marker = pyfuncitem.get_closest_marker("todo") or pyfuncitem.get_closest_marker("component")
        what = marker.args[0] if marker and marker.args else "the code under test"
        returned_none = "NoneType" in str(error)
        raise AssertionError(
            f"the test could not use what your code for {what} returned ({type(error).__name__}: {error}): "
            + ("a value was None: does every path end with `return` (the docstring says what it returns)?"
               if returned_none else "it has the wrong type; the docstring says what to return "
               "(a tensor, a number, a list)")) from None


@pytest.fixture
def config() -> BertConfig:
    """The tiny model (hidden 32, 4 heads, intermediate 37), dropout off."""
    return BertConfig.tiny(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


@pytest.fixture
def padding_mask() -> torch.Tensor:
    """(B=3, T=7): one full row, two padded."""
    return torch.tensor([[1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 0, 0], [1, 1, 1, 0, 0, 0, 0]])


# ----- points per component, at the end of `pytest tests/graded` -------------------------------------------

_POINTS: dict[str, tuple[str, float]] = {}  # nodeid -> (component, points) of each test collected
_PASSED: set[str] = set()
_FAILED: set[str] = set()  # any phase failed (its setup, the test, its teardown)


def pytest_collection_modifyitems(items) -> None:
    for item in items:
        component, points = item.get_closest_marker("component"), item.get_closest_marker("points")
        if component and points:
            _POINTS[item.nodeid] = (component.args[0], float(points.args[0]))


def pytest_runtest_logreport(report) -> None:
    if report.failed or report.skipped:
        _FAILED.add(report.nodeid)
    elif report.when == "call" and report.passed:
        _PASSED.add(report.nodeid)


@pytest.hookimpl(wrapper=True, tryfirst=True)  # outermost: after pytest's own summary of the failures
def pytest_terminal_summary(terminalreporter):
    """A table of the points the tests that ran earned, per component, as the autograder counts them (a
    test earns its points when it passes); the autograder runs hidden tests too."""
    result = yield
    table: dict[str, list[float]] = {}
    for nodeid, (component, points) in _POINTS.items():
        if nodeid not in _PASSED | _FAILED:
            continue  # not run (-x, -k)
        earned = points if nodeid in _PASSED and nodeid not in _FAILED else 0.0
        row = table.setdefault(component, [0.0, 0.0])
        row[0], row[1] = row[0] + earned, row[1] + points
    if not table:
        return result
    terminalreporter.section("points per component (these tests; the autograder adds hidden ones)")
    for component, (earned, worth) in table.items():
        terminalreporter.write_line(f"{component:<20} {earned:>5g} / {worth:g}")
    earned, worth = (sum(row[i] for row in table.values()) for i in (0, 1))
    terminalreporter.write_line(f"{'total':<20} {earned:>5g} / {worth:g}")
    return result
