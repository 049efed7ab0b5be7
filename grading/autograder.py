"""Build the Gradescope autograder archive: the grader, the staff tests, the lesson as stubs, and the wheel.

    python -m grading.autograder OUT.zip                  then upload OUT.zip as the assignment's autograder
    python -m grading.autograder OUT.zip --edition full   for a handout built with --edition full

The archive holds setup.sh and run_autograder at its top (Gradescope's layout: it unpacks the archive to
/autograder/source and runs setup.sh once, then run_autograder per submission), setup.cfg (its pytest
settings), the grader (grading/; the bug catalogue, which quotes the solutions, is tests/mutations.py),
tests/conftest.py and all of tests/graded (hidden tests included), the lesson (layout.py) with the edition's
solution regions stubbed out, so that no solution is in the archive and a lesson file a submission lacks is
graded as the stub, in wheels/ the handout's wheel of the same commit (handout.build_wheel): setup.sh
installs it, so the graded code runs on the machinery a student's handout installs, and what the
reference's run expects of every graded check (grade.EXPECTATIONS), computed here, since the archive has no
solution to run. The edition is written into run_autograder, which grades only its components
(GRADING_EDITION overrides it).

Read next: docs/teaching.md.
"""

from __future__ import annotations

import argparse
import json
import stat
import sys
import tempfile
import zipfile
from pathlib import Path

from grading.config import DEFAULT_EDITION, EDITIONS, GRADED_TESTS, edition_todos
from grading.grade import EXPECTATIONS, expectations
from grading.handout import WHEELS, build_wheel
from grading.layout import layout, repository_files
from grading.regions import strip_regions
from tasks.training.flags import output_file

STAFF_ROOT = Path(__file__).resolve().parents[1]
GRADESCOPE = "grading/gradescope"


def included(relative: str, lesson: tuple[str, ...]) -> bool:
    return (relative in ("setup.cfg", "pyproject.toml", "tests/conftest.py") or relative in lesson
            or relative.startswith((f"{GRADED_TESTS}/", "grading/"))
            and not relative.startswith((f"{GRADESCOPE}/", "grading/student/")))


EDITION_LINE = 'EDITION="${GRADING_EDITION:-default}"'  # in run_autograder; the archive's edition replaces it


def entry(name: str, mode: int = 0o644) -> zipfile.ZipInfo:
    """An archive member that `unzip` unpacks readable to all: the grader copies the staff files into the
    staging tree with their modes, and the child's user must read them (writestr's default is 0600)."""
    info = zipfile.ZipInfo(name)
    info.external_attr, info.compress_type = (stat.S_IFREG | mode) << 16, zipfile.ZIP_DEFLATED
    return info


def build_archive(out: Path, staff: Path = STAFF_ROOT, edition: str = DEFAULT_EDITION) -> list[str]:
    """Write the archive for `edition`; return the names it holds."""
    todos = edition_todos(edition)
    names = []
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for script in ("setup.sh", "run_autograder"):
            text = (staff / GRADESCOPE / script).read_text(encoding="utf-8")
            if script == "run_autograder":
                if text.count(EDITION_LINE) != 1:
                    raise RuntimeError(f"{GRADESCOPE}/run_autograder must hold the line {EDITION_LINE} once")
                text = text.replace(EDITION_LINE, EDITION_LINE.replace(":-default}", f":-{edition}}}"))
            archive.writestr(entry(script, 0o755), text.encode("utf-8"))
            names.append(script)
        split = layout(staff, edition)
        for relative in repository_files(staff):
            if not included(relative, split.lesson):
                continue
            data = (staff / relative).read_bytes()
            if relative in split.lesson:
                data = strip_regions(data.decode("utf-8"), relative, todos)[0].encode("utf-8")
            archive.writestr(entry(relative), data)
            names.append(relative)
        with tempfile.TemporaryDirectory(prefix="minbert-autograder-") as where:
            wheel = build_wheel(Path(where), staff, edition, split)
            archive.writestr(entry(f"{WHEELS}/{wheel.name}"), wheel.read_bytes())
            names.append(f"{WHEELS}/{wheel.name}")
        archive.writestr(entry(EXPECTATIONS), json.dumps(expectations(staff)))
        names.append(EXPECTATIONS)
    return names


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m grading.autograder", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=output_file, metavar="OUT.zip", help="the archive to write")
    parser.add_argument("--edition", choices=sorted(EDITIONS), default=DEFAULT_EDITION,
                        help="the edition the handout was built for (grading/config.py EDITIONS; default: "
                             f"{DEFAULT_EDITION})")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    out = Path(args.out)
    # output_file accepts a folder that does not exist yet (it can be made); zipfile would not make it.
    out.parent.mkdir(parents=True, exist_ok=True)
    names = build_archive(out, edition=args.edition)
    print(f"wrote {args.out} ({len(names)} files, edition {args.edition}); upload it as the Gradescope "
          "autograder")
    return 0


if __name__ == "__main__":
    sys.exit(main())
