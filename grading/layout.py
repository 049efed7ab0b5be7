"""Which files are the lesson and which are machinery, for an edition: the one place that says so.

The LESSON is what a student reads and writes, in their handout: the package files of minbert/ and optim/,
the modules of the reading chain (from minbert/config.py, each module's "Read next" names the next one, as
long as it is a top-level module of those two packages) and every file holding one of the edition's TODOs
(minbert/lora.py in the full edition). The MACHINERY is every other file of the packages (loading and
saving, the tokenizer's files, the fast paths, the jobs and their helpers in tasks/ and pretrain/), the
students' check of their prediction files and the graded tests' support (how a check is decided, how a crash
is explained): it reaches them installed, as one wheel (handout.build_wheel).
WITHHELD: a fast path whose code restates one of the edition's TODOs (RESTATES), which ships nowhere, since a
TODO's answer lives in exactly one place.

The handout builder, the autograder archive and the grader's staging tree all ask `layout`.

Read next: handout.py.
"""

from __future__ import annotations

import contextlib
import posixpath
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from grading.config import edition_todos

LESSON_PACKAGES = ("minbert", "optim")
PACKAGES = LESSON_PACKAGES + ("tasks", "pretrain")  # the packages the wheel installs the rest of
FIRST_READ = "minbert/config.py"
# A fast path whose code restates a TODO: left out of every edition that stubs that TODO (its C kernel is
# adamw_update's arithmetic, and the Python wrapper is nothing without it).
RESTATES = {"optim/adamw.py::adamw_update": ("optim/fast_adamw.py", "optim/adamw_kernel.c")}
INSTALLED_TOOLS = ("grading/check_predictions.py",)  # run by students (python -m grading.check_predictions)
# Imported by name by tests/graded/graded_helpers.py and conftest.py: found beside them in this repository and
# in the grader's staging tree (its own copy), installed as top-level modules of a handout's wheel.
GRADED_SUPPORT = ("tests/graded/verdict.py", "tests/graded/crashes.py")
_READ_NEXT = re.compile(r"^Read next: (\S+?)[,.]?(?:\s|$)", re.M)


@dataclass(frozen=True)
class Layout:
    lesson: tuple[str, ...]  # in the order a student reads them (the reading chain first)
    machinery: tuple[str, ...]
    withheld: tuple[str, ...]


def repository_files(root: Path) -> list[str]:
    """The repository's files: git's tracked and untracked-but-not-ignored files, else a filtered walk."""
    with contextlib.suppress(OSError, subprocess.CalledProcessError):
        listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=root,
                                capture_output=True, check=True).stdout.decode().split("\0")
        files = [f for f in listed if f and (root / f).is_file()]
        if files:
            return sorted(files)
    skip = {".git", ".venv", "__pycache__", ".pytest_cache", ".hypothesis", "runs", "build", "dist"}
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*")
                  if p.is_file() and not skip & set(p.relative_to(root).parts)
                  and not any(part.endswith(".egg-info") for part in p.parts))


def reading_chain(root: Path, files: set[str]) -> list[str]:
    """The lesson's modules in reading order: minbert/config.py, then each one's "Read next"."""
    chain, here = [], FIRST_READ
    while here in files and here not in chain:
        chain.append(here)
        following = _READ_NEXT.search((root / here).read_text(encoding="utf-8"))
        if not following:
            break
        here = posixpath.normpath(posixpath.join(posixpath.dirname(here), following.group(1)))
        if not _top_level_lesson_module(here):
            break
    return chain


def _top_level_lesson_module(path: str) -> bool:
    parts = path.split("/")
    return len(parts) == 2 and parts[0] in LESSON_PACKAGES and parts[1].endswith(".py")


def layout(root: Path, edition: str, files: list[str] | None = None) -> Layout:
    """The lesson, machinery and withheld files of `edition` among the package files of the tree at `root`
    (files: its files, relative; default: repository_files)."""
    files = repository_files(root) if files is None else files
    present = set(files)
    todos = edition_todos(edition)
    lesson = reading_chain(root, present)
    lesson += sorted({t.split("::")[0] for t in todos} - set(lesson))
    lesson += [f"{p}/__init__.py" for p in LESSON_PACKAGES if f"{p}/__init__.py" in present]
    withheld = sorted({f for todo, paths in RESTATES.items() if todo in todos for f in paths} & present)
    machinery = [f for f in files if f.split("/", 1)[0] in PACKAGES and "__pycache__" not in f
                 and f not in lesson and f not in withheld]
    machinery += [f for f in INSTALLED_TOOLS + GRADED_SUPPORT if f in present]
    return Layout(tuple(f for f in lesson if f in present), tuple(machinery), tuple(withheld))


def installed_as(relative: str) -> str:
    """Where a machinery file lies in the wheel: at its path, a graded test's support module at the top."""
    return posixpath.basename(relative) if relative in GRADED_SUPPORT else relative
