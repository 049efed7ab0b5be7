"""Every correct alternative in tests/equivalents.py earns every point the grader gives, in the full edition.

The alternatives are graded a few at once: one tree per batch, at most one alternative per component in a
tree (as the mutants are, tests/test_grading.py), so a lost point names its alternative. Cost: about six
full-edition gradings, two at a time.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from equivalents import EQUIVALENTS

from grading.config import COMPONENTS
from grading.grade import STAFF_ROOT, component_scores, grade
from mutations import mutant


def batches() -> list[list]:
    """The alternatives in trees of at most one per component, in catalogue order."""
    groups: list[list] = []
    for alternative in EQUIVALENTS:
        group = next((g for g in groups if all(a.component != alternative.component for a in g)), None)
        if group is None:
            groups.append(group := [])
        group.append(alternative)
    return groups


def test_the_catalogue_covers_every_component_with_a_todo_and_applies_once():
    assert {a.component for a in EQUIVALENTS} == {c for c, todos in COMPONENTS.items() if todos}
    assert len({a.name for a in EQUIVALENTS}) == len(EQUIVALENTS) >= 60
    for alternative in EQUIVALENTS:  # each old text occurs exactly once in the reference
        text = (STAFF_ROOT / alternative.path).read_text()
        assert text.count(alternative.old) == 1, alternative.name


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("equivalents")

    def run(number_and_group):
        number, group = number_and_group
        tree = mutant(STAFF_ROOT, group[0], root / f"batch-{number}")
        for alternative in group[1:]:
            alternative.apply(tree)
        return group, grade(tree, edition="full")

    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(run, enumerate(batches())))


@pytest.mark.slow
def test_every_correct_alternative_earns_full_marks(graded):
    lost = []
    for group, results in graded:
        scores = component_scores(results)
        for alternative in group:
            got, total = scores[alternative.component]
            if got != total:
                failed = [t["name"] + ": " + t["output"][:600] for t in results["tests"]
                          if t["tags"] == [alternative.component] and t["status"] != "passed"]
                lost.append(f"{alternative.name} ({alternative.description}): {got:g} / {total:g}\n"
                            + "\n".join(failed))
    assert not lost, "\n\n".join(lost)
