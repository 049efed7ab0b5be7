"""Tests for grading/: solution regions, the handout builder, the grader, and the graded tests' power.

The expensive parts are shared: one handout build per edition, one grading of the reference and of the
handout per edition, and the mutants graded two at a time in the full edition (module-scoped fixtures).
Each grading is one child pytest process. A mutant graded in the default edition is that grading with the
other components' tests left out (the same tests, the same child), so the full edition's mutants cover
both; one test grades a mutant of a component outside the default edition to show that it costs nothing.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from grading.config import (COMPONENTS, EDITIONS, HANDOUT_NOTEBOOKS, SUBMITTED_PACKAGES, WHOLE_MODEL,
                            component_todos, edition_components, edition_todos)
from grading.documents import first_todo
from grading.grade import STAFF_ROOT, component_scores, grade, graded_tests
from grading.grade import main as grade_main
from grading.handout import MARKER, HandoutError, build, check_jobs, unpack
from grading.layout import installed_as, layout, repository_files
from mutations import MUTATIONS, mutant
from grading.regions import RegionError, strip_regions
from grading.schema import SCHEMA, SchemaError, validate

try:
    import jsonschema  # installed with nbformat, a test dependency
except ImportError:  # pragma: no cover - then our own validator alone checks the files
    jsonschema = None


def full_marks(results: dict) -> dict[str, bool]:
    return {c: got == total for c, (got, total) in component_scores(results).items()}


def check_schema(results: dict) -> None:
    """Our validator, and the jsonschema package when it is installed."""
    validate(results)
    if jsonschema is not None:
        jsonschema.validate(results, SCHEMA)


FORBIDDEN_PATHS = [str(STAFF_ROOT), sys.prefix, sys.base_prefix, "site-packages", ".venv", "minbert-stage-",
                   "minbert-grading-"]


def check_no_paths(results: dict) -> None:
    """No output names the grader's checkout, the Python installation or the staging folders."""
    for text in [results["output"]] + [t["output"] for t in results["tests"]]:
        found = [path for path in FORBIDDEN_PATHS if path in text]
        assert not found, f"{found} in the grader's output:\n{text[:3000]}"


# ----- regions ------------------------------------------------------------------------------------


def test_region_becomes_a_stub_at_its_indentation_naming_file_and_function():
    source = textwrap.dedent('''\
        class A:
            def f(self, x):
                """Doc stays."""
                # Hint stays.
                # BEGIN SOLUTION
                y = x + 1
                # END SOLUTION
                return y


        def g():
            # BEGIN SOLUTION
            return 2
            # END SOLUTION
        ''')
    stubbed, regions = strip_regions(source, "pkg/mod.py")
    assert [r.todo for r in regions] == ["pkg/mod.py::A.f", "pkg/mod.py::g"]
    assert '        raise NotImplementedError("TODO: pkg/mod.py::A.f")\n        return y\n' in stubbed
    assert '    raise NotImplementedError("TODO: pkg/mod.py::g")\n' in stubbed
    assert '"""Doc stays."""' in stubbed and "# Hint stays." in stubbed
    assert "SOLUTION" not in stubbed and "x + 1" not in stubbed


@pytest.mark.parametrize("body, message", [
    ("    # BEGIN SOLUTION\n    # BEGIN SOLUTION\n    pass\n    # END SOLUTION\n",
     r"m\.py:3: nested # BEGIN SOLUTION \(the region opened at line 2"),
    ("    pass\n    # END SOLUTION\n", r"m\.py:3: # END SOLUTION without a # BEGIN SOLUTION"),
    ("    # BEGIN SOLUTION\n    pass\n", r"m\.py:2: # BEGIN SOLUTION is never closed"),
    ("    #BEGIN SOLUTION\n    pass\n", r"m\.py:2: malformed solution marker"),
])
def test_bad_markers_are_refused_naming_file_and_line(body, message):
    with pytest.raises(RegionError, match=message):
        strip_regions("def f():\n" + body, "m.py")


def test_an_edition_stubs_its_regions_and_keeps_the_others_as_code():
    source = ("def f():\n    # BEGIN SOLUTION\n    return 1\n    # END SOLUTION\n\n\n"
              "def g():\n    # BEGIN SOLUTION\n    return 2\n    # END SOLUTION\n")
    stubbed, regions = strip_regions(source, "m.py", todos={"m.py::g"})
    assert [r.todo for r in regions] == ["m.py::g"]
    assert stubbed == ("def f():\n    return 1\n\n\ndef g():\n"
                       '    raise NotImplementedError("TODO: m.py::g")\n')


def test_editions_name_real_components_and_full_is_every_one():
    assert set(EDITIONS) >= {"default", "full"}
    assert edition_components("full") == tuple(COMPONENTS)
    for edition, components in EDITIONS.items():
        assert set(components) <= set(COMPONENTS), edition
    assert set(EDITIONS["default"]) < set(COMPONENTS)
    with pytest.raises(KeyError, match="edition 'nope' is not one of"):
        edition_components("nope")


def test_the_jobs_look_for_the_marker_module_the_handouts_wheel_holds():
    # process.in_handout() looks for it; were the names different, a handout's jobs would pick the fast
    # paths on their own (grading imports no package but the flags, so the name is written twice).
    from tasks.training.process import HANDOUT_MARKER

    assert HANDOUT_MARKER == MARKER


def test_the_lesson_is_the_reading_chain_and_the_editions_todo_files_and_the_rest_is_installed():
    chain = ["config", "embeddings", "attention", "layer", "encoder", "model", "heads", "masking", "pooling",
             "task_heads", "label_attention", "metrics"]
    lesson = [f"minbert/{name}.py" for name in chain] + ["optim/adamw.py", "optim/schedules.py",
                                                          "optim/param_groups.py"]
    inits = ["minbert/__init__.py", "optim/__init__.py"]
    default, full = layout(STAFF_ROOT, "default"), layout(STAFF_ROOT, "full")
    assert list(default.lesson) == lesson + inits
    assert list(full.lesson) == lesson + ["minbert/lora.py"] + inits
    # a fast path restating a TODO ships nowhere; every other package file is installed
    assert default.withheld == full.withheld == ("optim/adamw_kernel.c", "optim/fast_adamw.py")
    packages = {f for f in repository_files(STAFF_ROOT) if f.split("/")[0] in SUBMITTED_PACKAGES}
    assert set(default.machinery) == packages - set(default.lesson) - set(default.withheld) | {
        "grading/check_predictions.py", "tests/graded/verdict.py", "tests/graded/crashes.py"}
    assert "minbert/lora.py" in default.machinery and "minbert/sentence_encoder.py" in default.machinery


def test_region_outside_a_function_is_refused():
    with pytest.raises(RegionError, match=r"m\.py:1: solution region is not inside a function"):
        strip_regions("# BEGIN SOLUTION\nX = 1\n# END SOLUTION\n", "m.py")


# ----- the handout ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def handouts(tmp_path_factory):
    """Each edition's handout, built and checked (imports, every shipped test failing on its own stub)."""
    editions = ("default", "full")
    folders = [tmp_path_factory.mktemp(f"handout-{edition}") / "student" for edition in editions]
    with ThreadPoolExecutor(max_workers=2) as pool:  # most of a build's check is child processes
        return dict(zip(editions, pool.map(lambda folder, edition: build(folder, edition=edition), folders,
                                           editions)))


@pytest.fixture(scope="module")
def handout(handouts):
    return handouts["default"]


@pytest.mark.parametrize("edition", ["default", "full"])
def test_handout_stubs_the_editions_todos_and_ships_the_rest_as_code(handouts, edition):
    handout = handouts[edition]
    todos = sorted(r.todo for r in handout.regions)
    assert todos == sorted(edition_todos(edition))
    out = handout.out
    for todo in todos:
        path, function = todo.split("::")
        assert f'raise NotImplementedError("TODO: {todo}")' in (out / path).read_text()
    assert "math.sqrt(query.size(-1))" not in (out / "minbert/attention.py").read_text()
    for path in out.rglob("*.py"):
        assert "BEGIN SOLUTION" not in path.read_text() and "END SOLUTION" not in path.read_text(), path
    given = [c for c in COMPONENTS if c not in edition_components(edition)]
    shipped_tests = {p.name for p in (out / "tests/graded").glob("test_graded_*.py")}
    for test in graded_tests(STAFF_ROOT):
        if not test.hidden_from_handout:
            assert (test.file.rsplit("/", 1)[1] in shipped_tests) == (test.component not in given), test.file
    if edition == "default":  # the feed-forward is reference code there, its tests are not shipped
        assert "feed_forward" in given
        layer = (out / "minbert/layer.py").read_text()
        assert 'return F.gelu(self.dense(hidden_states), approximate="none")' in layer


@pytest.mark.parametrize("edition", ["default", "full"])
def test_handout_holds_the_lesson_its_tests_notebooks_and_setup_and_the_wheel_the_rest(handouts, edition):
    handout = handouts[edition]
    out, split = handout.out, layout(STAFF_ROOT, edition)
    written = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    assert written == set(handout.files) | {".minbert-handout"}
    python = sorted(f for f in written if f.endswith(".py") and not f.startswith("tests/"))
    assert python == sorted(split.lesson)  # the lesson and nothing else: no tasks/, pretrain/, grading/
    tests = {f for f in written if f.startswith("tests/")}
    assert tests >= {"tests/conftest.py", "tests/graded/conftest.py", "tests/graded/test_graded_attention.py"}
    assert not [f for f in tests if f.startswith("tests/graded/hidden/") or not f.startswith("tests/graded/")
                and f != "tests/conftest.py"]
    others = written - set(python) - tests
    wheel = f"wheels/{handout.wheel.name}"
    assert {f for f in others if not f.startswith("data/sample/")} == {
        ".minbert-handout", "README.md", "Makefile", "setup.cfg", "pyproject.toml", ".gitignore",
        *HANDOUT_NOTEBOOKS, wheel}
    # the figures: at most 20 Python files and 3,000 lines outside tests/, 6,000 with them (the graded
    # tests' support modules are installed, layout.GRADED_SUPPORT)
    lines = {f: len((out / f).read_text().splitlines()) for f in written if f.endswith(".py")}
    assert len(python) <= 20 and sum(lines[f] for f in python) <= 3000
    assert sum(lines.values()) <= 6000, sum(lines.values())
    # the wheel: every machinery file where pip puts it, minbert/ and optim/ without __init__.py (the
    # lesson's packages extend their __path__ with them), the graded tests' support as top-level modules,
    # the marker, and no lesson or withheld file
    with zipfile.ZipFile(out / wheel) as archive:
        held = {n for n in archive.namelist() if ".dist-info/" not in n}
        metadata = next(archive.read(n).decode() for n in archive.namelist() if n.endswith("/METADATA"))
    assert held == {installed_as(f) for f in split.machinery} | {f"{MARKER}.py"}
    assert {"verdict.py", "crashes.py"} <= held and not tests & set(split.machinery)
    assert not held & {*split.lesson, *split.withheld}
    assert "Requires-Dist: torch>=2.1" in metadata and "extra == \"grading\"" in metadata


def test_in_the_handout_the_jobs_run_the_students_code_and_name_no_missing_file(handout, tmp_path):
    installed = unpack(handout.wheel, tmp_path / "installed")
    env = {**os.environ, "PYTHONPATH": f"{handout.out}{os.pathsep}{installed}"}
    probe = subprocess.run([sys.executable, "-c", "import minbert, minbert.loading.pretrained as p\n"
                            "from tasks.training import process as f, settings as s\n"
                            "print(f.in_handout(), s.adamw_class().__name__, s.attn_implementation_for("
                            "'auto', 'cpu', 'fp32'), minbert.__file__, p.__file__)"],
                           cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    assert probe.returncode == 0, probe.stderr
    in_handout, optimizer, kernel, lesson, loading = probe.stdout.split()
    assert (in_handout, optimizer, kernel) == ("True", "AdamW", "eager")
    assert Path(lesson).is_relative_to(handout.out) and Path(loading).is_relative_to(installed)
    helped = subprocess.run([sys.executable, "-m", "tasks.multitask", "--help"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120, env=env)
    assert "auto: eager, the kernel you write" in " ".join(helped.stdout.split()), helped.stderr
    assert "docs/" not in helped.stdout and "Read next" not in helped.stdout


@pytest.mark.parametrize("edition", ["default", "full"])
def test_handout_check_runs_every_job_and_the_main_job_stops_at_the_first_todo_in_reading_order(handouts,
                                                                                                  edition):
    handout = handouts[edition]
    jobs = {"tasks.multitask", "tasks.sentiment", "tasks.classify", "tasks.tag", "tasks.hierarchical",
            "pretrain.run", "grading.check_predictions"}
    assert set(handout.job_checks) == jobs
    assert first_todo(edition) == "minbert/embeddings.py::BertEmbeddings.forward"
    assert handout.job_checks["tasks.multitask"] == (f"tiny run: stops at {first_todo(edition)}; with the "
                                                     "solutions: finished")


def test_handout_check_names_a_package_export_whose_module_is_left_out(handout, tmp_path):
    copy = tmp_path / "student"
    shutil.copytree(handout.out, copy)
    init = copy / "optim" / "__init__.py"
    init.write_text(init.read_text() + "\n__all__.append('Fused')\n\n\ndef __getattr__(name):\n"
                    "    if name == 'Fused':\n        from optim.left_out import Fused\n"
                    "        return Fused\n    raise AttributeError(name)\n")
    with pytest.raises(HandoutError, match=r"optim/__init__.py exports Fused, which fails in the handout: "
                                           r"ModuleNotFoundError: No module named 'optim.left_out'"):
        check_jobs(dataclasses.replace(handout, out=copy), unpack(handout.wheel, tmp_path / "installed"))


@pytest.mark.parametrize("edition", ["default", "full"])
def test_student_readme_lists_each_todo_once_with_its_own_tests_and_points(handouts, edition):
    handout = handouts[edition]
    readme = (handout.out / "README.md").read_text()
    rows = [line for line in readme.splitlines() if line.startswith("| ") and "`" in line]
    tests = [t for t in graded_tests(STAFF_ROOT) if t.component in edition_components(edition)]
    assert len(rows) == len(edition_todos(edition))
    for component in edition_components(edition):
        for todo in COMPONENTS[component]:
            row = next(line for line in rows if f"`{todo}`" in line)
            mine = [t for t in tests if t.todo == todo]
            visible = [t for t in mine if not t.hidden_from_handout]
            hidden = sum(t.points for t in mine if t.hidden_from_handout)
            assert mine and component in row, row
            assert {n for n in re.findall(r"`(tests/graded/[^`]+)`", row)} == {t.nodeid for t in visible}, row
            score = f"{sum(t.points for t in visible):g}" + (f" + {hidden:g} hidden" if hidden else "")
            assert row.endswith(f"| {score} |"), row
    assert f"{sum(t.points for t in tests):g} points in all" in readme
    assert "hidden/" not in readme
    for component in COMPONENTS:
        if component not in edition_components(edition):
            given = f"`{COMPONENTS[component][0]}`" in readme.split("## Given", 1)[-1]  # listed, to read
            # where the handout ships its file: a given function the student cannot open is not listed
            assert given == (COMPONENTS[component][0].split("::")[0] in handout.files), component


def test_handout_refuses_unbalanced_markers_naming_the_file(tmp_path):
    staff = tmp_path / "staff"
    (staff / "minbert").mkdir(parents=True)
    (staff / "minbert" / "bad.py").write_text("def f():\n    # BEGIN SOLUTION\n    return 1\n")
    with pytest.raises(RegionError, match=r"minbert/bad\.py:2: # BEGIN SOLUTION is never closed"):
        build(tmp_path / "out", staff=staff, check=False)


def test_handout_will_not_overwrite_a_folder_it_did_not_write(tmp_path):
    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(HandoutError, match="not empty"):
        build(tmp_path, check=False)
    assert (tmp_path / "keep.txt").read_text() == "mine"


# ----- grading the reference and the handout ---------------------------------------------------------


def test_every_graded_test_declares_component_points_and_todo():
    tests = graded_tests(STAFF_ROOT)
    assert {t.component for t in tests} == set(COMPONENTS)
    assert all(t.points > 0 and (t.todo in COMPONENTS[t.component] if t.component not in WHOLE_MODEL
                                 else t.todo == "") for t in tests)
    assert {t.todo for t in tests if t.todo} == {todo for todos in COMPONENTS.values() for todo in todos}
    hidden = [t for t in tests if t.hidden_from_handout]
    assert {t.component for t in hidden} == set(COMPONENTS)  # every component has a hidden test
    assert all(t.visibility == "after_published" for t in hidden)


@pytest.fixture(scope="module")
def reference_results():
    with ThreadPoolExecutor(max_workers=2) as pool:
        editions = ("default", "full")
        return dict(zip(editions, pool.map(lambda edition: grade(STAFF_ROOT, edition=edition), editions)))


@pytest.mark.parametrize("edition", ["default", "full"])
def test_reference_gets_full_marks(reference_results, edition):
    results = reference_results[edition]
    check_schema(results)
    assert {t["tags"][0] for t in results["tests"]} == set(edition_components(edition))
    assert all(t["status"] == "passed" for t in results["tests"]), \
        [t["name"] + "\n" + t["output"] for t in results["tests"] if t["status"] != "passed"]
    assert results["score"] == sum(t["max_score"] for t in results["tests"]) > 0


@pytest.mark.parametrize("edition", ["default", "full"])
def test_handout_gets_zero_on_every_graded_test_and_a_valid_results_json(handouts, edition, tmp_path):
    out = tmp_path / "results.json"
    assert grade_main(["--submission", str(handouts[edition].out), "--out", str(out),
                       "--edition", edition]) == 0
    results = json.loads(out.read_text())
    check_schema(results)
    check_no_paths(results)
    tests = [t for t in graded_tests(STAFF_ROOT) if t.component in edition_components(edition)]
    assert results["score"] == 0 and len(results["tests"]) == len(tests)
    assert all(t["status"] == "failed" and t["score"] == 0 for t in results["tests"])
    for entry in results["tests"]:  # each waits for a TODO of its own component, hidden tests included
        stub = re.search(r"NotImplementedError: TODO: (\S+)", entry["output"])
        assert stub and stub.group(1) in component_todos(entry["tags"][0]), \
            entry["name"] + "\n" + entry["output"]


def test_schema_rejects_what_gradescope_would():
    good = {"score": 1.0, "execution_time": 3, "output": "", "visibility": "visible",
            "stdout_visibility": "hidden",
            "tests": [{"name": "a", "number": "1.1", "score": 1.0, "max_score": 1.0, "status": "passed",
                       "output": "", "visibility": "visible"}]}
    validate(good)
    for broken in ({**good, "tests": [{**good["tests"][0], "status": "ok"}]},
                   {**good, "visibility": "students"}, {k: v for k, v in good.items() if k != "tests"},
                   {**good, "execution_time": 2.5}):
        with pytest.raises(SchemaError):
            validate(broken)
        if jsonschema is not None:
            with pytest.raises(jsonschema.ValidationError):
                jsonschema.validate(broken, SCHEMA)


def test_a_grader_failure_still_writes_a_valid_results_json(tmp_path):
    out = tmp_path / "results.json"
    grade_main(["--submission", str(tmp_path), "--staff", str(tmp_path / "nowhere"), "--out", str(out)])
    results = json.loads(out.read_text())
    check_schema(results)
    assert results["score"] == 0 and "autograder failed" in results["output"]


# ----- mutants: each realistic bug costs points in its component and nowhere else ---------------------


def wholes_of(mutation) -> list[str]:
    """The whole-model components a mutation must cost points in too: a bug in a part of the model shows in
    the whole-model check, unless only training mode shows it (mutation.whole_model False; eval mode there)."""
    return [w for w, parts in WHOLE_MODEL.items() if mutation.component in parts and mutation.whole_model]


def batches(mutations) -> list[list]:
    """Mutants graded together in one tree, to grade 47 mutants in about 20 runs: at most one per component,
    so each component's lost points are its own mutant's, and at most one that the whole-model check sees,
    so each of its failures is that one's."""
    groups: list[list] = []
    for mutation in sorted(mutations, key=lambda m: not wholes_of(m)):  # the whole-model ones spread first
        group = next((g for g in groups if all(m.component != mutation.component for m in g)
                      and not (wholes_of(mutation) and any(wholes_of(m) for m in g))), None)
        if group is None:
            groups.append(group := [])
        group.append(mutation)
    return groups


@pytest.fixture(scope="module")
def mutant_results(tmp_path_factory):
    """mutation name -> (the results of the tree it was graded in, the mutations of that tree)."""
    root = tmp_path_factory.mktemp("mutants")

    def run(number_and_group):
        number, group = number_and_group
        tree = mutant(STAFF_ROOT, group[0], root / f"batch-{number}")
        for mutation in group[1:]:
            mutation.apply(tree)
        return group, grade(tree, edition="full")

    with ThreadPoolExecutor(max_workers=2) as pool:
        graded = list(pool.map(run, enumerate(batches(MUTATIONS))))
    return {m.name: (results, group) for group, results in graded for m in group}


def test_mutants_graded_together_never_share_a_component_or_the_whole_model_check():
    groups = batches(MUTATIONS)
    assert sorted(m.name for g in groups for m in g) == sorted(m.name for m in MUTATIONS)
    for group in groups:
        assert len({m.component for m in group}) == len(group)
        assert sum(bool(wholes_of(m)) for m in group) <= 1
    assert len(groups) < len(MUTATIONS) / 2


@pytest.mark.slow
@pytest.mark.parametrize("mutation", MUTATIONS, ids=lambda m: m.name)
def test_mutant_loses_points_in_its_component_only_and_is_told_why(mutation, mutant_results):
    results, group = mutant_results[mutation.name]
    check_schema(results)
    check_no_paths(results)
    marks = full_marks(results)
    wholes = wholes_of(mutation)
    for component in [mutation.component, *wholes]:
        assert not marks[component], f"{mutation.description}: the {component} tests all pass"
    # The tree's other mutants break their own components (and none the whole-model check but this one).
    expected = {m.component for m in group} | {w for m in group for w in wholes_of(m)}
    broken_elsewhere = [c for c, full in marks.items() if not full and c not in expected]
    assert not broken_elsewhere, f"{mutation.description} also cost points in {broken_elsewhere}"
    for whole in wholes:  # each failure says where the outputs first differ, or which line of theirs raised
        told = [t["output"] for t in results["tests"] if t["tags"] == [whole] and t["status"] == "failed"]
        assert all("the first output to differ" in out or re.search(r"minbert/\S+\.py:\d+", out)
                   for out in told), "\n---\n".join(told)
    failed = [t["output"] for t in results["tests"]
              if t["tags"] == [mutation.component] and t["status"] == "failed"]
    # The first failure the student reads names the mistake (a later test that would is read too late).
    assert failed and mutation.message in failed[0], \
        f"the first failing test does not tell the student {mutation.message!r}:\n" + "\n---\n".join(failed)


@pytest.mark.slow
def test_hidden_failures_show_their_message_but_not_their_code(mutant_results):
    hidden = {t.nodeid.split("::", 1)[1]: t for t in graded_tests(STAFF_ROOT) if t.hidden_from_handout}
    seen = 0
    for results in {id(r): r for r, _ in mutant_results.values()}.values():
        for entry in results["tests"]:
            name = entry["name"].split(": ", 1)[1]
            if name not in hidden or entry["status"] != "failed":
                continue
            seen += 1
            source = (STAFF_ROOT / hidden[name].file).read_text().splitlines()
            quoted = [line.strip() for line in source
                      if len(line.strip()) > 25 and line.strip() in entry["output"]]
            assert not quoted, f"{entry['name']} shows its code: {quoted}"
            assert "test_hidden_" not in entry["output"], entry["output"]
            assert re.search(r"failed: \w+: \S", entry["output"]), entry["output"]  # a message, not a type
    assert seen >= len(batches(MUTATIONS)) // 2


def test_every_component_has_a_mutant():
    assert {m.component for m in MUTATIONS} == set(COMPONENTS) - set(WHOLE_MODEL)  # whole: its parts' mutants


@pytest.mark.slow
def test_a_bug_outside_the_edition_costs_nothing(tmp_path):
    """The default edition gives the no-decay rule as reference code and does not grade it. (A bug in
    given model code, such as the feed-forward, would cost points in the whole-model check.)"""
    mutation = next(m for m in MUTATIONS if m.component == "no_decay")
    assert "no_decay" not in edition_components("default")
    results = grade(mutant(STAFF_ROOT, mutation, tmp_path / "sub"), edition="default")
    assert {t["tags"][0] for t in results["tests"]} == set(edition_components("default"))
    assert results["score"] == sum(t["max_score"] for t in results["tests"])


# ----- hostile submissions ------------------------------------------------------------------------------


def _patch(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new))


@pytest.mark.slow
def test_hangs_crashes_floods_and_edited_tests_are_contained(tmp_path, handout):
    sub = tmp_path / "sub" / "my-repo"  # nested one level, as a zip upload often is
    for package in SUBMITTED_PACKAGES:
        if (STAFF_ROOT / package).is_dir():
            shutil.copytree(STAFF_ROOT / package, sub / package, ignore=shutil.ignore_patterns("__pycache__"))
    heads = sub / "minbert" / "task_heads.py"
    # cosine: hangs on one input, ignoring pytest-timeout's alarm (the watcher must kill it)
    _patch(heads, "    return (u * v).sum(dim=-1) /", "    if u.shape[0] == 4:\n        import signal\n"
           "        signal.signal(signal.SIGALRM, signal.SIG_IGN)\n        while True:\n            pass\n"
           "    return (u * v).sum(dim=-1) /")
    # mean_pool: kills the interpreter on one input
    _patch(sub / "minbert" / "pooling.py", "    mask = attention_mask.unsqueeze(-1)",
           "    if hidden_states.shape == (2, 3, 2):\n"
           "        import os\n        os._exit(3)\n    mask = attention_mask.unsqueeze(-1)")
    # encoder: prints 5 MB on every call (and still computes the right thing)
    _patch(sub / "minbert" / "encoder.py", "        for layer in self.layer:",
           "        print('x' * 5_000_000)\n        for layer in self.layer:")
    # attention: the handout's stub, with tests and pytest settings edited to pass anyway
    shutil.copy(handout.out / "minbert" / "attention.py", sub / "minbert" / "attention.py")
    (sub / "tests" / "graded").mkdir(parents=True)
    (sub / "tests" / "graded" / "test_graded_attention.py").write_text("def test_anything():\n    pass\n")
    (sub / "conftest.py").write_text("import pytest\n\n@pytest.hookimpl(tryfirst=True)\n"
                                     "def pytest_runtest_call(item):\n    return True\n")
    (sub / "setup.cfg").write_text("[tool:pytest]\naddopts = -p no:python\n")
    (sub / "tasks" / "__init__.py").write_text("")
    results = grade(tmp_path / "sub", time_limit=3.0,
                    components=["attention", "encoder", "mean_pool", "cosine"])
    check_schema(results)
    check_no_paths(results)  # the crash and timeout reports quote the child's output
    scores = component_scores(results)
    by_name = {t["name"].split(": ", 1)[1]: t for t in results["tests"]}
    assert scores["attention"][0] == 0
    assert scores["encoder"][0] == scores["encoder"][1]  # printing megabytes costs nothing
    assert all(len(t["output"]) < 10_000 for t in results["tests"])
    assert by_name["test_mean_pool_by_hand"]["status"] == "failed"
    assert "crashed" in by_name["test_mean_pool_by_hand"]["output"]
    assert by_name["test_padding_vectors_do_not_matter"]["status"] == "passed"  # the rest still ran
    assert by_name["test_cosine_similarity_by_hand"]["status"] == "failed"
    assert "time limit" in by_name["test_cosine_similarity_by_hand"]["output"]
    assert by_name["test_cosine_similarity_matches_torch_and_ignores_scale"]["status"] == "passed"
    assert "my-repo" in results["output"]


@pytest.mark.slow
def test_a_module_that_kills_the_interpreter_on_import_costs_only_the_tests_that_import_it(tmp_path):
    for package in SUBMITTED_PACKAGES:
        if (STAFF_ROOT / package).is_dir():
            shutil.copytree(STAFF_ROOT / package, tmp_path / package,
                            ignore=shutil.ignore_patterns("__pycache__"))
    heads = tmp_path / "minbert" / "task_heads.py"
    heads.write_text("import os\nos._exit(7)\n" + heads.read_text())
    results = grade(tmp_path, components=["adamw", "cosine"])
    check_no_paths(results)
    scores = component_scores(results)
    assert scores["adamw"][0] == scores["adamw"][1] and scores["cosine"][0] == 0
    assert all("crashed" in t["output"] for t in results["tests"] if t["tags"] == ["cosine"])


# ----- the Gradescope autograder ---------------------------------------------------------------------------


def test_autograder_archive_holds_the_grader_and_the_editions_stubs_and_no_solution(tmp_path):
    import zipfile

    from grading.autograder import build_archive

    archive = tmp_path / "autograder.zip"
    names = build_archive(archive)
    assert {"setup.sh", "run_autograder", "grading/grade.py",
            "tests/graded/hidden/test_hidden_layer.py"} <= set(names)
    assert "tests/mutations.py" not in names and "tests/test_model.py" not in names
    with zipfile.ZipFile(archive) as z:
        assert "math.sqrt(query.size(-1))" not in z.read("minbert/attention.py").decode()
        # the default edition: the feed-forward ships as reference code; run_autograder grades that edition
        assert 'approximate="none")' in z.read("minbert/layer.py").decode()
        assert 'EDITION="${GRADING_EDITION:-default}"' in z.read("run_autograder").decode()
        assert (z.getinfo("run_autograder").external_attr >> 16) & 0o111
    build_archive(tmp_path / "full.zip", edition="full")
    with zipfile.ZipFile(tmp_path / "full.zip") as z:
        assert 'approximate="none")' not in z.read("minbert/layer.py").decode()
        assert 'EDITION="${GRADING_EDITION:-full}"' in z.read("run_autograder").decode()
    # Running it, in an environment its own setup.sh made: tests/test_gradescope.py, the clean room.
