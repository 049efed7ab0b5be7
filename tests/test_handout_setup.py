"""The student handout as a student sets it up and runs it: its own `make setup` in a new virtual environment,
`make test`, the main job from another folder, with the lesson untouched, solved and with a bug planted, and
a notebook run from its own folder.

Kept cheap: the new environment sees this one's site-packages through a .pth line, so `make setup` finds
torch and the requirements there and installs only what the handout brings (the wheel, the lesson editable);
tests/test_gradescope.py's clean room installs the same wheel with its requirements from the package index
alone. About a minute and a half on 2 busy cores.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from grading.documents import first_todo
from grading.grade import STAFF_ROOT
from grading.handout import build
from grading.layout import layout
from mutations import MUTATIONS
from grading.regions import strip_regions

pytestmark = [pytest.mark.slow, pytest.mark.checkpoint]


def run(command: list[str], cwd: Path, timeout: float = 600, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**clean, "MAKEFLAGS": "", **env})


@pytest.fixture(scope="module")
def student(tmp_path_factory):
    """The default handout, unpacked and set up by its own `make setup`: (its folder, its python)."""
    out = build(tmp_path_factory.mktemp("student") / "minbert", check=False).out
    venv = out / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()"
                           "['purelib'])"], capture_output=True, text=True, check=True).stdout.strip()
    site = Path(site)
    (site / "development.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")  # pip and torch from here
    setup = run(["make", "setup"], out)
    assert setup.returncode == 0, setup.stdout[-3000:] + setup.stderr[-3000:]
    python = venv / "bin" / "python"
    where = run([str(python), "-c", "import minbert.loading, tasks; print(minbert.__path__, tasks.__file__)"],
                out.parent)
    lesson, installed = where.stdout.rsplit(" ", 1)
    assert str(out / "minbert") in lesson and str(site / "minbert") in lesson, where.stdout + where.stderr
    assert installed.strip().startswith(str(site)), where.stdout  # the wheel's, not this repository's
    return out, python


def test_make_test_runs_the_graded_tests_and_ends_with_the_points_per_component(student):
    out, _ = student
    tested = run(["make", "test", "PYTEST_ARGS=-k embeddings -p no:cacheprovider"], out)
    assert tested.returncode != 0 and "NotImplementedError: TODO: minbert/embeddings.py" in tested.stdout
    table = tested.stdout.split("points per component", 1)[1]
    assert "embeddings" in table and " 0 / " in table, tested.stdout[-2000:]


def job(python: Path, out: Path, model: Path, run_dir: Path) -> subprocess.CompletedProcess:
    """The main job, tiny, started from a folder outside the handout."""
    return run([str(python), "-m", "tasks.multitask", "--model", str(model), "--data-dir",
                str(out / "data" / "sample"), "--out", str(run_dir), "--limit", "8", "--batch_size", "4",
                "--epochs", "1", "--max-length", "32", "--max-steps", "2", "--threads", "1"], run_dir.parent)


def dev_metrics(run_dir: Path) -> dict:
    return json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[-1])["dev"]


def test_the_main_job_runs_the_students_lesson_files(student, tiny_model_dir, tmp_path):
    out, python = student
    untouched = job(python, out, tiny_model_dir, tmp_path / "untouched")
    assert untouched.returncode != 0
    assert untouched.stderr.rstrip().endswith(f"NotImplementedError: TODO: {first_todo('default')}"), \
        untouched.stderr[-3000:]
    for relative in layout(STAFF_ROOT, "default").lesson:  # the student's solutions: the reference's
        text = strip_regions((STAFF_ROOT / relative).read_text(), relative, frozenset())[0]
        (out / relative).write_text(text)
    solved = job(python, out, tiny_model_dir, tmp_path / "solved")
    assert solved.returncode == 0, solved.stderr[-3000:]
    again = job(python, out, tiny_model_dir, tmp_path / "again")
    assert dev_metrics(tmp_path / "again") == dev_metrics(tmp_path / "solved")  # fixed seeds
    bug = next(m for m in MUTATIONS if m.name == "attention-no-scale")
    bug.apply(out)
    broken = job(python, out, tiny_model_dir, tmp_path / "broken")
    assert broken.returncode == 0 and again.returncode == 0, broken.stderr[-3000:]
    assert dev_metrics(tmp_path / "broken") != dev_metrics(tmp_path / "solved")  # the planted bug ran
    # the notebook of the main job's runs, from its own folder (the lesson found through the .pth file)
    notebook = ("import nbclient, nbformat\n"
                "book = nbformat.read('multitask.ipynb', as_version=4)\n"
                "nbclient.NotebookClient(book, timeout=300, kernel_name='python3').execute()\n"
                "print('ran', len(book.cells))")
    drawn = run([str(python), "-c", notebook], out / "notebooks", MINBERT_RUN=str(tmp_path / "solved"))
    assert drawn.returncode == 0 and drawn.stdout.startswith("ran"), drawn.stderr[-3000:]
