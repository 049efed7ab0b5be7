"""The files one training step of the main job crosses, from a CSV row to the optimizer's step, and how often
control goes back into a file it had left.

Runs `python -m tasks.multitask` (the embedded model, the job's defaults, one step) under `sys.setprofile` and
keeps each Python call into the repository's own files (minbert/, optim/, tasks/) in four windows, each the
first of its kind for the task of the first step:
1. rows: tasks/data/course.py's read_course_file of the task's train file (CSV rows to examples);
2. tokens: the task's TaskData built (its splits to word-piece ids);
3. batches: the task's train_batches (ids to padded batches);
4. step: the loop's zero_grad to the return of AdamW's step (loss, forward, backward, clipping, update).
Module bodies run by an import inside a window are left out (loading, not the path).

A move is a call from one of our files into another, counted once however often it happens (a loop over six
layers makes the same calls six times: one way through the code). `files` is how many of our files the
moves enter; `returns` how many moves enter a file the path had already entered: a callback into a caller
still running, or a second visit. Coming back from a call is not a move. The same counts by class or
function ("objects") show the calls back and forth inside one file:

    python -m bench.step_path                      # each window's moves, then the counts
    python -m bench.step_path --objects            # the moves between classes and functions too
    python -m bench.step_path --quiet              # the counts only

Everything after the bench's own flags goes to the job's parser (default: --limit 96 --epochs 1 --threads 1
--precision fp32). This is a measurement, not a test: tests/test_architecture.py calls `trace_path` to
check docs/architecture.md's drawing of the step.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from types import FrameType

ROOT = Path(__file__).resolve().parents[1]
OURS = tuple(str(ROOT / package) + "/" for package in ("minbert", "optim", "tasks"))
WINDOWS = ("rows", "tokens", "batches", "step")
JOB_DEFAULTS = ["--limit", "96", "--epochs", "1", "--threads", "1", "--precision", "fp32"]


def ours(frame: FrameType | None) -> FrameType | None:
    """The innermost frame in our files, from `frame` outwards."""
    while frame is not None and not frame.f_code.co_filename.startswith(OURS):
        frame = frame.f_back
    return frame


def place(frame: FrameType | None) -> tuple[str, str] | tuple[None, None]:
    """(file, file::object): the repository-relative file of a frame of ours, and its class or function."""
    if frame is None:
        return None, None
    path = str(Path(frame.f_code.co_filename).relative_to(ROOT))
    return path, f"{path}::{frame.f_code.co_qualname.split('.')[0]}"


class Recorder:
    """Every call from one of our files into another, per window and task."""

    def __init__(self) -> None:
        # (window, task) -> each call into our files: (caller's file, its object, callee's file, its object)
        self.moves: dict[tuple[str, str], list[tuple[str, str, str, str]]] = {}
        self.open: list[tuple[FrameType | None, str, str]] = []  # (frame that closes it, window, task)
        self.step_task: str | None = None
        self.importing: FrameType | None = None

    def window_of(self, frame: FrameType) -> tuple[str, str] | None:
        """(window, task) that this call opens, or None."""
        code, local = frame.f_code, frame.f_locals
        if code.co_name == "read_course_file" and code.co_filename.endswith("tasks/data/course.py"):
            return ("rows", local.get("task")) if local.get("split") == "train" else None
        if code.co_name == "__init__" and "task" in local and code.co_filename.endswith("course_task.py"):
            return "tokens", getattr(local["task"], "name", None)
        if code.co_name == "train_batches" and code.co_filename.endswith("course_task.py"):
            return "batches", getattr(local.get("self"), "name", None)
        if code.co_name == "zero_grad" and self.step_task is None and \
                place(ours(frame.f_back))[0] == "tasks/training/loop.py":
            return "step", "?"
        return None

    def __call__(self, frame: FrameType, event: str, arg) -> None:
        if event not in ("call", "return"):
            return
        if self.importing is not None:
            if event == "return" and frame is self.importing:
                self.importing = None
            return
        if event == "call":
            if frame.f_code.co_name == "<module>":
                self.importing = frame
                return
            opened = self.window_of(frame)
            if opened is not None and opened not in self.moves:
                self.open.append((None if opened[0] == "step" else frame, *opened))
                self.moves[opened] = []
            if self.open:
                if frame.f_code.co_filename.startswith(OURS):
                    self.moves[self.open[-1][1:]].append((*place(ours(frame.f_back)), *place(frame)))
            return
        if not self.open:
            return
        frame_of, window, task = self.open[-1]
        if frame is frame_of:
            self.open.pop()
        elif window == "step" and frame.f_code.co_name == "step" and \
                frame.f_code.co_filename.endswith("optim/adamw.py"):
            self.step_task = step_name(frame)
            self.open.pop()
            sys.setprofile(None)  # the step ends with the optimizer's


def step_name(frame: FrameType | None) -> str | None:
    """The task of the step in progress: the loop's `name`."""
    while frame is not None:
        if frame.f_code.co_filename.endswith("tasks/training/loop.py") and "name" in frame.f_locals:
            return frame.f_locals["name"]
        frame = frame.f_back
    return None


def moves_of(calls: list[tuple[str, str, str, str]], level: str) -> list[tuple[str, str]]:
    """Each move between two files (level "file") or two classes or functions ("object") once, where it
    first happens (a loop over six layers makes the same calls six times)."""
    pick = (0, 2) if level == "file" else (1, 3)
    return list(dict.fromkeys((c[pick[0]], c[pick[1]]) for c in calls if c[pick[0]] != c[pick[1]]))


def count(moves: list[tuple[str, str]]) -> tuple[int, int]:
    """(places entered, moves into a place entered before): the path's files (or objects) and returns."""
    entered: set[str] = set()
    returns = 0
    for caller, callee in moves:
        entered.add(caller)
        returns += callee in entered
        entered.add(callee)
    entered.discard(None)
    return len(entered), returns


def trace_path(job_argv: list[str]) -> tuple[str, dict[str, list[tuple[str, str, str, str]]]]:
    """Run the main job for one step; returns the step's task and each window's calls for that task."""
    from tasks import multitask

    recorder = Recorder()
    with tempfile.TemporaryDirectory() as out:
        argv = JOB_DEFAULTS + list(job_argv) + ["--max-steps", "1", "--out", str(Path(out) / "run")]
        sys.setprofile(recorder)
        try:
            multitask.main(argv)
        finally:
            sys.setprofile(None)
    task = recorder.step_task
    if task is None:
        raise SystemExit("error: the job ran no training step to trace")
    dataset = {t.name: t.dataset for t in multitask.TASKS}[task]
    keys = {"rows": ("rows", dataset), "tokens": ("tokens", task), "batches": ("batches", task),
            "step": ("step", "?")}
    return task, {window: recorder.moves.get(keys[window], []) for window in WINDOWS}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.step_path", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quiet", action="store_true", help="print the numbers only")
    parser.add_argument("--objects", action="store_true", help="list the moves between classes and functions")
    args, job_argv = parser.parse_known_args(argv)
    task, windows = trace_path(job_argv)
    if not args.quiet:
        print(f"the first step trains {task}; each call from one of our files into another, once:")
    for level in ("file", "object"):
        if not args.quiet:
            for window in WINDOWS:
                moves = moves_of(windows[window], level)
                print(f"{window}: %d {level}s, %d returns" % count(moves))
                if level == "file" or args.objects:
                    print("".join(f"  {a} -> {b}\n" for a, b in moves), end="")
        for name, calls in (("step", windows["step"]), ("all", [c for w in WINDOWS for c in windows[w]])):
            print(f"{name}, by {level}: %d {level}s, %d returns" % count(moves_of(calls, level)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
