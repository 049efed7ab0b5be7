"""The paste check (grading/paste.py): a shipped function that computes a TODO's answer is caught, with the
points pasting a call to it earns; a harmless one with the same signature is not; the real tree has none.

Costs on 2 quiet cores: the signature tests are instant; each planting test starts one pytest child on
one TODO with its planted candidates (about 13 s, most of it the child's start); the real-tree tests,
marked slow, grade every candidate of the default edition's TODOs (353 candidates, about 25 s) and of the
full edition's other TODOs (about 10 s).
"""

from __future__ import annotations

import ast

import pytest

from grading.config import edition_todos
from grading.grade import graded_tests
from grading.paste import Signature, annotations_agree, candidates, check, functions, takes

SCHEDULE = "optim/schedules.py::linear_warmup_decay_factor"
ADD_NORM = "minbert/layer.py::AddNorm.forward"

# The schedule's answer in other words (a leak), a wrong answer and a signature that cannot take the call.
PLANTED_SCHEDULE = '''
def ramp(step, warmup, total):
    """Rises to 1 over the warm-up, then falls to 0."""
    if step < warmup:
        return step / max(1, warmup)
    return max(0.0, (total - step) / max(1, total - warmup))


def flat(step, warmup, total=1):
    return 1.0


def two_only(step, warmup):
    return 0.0
'''

# AddNorm's answer as a function of the module: a leak only when called with `self` first.
PLANTED_ADD_NORM = '''
def post_norm(block, hidden_states, residual):
    return block.LayerNorm(residual + block.dropout(block.dense(hidden_states)))
'''


def points(todo: str) -> float:
    return sum(t.points for t in graded_tests() if t.todo == todo)


def signature(source: str) -> Signature:
    return Signature.of(ast.parse(source).body[0])


def test_a_candidate_must_take_the_todos_positional_and_keyword_arguments():
    # The TODO's call: 3 positional arguments (2 required) and the keyword-only lr.
    assert takes(signature("def f(a, b, c, *, lr): ..."), 3, 2, ("lr",)) == 3
    assert takes(signature("def f(a, b, *, lr): ..."), 3, 2, ("lr",)) == 2  # c dropped, lr by name
    assert takes(signature("def f(a, b, lr=1): ..."), 3, 2, ("lr",)) is None  # c would fill lr
    assert takes(signature("def f(): ..."), 3, 0, ()) is None  # ignores every argument
    assert takes(signature("def f(a, b, c, d): ..."), 3, 2, ()) is None  # needs a fourth
    assert takes(signature("def f(a): ..."), 3, 2, ()) is None  # cannot take the required two
    assert takes(signature("def f(a, b, c): ..."), 3, 2, ("lr",)) is None  # no lr
    assert takes(signature("def f(*args, **kw): ..."), 3, 2, ("lr",)) == 3
    assert takes(signature("def f(a, b, c, *, eps): ..."), 3, 2, ()) is None  # its required keyword


def test_annotated_parameters_must_admit_a_common_type():
    todo = signature("def f(x: torch.Tensor, mask: Tensor | None, n: int, scores: ArrayLike): ...")
    assert annotations_agree(todo, signature("def g(a: Tensor, b, c: float, d: np.ndarray): ..."), 4)
    assert annotations_agree(todo, signature("def g(a, b, c, d): ..."), 4)  # unannotated takes anything
    assert not annotations_agree(todo, signature("def g(a: Path, b, c, d): ..."), 4)
    assert not annotations_agree(todo, signature("def g(a: Tensor, b: str, c, d): ..."), 4)
    assert annotations_agree(todo, signature("def g(a: Tensor, b: str): ..."), 1)  # only what is passed
    assert annotations_agree(todo, signature("def g(self, a: Tensor): ..."), 1, shift=1)


def test_candidates_of_a_method_todo_include_functions_with_self_first_and_the_class_methods():
    text = ("class Block:\n    def forward(self, x, y): ...\n    def other(self, x, y=0): ...\n"
            "    def one(self): ...\n\ndef helper(x, y): ...\n\ndef with_self(block, x, y): ...\n")
    found = {path: functions(path, text) for path in ["pkg/block.py"]}
    todo = next(f for f in found["pkg/block.py"] if f.qualname == "Block.forward")
    stubs = frozenset({"pkg/block.py::Block.forward"})
    names = [c.name for c in candidates(todo, found, stubs, {"pkg/block.py"})]
    assert names == ["pkg/block.py::Block.other", "pkg/block.py::helper",
                     "pkg/block.py::with_self (self first)"]


def test_planted_leak_of_the_schedule_is_caught_with_its_points_and_a_wrong_one_is_not():
    report = check("default", todos=[SCHEDULE], extra={"optim/planted.py": PLANTED_SCHEDULE},
                   among=["optim/planted.py"])
    assert report.candidates == {SCHEDULE: ["optim/planted.py::ramp", "optim/planted.py::flat"]}
    assert not report.problems, report.summary()  # the reference earned everything: the harness works
    assert [(f.candidate, f.earned, f.total) for f in report.findings] == [
        ("optim/planted.py::ramp", points(SCHEDULE), points(SCHEDULE))], report.summary()
    assert str(report.findings[0]).startswith(f"{SCHEDULE} <- optim/planted.py::ramp: earns ")


def test_planted_function_of_the_module_is_caught_pasted_into_a_method_todo():
    report = check("full", todos=[ADD_NORM], extra={"tests/graded/planted_helpers.py": PLANTED_ADD_NORM},
                   among=["tests/graded/planted_helpers.py"])
    assert not report.problems, report.summary()
    assert [(f.candidate, f.earned) for f in report.findings] == [
        ("tests/graded/planted_helpers.py::post_norm (self first)", points(ADD_NORM))], report.summary()


@pytest.mark.slow
def test_no_shipped_function_earns_a_default_edition_todos_points_when_called():
    report = check("default")
    assert report.clean, report.summary()


@pytest.mark.slow
def test_no_shipped_function_earns_a_full_edition_todos_points_when_called():
    # The default edition's TODOs are checked above; in the full edition they have fewer working
    # candidates (more stubs) and a few more graded-test helpers: `python -m grading.paste --edition full`.
    report = check("full", todos=sorted(edition_todos("full") - edition_todos("default")))
    assert report.clean, report.summary()

