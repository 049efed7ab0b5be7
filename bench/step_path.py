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

A flag's trip (`--flag`, `trace_flag`): the files its value crosses from the parser to the line that uses
it, counted along the calls. The job runs with the flag set to a value of its own; the trip is the file
that declares the flag's field and the file whose parse returns it, then, once the parse has returned, every
file of ours that hands the value on: a function whose arguments hold it (as itself, or inside a settings
object, a dict or a list, three levels deep) and that is on the call stack when the use is reached, or
that returns it in a new object (the run's resolved settings, the parameter groups). A function that only
reads it (a check, config.json) hands nothing on and is not counted. The use is given per flag (FLAG_USES):
the optimizer's constructor for --lr, the clipping call for --max-grad-norm, nn.Dropout for
--hidden-dropout-prob.

    python -m bench.step_path --flag lr            # the files --lr crosses, in order
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
from pathlib import Path
from types import FrameType
from typing import Any, Callable

import torch
from torch import nn

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


def run_profiled(profile: Callable[[FrameType, str, Any], None], job_argv: list[str]) -> None:
    """One step of the main job (JOB_DEFAULTS, then `job_argv`) under the profile function `profile`."""
    from tasks import multitask

    with tempfile.TemporaryDirectory() as out:
        argv = JOB_DEFAULTS + job_argv + ["--max-steps", "1", "--out", str(Path(out) / "run")]
        sys.setprofile(profile)
        try:
            multitask.main(argv)
        finally:
            sys.setprofile(None)


def trace_path(job_argv: list[str]) -> tuple[str, dict[str, list[tuple[str, str, str, str]]]]:
    """Run the main job for one step; returns the step's task and each window's calls for that task."""
    from tasks import multitask

    recorder = Recorder()
    run_profiled(recorder, list(job_argv))
    task = recorder.step_task
    if task is None:
        raise SystemExit("error: the job ran no training step to trace")
    dataset = {t.name: t.dataset for t in multitask.TASKS}[task]
    keys = {"rows": ("rows", dataset), "tokens": ("tokens", task), "batches": ("batches", task),
            "step": ("step", "?")}
    return task, {window: recorder.moves.get(keys[window], []) for window in WINDOWS}


# ----- a flag's trip ------------------------------------------------------------------------------------

FLAG_OURS = OURS + (str(ROOT / "pretrain") + "/",)


def holds(obj: Any, value: float, depth: int = 3) -> bool:
    """Whether `obj` is `value`, or holds it: a dataclass's or one of our objects' attribute, a dict's value
    or a list's item, `depth` levels deep (models, tensors and long lists are not searched)."""
    if type(obj) is float:
        return obj == value
    if depth == 0 or isinstance(obj, (str, bytes, int, torch.Tensor, nn.Module)):
        return False
    if isinstance(obj, dict):
        items = list(obj.values())
    elif isinstance(obj, (list, tuple)):
        items = list(obj)
    elif dataclasses.is_dataclass(obj) or str(getattr(type(obj), "__module__", "")).startswith(PACKAGES):
        items = list(getattr(obj, "__dict__", {}).values())
    else:
        return False
    return len(items) <= 64 and any(holds(item, value, depth - 1) for item in items)


PACKAGES = ("minbert", "optim", "tasks", "pretrain")
FLAG_USES: dict[str, Callable[[FrameType], bool]] = {
    "lr": lambda frame: frame.f_code.co_name == "__init__"
    and isinstance(frame.f_locals.get("self"), torch.optim.Optimizer),
    "max-grad-norm": lambda frame: frame.f_code.co_name == "clip_grad_norm_",
    "hidden-dropout-prob": lambda frame: frame.f_code.co_name == "__init__"
    and isinstance(frame.f_locals.get("self"), nn.Dropout),
}
FLAG_VALUES = {"lr": "3.14159e-05", "max-grad-norm": "0.314159", "hidden-dropout-prob": "0.0314159"}


class FlagTrip:
    """The profile function that follows one flag's value (see the module docstring)."""

    def __init__(self, value: float, use: Callable[[FrameType], bool]) -> None:
        self.value, self.use = value, use
        self.calls = 0
        self.started = False  # the job's parse has returned the settings
        # each frame of ours handed the value since: (when it was called, its arguments' ids)
        self.handed: dict[FrameType, tuple[int, list[int]]] = {}
        self.crossed: dict[str, int] = {}  # file -> when the value first reached it
        self.done = False

    def add(self, frame: FrameType, when: int) -> None:
        path = place(frame)[0]
        self.crossed[path] = min(when, self.crossed.get(path, when))

    def __call__(self, frame: FrameType, event: str, arg) -> None:
        self.calls += event == "call"
        if event == "call" and self.started and self.use(frame) and holds(dict(frame.f_locals), self.value):
            here: FrameType | None = frame
            while here is not None:  # the calls that brought the value here
                if here in self.handed:
                    self.add(here, self.handed[here][0])
                here = here.f_back
            if frame.f_code.co_filename.startswith(FLAG_OURS):
                self.add(frame, self.calls)
            self.done = True
            sys.setprofile(None)
            return
        if not frame.f_code.co_filename.startswith(FLAG_OURS) or frame.f_code.co_name == "<module>":
            return
        if event == "call":
            local = dict(frame.f_locals)
            if self.started and holds(local, self.value):
                self.handed[frame] = (self.calls, [id(v) for v in local.values()])
        elif event == "return" and holds(arg, self.value):
            if frame.f_code.co_qualname == "SettingsParser.parse":  # the parser hands the settings back
                self.started = True
                self.add(frame, 0)
            elif frame in self.handed and id(arg) not in self.handed[frame][1]:  # handed on in a new object
                self.add(frame, self.handed[frame][0])

    def files(self) -> list[str]:
        return sorted(self.crossed, key=self.crossed.get)


def trace_flag(flag: str, job_argv: list[str]) -> list[str]:
    """The files of our repository that --`flag` crosses from the parser to its use (FLAG_USES), in order,
    in a one-step run of the main job with the flag at FLAG_VALUES' value."""
    from tasks import multitask
    from tasks.training.settings import flag_fields, groups

    value = float(FLAG_VALUES[flag])
    name = flag.replace("-", "_")
    declared = next(type(g) for g in groups(multitask.build_parser().defaults)
                    if name in {f.name for f in flag_fields(g)})
    trip = FlagTrip(value, FLAG_USES[flag])
    run_profiled(trip, list(job_argv) + [f"--{flag}", FLAG_VALUES[flag]])
    if not trip.done:
        raise SystemExit(f"error: the job never reached --{flag}'s use")
    where = str(Path(sys.modules[declared.__module__].__file__).relative_to(ROOT))
    return [where] + [path for path in trip.files() if path != where]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.step_path", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quiet", action="store_true", help="print the numbers only")
    parser.add_argument("--objects", action="store_true", help="list the moves between classes and functions")
    parser.add_argument("--flag", choices=sorted(FLAG_USES), help="the files this flag crosses, instead")
    args, job_argv = parser.parse_known_args(argv)
    if args.flag:
        files = trace_flag(args.flag, job_argv)
        print(f"--{args.flag}: {len(files)} files: " + " -> ".join(files))
        return 0
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
