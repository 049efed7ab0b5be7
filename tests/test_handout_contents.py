"""Tests for grading/contents.py: what a handout ships is computed from the code (an import closure of the
edition's TODOs, their tests and the jobs that use them), on a small made-up repository; the real
handouts' contents are checked in tests/test_grading.py (built once per edition there)."""

from __future__ import annotations

import json
import textwrap

import pytest

import grading.contents
from grading.contents import closure, contents, imports

NOTEBOOK = {"cells": [{"cell_type": "markdown", "source": ["See [the page](../docs/page.md).\n"]},
                      {"cell_type": "code", "source": ["%matplotlib inline\n", "{code}\n"]}]}


def notebook(code: str, extra_text: str = "") -> str:
    cells = json.loads(json.dumps(NOTEBOOK))
    cells["cells"][1]["source"][1] = code + "\n"
    cells["cells"][0]["source"].append(extra_text)
    return json.dumps(cells)


REPOSITORY = {
    "Makefile": "run:\n\tpython -m tasks.multitask\n",
    "setup.cfg": "[metadata]\nname = x\n",
    # A lazy package __init__: a name's module is imported on first use, from a table.
    "minbert/__init__.py": '''
        import importlib
        _LAZY = {"Model": "minbert.model", "Encoder": "minbert.fast.encoder"}
        __all__ = list(_LAZY)
        def __getattr__(name):
            return getattr(importlib.import_module(_LAZY[name]), name)
        ''',
    "minbert/config.py": "SIZE = 4\n",
    "minbert/model.py": '''
        from minbert import config
        from .layer import Layer
        class Model:
            def forward(self, x):
                return Layer().forward(x) * config.SIZE
        ''',
    "minbert/layer.py": '''
        class Layer:
            def forward(self, x):
                # BEGIN SOLUTION
                return x
                # END SOLUTION
        ''',
    "minbert/fast/__init__.py": "",
    "minbert/fast/encoder.py": "def Encoder():\n    from ..extras import kernel\n",
    "minbert/extras/__init__.py": "",
    "minbert/extras/kernel.py": "K = 1\n",
    "minbert/unused.py": "import minbert.model\n",
    "tasks/__init__.py": "",
    "tasks/multitask.py": '''
        from minbert.model import Model
        from tasks.data.sources import SAMPLE
        def main():
            return Model().forward(1)
        if __name__ == "__main__":
            main()
        ''',
    "tasks/data/__init__.py": "",
    "tasks/data/sources.py": '''
        from pathlib import Path
        SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample"
        ''',
    "tasks/tag.py": '''
        from minbert.model import Model
        if __name__ == "__main__":
            Model().forward(2)
        ''',
    "pretrain/__init__.py": "",
    "minbert/masking.py": '''
        def helper(x):
            # BEGIN SOLUTION
            return x
            # END SOLUTION
        def mask(x):
            return helper(x)
        def unused_here(x):
            return x
        ''',
    "pretrain/run.py": '''
        from minbert.model import Model
        from minbert.masking import mask
        if __name__ == "__main__":
            mask(Model().forward(3))
        ''',
    "pretrain/other_job.py": '''
        from minbert import masking
        if __name__ == "__main__":
            masking.unused_here(1)
        ''',
    "data/sample/train.csv": "a,b\n",
    "data/sample/make.py": "import csv\n",
    "data/other/big.csv": "a,b\n",
    "tests/conftest.py": "import minbert.config\n",
    "tests/test_unit.py": "import minbert.unused\n",
    "tests/graded/conftest.py": "",
    "tests/graded/helpers.py": "def check(a, b):\n    assert a == b\n",
    "tests/graded/test_graded_layer.py": '''
        from pathlib import Path
        from helpers import check
        from minbert.layer import Layer
        STORED = Path(__file__).resolve().parent / "reference" / "layer.safetensors"
        def test_layer():
            check(Layer().forward(1), 1)
        ''',
    "tests/graded/reference/layer.safetensors": "",
    "tests/graded/reference/other.safetensors": "",
    "notebooks/model.ipynb": notebook("from minbert.model import Model\nprint('run python -m pretrain.run')"),
    "notebooks/tagging.ipynb": notebook("from tasks.tag import main"),
    "notebooks/reads_runs.ipynb": notebook("import json\nprint('run python -m tasks.tag first')"),
    "docs/page.md": "![figure](figures/a.png)\n",
    "docs/figures/a.png": "",
    "docs/other.md": "",
    "bench/speed.py": "import minbert.model\nif __name__ == '__main__':\n    pass\n",
}
TODOS = frozenset({"minbert/layer.py::Layer.forward", "minbert/masking.py::helper"})


@pytest.fixture
def shipped(monkeypatch):
    monkeypatch.setattr(grading.contents, "edition_todos", lambda edition: TODOS)
    files = {path: textwrap.dedent(text).lstrip("\n") for path, text in REPOSITORY.items()}
    return contents("default", sorted(files), files.__getitem__, ["tests/graded/test_graded_layer.py"],
                    lambda path: not path.startswith("bench/"))


def test_the_closure_follows_package_inits_relative_imports_and_modules_named_as_strings(shipped):
    files = set(REPOSITORY)
    assert imports("minbert/model.py", textwrap.dedent(REPOSITORY["minbert/model.py"]), files) == {
        "minbert/__init__.py", "minbert/config.py", "minbert/layer.py"}
    # the lazy __init__'s table names its modules: what it can re-export ships with it
    assert imports("minbert/__init__.py", textwrap.dedent(REPOSITORY["minbert/__init__.py"]), files) == {
        "minbert/model.py", "minbert/fast/__init__.py", "minbert/fast/encoder.py"}
    # an import inside a function counts; `from ..extras import kernel` names a module
    assert "minbert/extras/kernel.py" in closure(["minbert/fast/encoder.py"], files,
                                                 {f: textwrap.dedent(t) for f, t in REPOSITORY.items()})
    assert {"minbert/fast/encoder.py", "minbert/extras/kernel.py"} <= shipped.files
    assert "minbert/unused.py" not in shipped.files and "tests/test_unit.py" not in shipped.files


def test_a_job_ships_when_it_reaches_a_todo_the_main_job_does_not(shipped):
    # pretrain.run calls mask, which runs the TODO helper; tasks.tag and pretrain.other_job reach only what
    # the main job reaches (the model) or no TODO at all (unused_here)
    assert shipped.jobs == ["tasks.multitask", "pretrain.run"]
    assert {"tasks/multitask.py", "pretrain/run.py", "minbert/masking.py"} <= shipped.files
    assert not {"tasks/tag.py", "pretrain/other_job.py", "bench/speed.py"} & shipped.files


def test_tests_their_helpers_and_reference_files_and_the_data_a_module_names_ship(shipped):
    assert {"tests/conftest.py", "tests/graded/conftest.py", "tests/graded/helpers.py",
            "tests/graded/test_graded_layer.py", "tests/graded/reference/layer.safetensors"} <= shipped.files
    assert "tests/graded/reference/other.safetensors" not in shipped.files
    assert {"data/sample/train.csv", "data/sample/make.py"} <= shipped.files  # the folder, its script too
    assert "data/other/big.csv" not in shipped.files
    assert {"Makefile", "setup.cfg"} <= shipped.files


def test_a_notebook_ships_when_what_it_imports_and_the_jobs_it_names_ship(shipped):
    assert shipped.notebooks == ["notebooks/model.ipynb"]
    assert shipped.left_out_notebooks == {"notebooks/reads_runs.ipynb": "needs tasks/tag.py",
                                          "notebooks/tagging.ipynb": "needs tasks/tag.py"}
    # the documents a shipped notebook links to ship, and what they link to
    assert {"docs/page.md", "docs/figures/a.png"} <= shipped.files and "docs/other.md" not in shipped.files
