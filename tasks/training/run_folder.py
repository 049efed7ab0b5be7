"""A run's folder: claimed for one job, locked, and the records that say what run it holds, each read back
through one reader that states its schema.

A run folder holds config.json (the settings the run really used), metrics.jsonl (one JSON line per epoch),
loss_and_dev.png (loop.py), checkpoints/ and best/ (checkpoints.py), run.json (which job wrote it, from which
model, on what, and when it finished) and inputs.json (the size and sha256 of every data file and model file
the run read: tasks/data/inputs.py). Before a --resume `claim_run` reads them back and refuses, naming it, a
folder of another run, a command that would change the run's settings, or a changed input, leaving the
folder as it was. A lock file (.lock) keeps a second job off the folder while one writes it; failed.txt says
why a run that had started stopped, and how it goes on. config.json's schema is made from the settings
classes themselves (`settings_schema`), so that what a flag accepts and what the file may hold are declared
once.

Read next: checkpoints.py (the state that lets a stopped run continue exactly, and best/).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import os
import shutil
import socket
import sys
import types
import typing
from pathlib import Path
from typing import Any, Iterator, Sequence

import psutil

from minbert.loading.atomic import atomic_write_text, readable_directory
from minbert.loading.files import FileContentError, loads, read_json_object, read_text
from minbert.loading.schema import Field, Schema, read_document
from tasks.data.inputs import first_change
from tasks.training.settings import as_dict, flag_fields, flag_name, frozen
from tasks.training.process import Interrupted, process_rank, resume_command


# ----- the records, read back --------------------------------------------------------------------------

_TEXT = Field("string")
_FINGERPRINT = Schema({"path": _TEXT, "bytes": Field("integer", "[0, inf]"), "sha256": _TEXT},
                      required=("path", "bytes", "sha256"))
# run.json: which job and model wrote the folder; the rest is the job's identity (task, dataset, ...).
RUN = Schema({"job": _TEXT, "model": _TEXT, "started": _TEXT, "finished": _TEXT}, ("job",),
             unknown="keep")
# inputs.json: the fingerprints of the data files and of the model folder's files (tasks/data/inputs.py).
INPUTS = Schema({"data": Field("array", items=_FINGERPRINT), "model": Field("array", items=_FINGERPRINT)},
                ("data", "model"))
# metrics.jsonl, one line per epoch: the loop's history (loop.py); a finished run's last line says so.
METRICS_LINE = Schema({"epoch": Field("integer", "[0, inf]"), "epoch_complete": Field("boolean")}, ("epoch",),
                      unknown="keep")
_KINDS = {bool: "boolean", int: "integer", float: "real", str: "string", Path: "string", tuple: "array"}


def settings_schema(*settings: Any, required: Sequence[str] = ()) -> Schema:
    """config.json's (and heads.json's) schema from groups of flags: each flag's JSON kind from its annotation
    (_KINDS: tuples are arrays, paths strings), its choices the values allowed; other keys are kept."""
    fields = {}
    for group in settings:
        hints = typing.get_type_hints(type(group))
        fields.update({f.name: _flag_field(hints.get(f.name, f.type), f) for f in flag_fields(group)})
    return Schema(fields, tuple(required), unknown="keep")


def _flag_field(annotation: Any, flag: dataclasses.Field) -> Field:
    parts = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else (annotation,)
    kinds = {_KINDS.get(typing.get_origin(p) or p, "any") for p in parts if p is not type(None)}
    kind = kinds.pop() if len(kinds) == 1 else "real" if kinds == {"integer", "real"} else "any"
    return Field(kind, null=type(None) in parts or flag.default is None,
                 allowed=tuple(flag.metadata["choices"] or ()) if kind == "string" else (),
                 why="the flag's choices are")


def read_metrics(path: Path) -> list[dict]:
    """metrics.jsonl: one object per line, each checked; errors name the file and the line."""
    lines = []
    for number, line in enumerate(read_text(path, allow_empty=True).splitlines(), start=1):
        lines.append(loads(line, f"{path}:{number}"))
        if found := METRICS_LINE.problem(lines[-1], f"{path}:{number}", prefix=f"{path}:{number}: "):
            raise FileContentError(found)
    return lines


# ----- the folder --------------------------------------------------------------------------------------


PREVIOUS = "last.prev.pt"  # in checkpoints/: the one before last.pt, kept in case last.pt proves damaged
WRITE_TEST = ".write-test-"  # RunDir's probe, one per process: several may start at once


def default_run_dir(job: str) -> Path:
    """Where a run of `job` goes without --out: runs/<job>/<date-time>."""
    return Path("runs") / job / datetime.datetime.now().strftime("%Y%m%d-%H%M%S")


class RunDir:
    """The files of one run, in one directory."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            probe = self.path / f"{WRITE_TEST}{os.getpid()}"
            probe.write_text("ok")
            probe.unlink()
        except OSError as error:
            raise SystemExit(f"error: cannot write to the output directory {self.path}: {error.strerror}")
        self.checkpoints = self.path / "checkpoints"
        self.best = self.path / "best"
        self.metrics = self.path / "metrics.jsonl"
        self.plot = self.path / "loss_and_dev.png"
        self.predictions = self.path / "predictions"
        self.training_finished = False  # the loop sets it once every epoch is trained
        self.drop_when_done = False  # drop_checkpoints asked; claim_run does it when the job ends well

    def write_config(self, *settings: Any, **facts: Any) -> None:
        """config.json: the settings instances the run uses (resolved), and `facts` (where the data was)."""
        if process_rank() != 0:  # under torchrun, rank 0 writes
            return
        text = json.dumps({**as_dict(*settings), **facts}, indent=2, sort_keys=True, default=str)
        atomic_write_text(self.path / CONFIG_FILE, text + "\n")

    def record_inputs(self, data: list[dict], model: list[dict], resume: bool) -> None:
        """inputs.json: the fingerprints of the data and model files the run read. A --resume first compares
        them with the run's and refuses, naming the file, when one changed (ResumeRefused: the folder stays as
        it was); a folder from before inputs.json existed gets the file now."""
        file = self.path / INPUTS_FILE
        if resume and file.is_file():
            saved = read_document(file, INPUTS)
            if change := (first_change(saved["data"], data, "data file")
                          or first_change(saved["model"], model, "model file", by_name=True)):
                raise ResumeRefused(f"error: --resume: {change}; a resumed run reads the inputs it started "
                                    "with: restore the file, or start a new run (another --out, no --resume)")
        if process_rank() == 0:
            atomic_write_text(file, json.dumps({"data": data, "model": model}, indent=1) + "\n")

    def drop_checkpoints(self, state: Any, epochs: int) -> None:
        """A finished run's resume checkpoints (about 0.5 GB for the embedded model) go once the job ends well
        (claim_run), so that a job that fails writing its predictions can still --resume. best/ stays."""
        self.drop_when_done = state.epoch >= epochs

    def _drop_checkpoints_now(self) -> None:
        if self.drop_when_done and self.checkpoints.is_dir():
            shutil.rmtree(self.checkpoints)
            print(f"dropped the finished run's resume checkpoints ({self.checkpoints}; --keep-checkpoints "
                  "keeps them)", file=sys.stderr)

    def rewrite_metrics(self, history: list[dict]) -> None:
        atomic_write_text(self.metrics, "".join(json.dumps(r, sort_keys=True) + "\n" for r in history))


RUN_FILE = "run.json"  # which job, model and tasks wrote the folder
CONFIG_FILE = "config.json"  # the settings the run uses
LOCK_FILE = ".lock"  # "<pid> <host>" of the process writing the folder now
FAILED_FILE = "failed.txt"  # why a run that had started training stopped
INPUTS_FILE = "inputs.json"  # the size and sha256 of each data file and model file the run read


class ResumeRefused(SystemExit):
    """A --resume refused once the job has looked at its inputs: the run folder is left as it was (its
    failed.txt too), since the run itself did not fail."""


def _describe(record: dict, state: str = "") -> str:
    return f"a {state}{' ' if state else ''}{record.get('job', '?')} run (model {record.get('model', '?')})"


def _has_checkpoint(path: Path) -> bool:
    """Whether a --resume could continue the run in `path` (a folder or a pipe in their place counts, so that
    load_training_state names it rather than "stopped before its first checkpoint")."""
    return any((readable_directory(path / "checkpoints") / name).exists() for name in ("last.pt", PREVIOUS))


def is_finished(path: Path) -> bool:
    """Whether `path` holds a run that trained every epoch and ended well (a study's runner asks)."""
    return (path / RUN_FILE).is_file() and _finished(path, read_document(path / RUN_FILE, RUN))


def _finished(path: Path, record: dict) -> bool:
    """Whether the run in `path` finished: run.json says so (claim_run records it when a job that trained
    every epoch ended well). A folder from before that record: its checkpoints are gone (a finished run
    drops them), there is no failed.txt, and metrics.jsonl's last line completed the last epoch."""
    if "finished" in record:
        return True
    if (path / "checkpoints").exists() or (path / FAILED_FILE).exists():
        return False
    try:
        epochs = read_json_object(path / CONFIG_FILE).get("epochs")
        last = read_metrics(path / "metrics.jsonl")[-1]
    except (OSError, FileContentError, IndexError):
        return False
    return last.get("epoch") == epochs and bool(last.get("epoch_complete"))


def _results(path: Path) -> str:
    """Where a finished run's results are."""
    places = [path / name for name in ("best", "predictions", "result.json", "metrics.jsonl")]
    return ", ".join(str(p) for p in places if p.exists()) or str(path)


def _continue_with(path: Path) -> str:
    """How a stopped run goes on: the command with --resume while it has a checkpoint, else from scratch."""
    if not _has_checkpoint(path):
        return (f"it has no checkpoint to resume from: delete {path} and run the command again without "
                "--resume")
    return f"continue it with: {resume_command(path)}"


def _check_same_settings(path: Path, settings: Sequence[Any]) -> None:
    """--resume continues a run with the settings it started with (config.json), except those marked
    `same_on_resume=False` (threads, --max-steps, where the data or the outputs are, ...)."""
    config_file = path / CONFIG_FILE
    if not settings or not config_file.is_file():
        return  # nothing to compare: a run that stopped before it wrote its settings
    saved = read_document(config_file, settings_schema(*settings))
    now = as_dict(*settings)
    differ = [(flag_name(f), saved[f.name], now[f.name])
              for s in settings for f in flag_fields(s) if f.metadata["same_on_resume"]
              and f.name in saved and frozen(saved[f.name]) != now[f.name]]
    if differ:
        said = ", ".join(f"{name} {was}" for name, was, _ in differ)
        asked = ", ".join(f"{name} {now}" for name, _, now in differ)
        raise SystemExit(f"error: --resume: {path} was started with {said}, but this command asks for "
                         f"{asked}; resume with the settings the run started with")


def _check_reuse(path: Path, job: str, model: str, identity: dict, resume: bool,
                 settings: Sequence[Any] = ()) -> None:
    """Refuse an --out that is not ours to write: a file, a folder another job is writing now, another run,
    or another job's or model's run; say what a run that cannot be resumed holds instead of trying."""
    if path.exists() and not path.is_dir():
        raise SystemExit(f"error: --out {path} is a file, not a folder")
    _check_own_links(path)
    writer = _live_lock_holder(path)
    if writer is not None:
        raise SystemExit(_busy(path, writer))
    record_file = path / RUN_FILE
    if resume:
        if not path.is_dir():
            raise SystemExit(f"error: --resume given, but --out {path} does not exist")
        if not record_file.exists():
            return  # a run from before run.json existed: its checkpoint decides
        record = read_document(record_file, RUN)
        wanted = {"job": job, "model": model, **identity}
        differ = [k for k in wanted if str(record.get(k)) != str(wanted[k])]
        if differ:
            said = ", ".join(f"{k} {record.get(k)!r}" for k in differ)
            asked = ", ".join(f"{k} {wanted[k]!r}" for k in differ)
            raise SystemExit(f"error: --resume: {path} holds {_describe(record)} with {said}, but this "
                             f"command asks for {asked}; resume it with the same job and settings, or "
                             "choose another --out")
        if _finished(path, record):  # not an error: what --resume is for is done (nothing is written)
            print(f"nothing to resume: {path} holds {_describe(record, 'finished')}; its results are in "
                  f"{_results(path)}", file=sys.stderr)
            raise SystemExit(0)
        if not _has_checkpoint(path):
            raise SystemExit(f"error: --resume: {path} holds {_describe(record)} that stopped before its "
                             f"first checkpoint, so there is nothing to continue; delete {path} (or choose "
                             "another --out) and run the command without --resume")
        _check_same_settings(path, settings)
        return
    # Another rank's write test (RunDir) may sit there for an instant under torchrun: not a run's file.
    if path.is_dir() and any(not f.name.startswith(WRITE_TEST) for f in path.iterdir()):
        if not record_file.exists():
            raise SystemExit(f"error: --out {path} already holds files; add --resume to continue a stopped "
                             "run of the same job, or choose a new folder")
        record = read_document(record_file, RUN)
        if _finished(path, record):
            raise SystemExit(f"error: --out {path} already holds {_describe(record, 'finished')} (its "
                             f"results are in {_results(path)}); choose a new folder")
        if not _has_checkpoint(path):
            raise SystemExit(f"error: --out {path} already holds {_describe(record)} that stopped before "
                             f"its first checkpoint (nothing to resume); delete {path} or choose a new "
                             "folder")
        raise SystemExit(f"error: --out {path} already holds {_describe(record)}; add --resume to continue "
                         "a stopped run of the same job, or choose a new folder")


OWN_NAMES = ("run.json", "config.json", "inputs.json", "metrics.jsonl", "result.json", "failed.txt", ".lock",
             "loss_and_dev.png", "checkpoints", "best", "predictions", ".checkpoints.old", ".best.old",
             ".predictions.old")


def _check_own_links(path: Path) -> None:
    """Refuse a run folder whose own files or folders are links that lead out of it (checkpoints/ linked to
    a user's folder): a save would swap or delete what the link points to. Nothing is written or deleted."""
    for name in OWN_NAMES:
        link = path / name
        if link.is_symlink() and not Path(os.path.realpath(link)).is_relative_to(os.path.realpath(path)):
            raise SystemExit(f"error: --out {path}: {link} is a link to {os.readlink(link)}, outside the run "
                             "folder; a run reads and writes only its own folder, never through a link out "
                             "of it: put what it points to in its place (a copy), or choose another --out")


def _busy(path: Path, pid: int) -> str:
    return (f"error: another job (process {pid}) is writing to {path}; wait for it to finish or choose "
            f"another --out (if no such job runs, delete {path / LOCK_FILE})")


def _live_lock_holder(path: Path) -> int | None:
    """The process named in path/.lock ("<pid> <host>") when it is alive on this machine, else None."""
    try:
        pid_text, _, host = (path / LOCK_FILE).read_text(encoding="utf-8").partition(" ")
        pid = int(pid_text)
    except (OSError, ValueError):
        return None
    return pid if host == socket.gethostname() and pid > 0 and psutil.pid_exists(pid) else None


def _take_lock(path: Path) -> Path:
    """Create path/.lock, or refuse while a live process on this machine holds it (a stale one is taken)."""
    lock = path / LOCK_FILE
    mine = f"{os.getpid()} {socket.gethostname()}"
    for _ in range(2):
        try:
            with open(lock, "x", encoding="utf-8") as f:
                f.write(mine)
            return lock
        except FileExistsError:
            writer = _live_lock_holder(path)
            if writer is not None:
                raise SystemExit(_busy(path, writer)) from None
            lock.unlink(missing_ok=True)  # stale: its process is gone (or ran on another machine)
    raise SystemExit(f"error: could not lock {path}: {lock} keeps reappearing")


@contextlib.contextmanager
def claim_run(path: str | Path, job: str, model: str, identity: dict | None = None,
              resume: bool = False, settings: Sequence[Any] = ()) -> Iterator["RunDir"]:
    """The job's run directory, held for the job's lifetime, checked first (`_check_reuse`), then locked (a
    crashed job's lock is stale and taken over). run.json records job, model and identity, and `finished`
    when the job ends well after training every epoch. A job that fails before training wrote anything
    leaves no folder it created; later, failed.txt says why and how the run goes on; Ctrl-C or SIGTERM gets
    its line (`_stopped`)."""
    path = Path(path)
    identity = identity or {}
    if process_rank() != 0:  # under torchrun, rank 0 claims the folder for all
        yield RunDir(path)
        return
    _check_reuse(path, job, model, identity, resume, settings)
    created = not path.exists()  # else, without --resume, it is empty (_check_reuse)
    run = RunDir(path)
    lock = _take_lock(path)
    failed_file = path / FAILED_FILE
    failed = failed_file.read_text(encoding="utf-8", errors="replace") if failed_file.is_file() else None
    try:
        if not (path / RUN_FILE).exists():
            atomic_write_text(path / RUN_FILE, json.dumps(
                {"job": job, "model": model, **identity,
                 "started": datetime.datetime.now().isoformat(timespec="seconds")}, indent=2) + "\n")
        (path / FAILED_FILE).unlink(missing_ok=True)
        yield run
        if run.training_finished:  # and the job's outputs are written: nothing is left for a --resume
            record = read_document(path / RUN_FILE, RUN)
            record["finished"] = datetime.datetime.now().isoformat(timespec="seconds")
            atomic_write_text(path / RUN_FILE, json.dumps(record, indent=2) + "\n")
        run._drop_checkpoints_now()
    except ResumeRefused:
        if failed is not None:  # the run's own story stays as it was
            atomic_write_text(path / FAILED_FILE, failed)
        raise
    except BaseException as error:
        started = run.checkpoints.exists() or run.metrics.exists() or run.best.exists()
        if not started and created:
            shutil.rmtree(path, ignore_errors=True)
        elif not started and not resume:  # a folder that was empty: empty it again
            for item in path.iterdir():
                if item != lock:
                    shutil.rmtree(item, ignore_errors=True) if item.is_dir() else item.unlink(missing_ok=True)
        if isinstance(error, Interrupted):
            error.message = _stopped(path, error, started)
        if started:
            why = (error.message if isinstance(error, Interrupted)
                   else f"interrupted; {_continue_with(path)}" if isinstance(error, KeyboardInterrupt)
                   else f"{error}; {_continue_with(path)}" if isinstance(error, SystemExit)
                   else f"{type(error).__name__}: {error}; {_continue_with(path)}")
            with contextlib.suppress(OSError):
                atomic_write_text(path / FAILED_FILE, why + "\n")
        raise
    finally:
        lock.unlink(missing_ok=True)


def _stopped(path: Path, stop: Interrupted, started: bool) -> str:
    """The line for a job that Ctrl-C or SIGTERM stopped, from what its run folder holds now."""
    if stop.where:  # the loop saved the run where it stopped
        return (f"interrupted by {stop.name} {stop.where}: the run is saved in "
                f"{path / 'checkpoints' / 'last.pt'}; {_continue_with(path)}")
    if _has_checkpoint(path):
        return (f"stopped at once by {stop.name}; the last checkpoint is {path / 'checkpoints' / 'last.pt'}; "
                f"{_continue_with(path)}")
    if started:
        return f"stopped at once by {stop.name}; {_continue_with(path)}"
    gone = "removed again" if not path.exists() else "as it was"
    return f"interrupted by {stop.name} before training began: nothing was saved ({path} is {gone})"
