"""A run's folder: what it holds, the state that lets a stopped run continue exactly, its best/ model, and
Ctrl-C and SIGTERM, which stop a run saved.

A run folder holds config.json (the settings the run really used), metrics.jsonl (one JSON line per epoch),
loss_and_dev.png (every step's loss with its moving average, and the dev metrics, over whole epochs),
checkpoints/last.pt (everything needed to resume: model, optimizer, scheduler, position
in the epoch, random state; the one before kept as last.prev.pt, and the sha256 of both in checksums.sha256,
which a --resume checks), and
best/ (written by the job's `save_best`), run.json: which job wrote it, from which model, on what, and
when it finished (`claim_run` reads it and config.json back before a --resume, and refuses a folder that
belongs to another run or a command that would change the run's settings; a finished run has nothing to
resume, a run stopped before its first checkpoint nothing to continue, and each is said as it is), and
inputs.json: the size and sha256 of every data file the run read and of its model folder's files
(tasks/data/inputs.py), which a --resume must find unchanged (`RunDir.record_inputs`; a refused resume
leaves the folder as it was).

best/ is a Hugging Face-format encoder directory (config.json, model.safetensors, vocab.txt) that
`transformers` opens, plus the task heads in heads.safetensors and the settings that rebuild them in
heads.json (the job's name first among them). A job that trains sentence vectors (the main job's pair
heads) also writes sentence-transformers' files there, so `SentenceEncoder(best)` and
`SentenceTransformer(best)` pool and normalise as the job did. The loop saves it whole at every best epoch,
with the sha256 of each file in checksums.sha256; a job's outputs, its `--predict` and the notebooks load it
back (`load_checkpoint`), once every file matches its checksum.

Ctrl-C and SIGTERM: the first SIGINT (Ctrl-C) or SIGTERM (what `kill`, a cluster's scheduler or a
container's stop sends) during training is a request: the loop finishes the step or the evaluation it is
in, saves checkpoints/last.pt, and stops; the job prints one line with the command that continues the run
and exits 130 (SIGINT) or 143 (SIGTERM), what a shell reports for a process a signal ended. A second signal
stops at once. Outside training (reading data, loading the model) nothing is lost by stopping, so the
first signal stops at once. Never a traceback: `job.user_errors` installs the handler for the job's
lifetime and prints the line; `claim_run` says what the folder holds then. Signals are delivered to a
process, so that state is the process's: whether the loop is running (`signals_deferred`) and which signal
asked it to stop.

Read next: loop.py (which writes all of this).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import io
import json
import math
import os
import random
import shlex
import shutil
import signal
import socket
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

import torch
from safetensors.torch import save_file as save_safetensors
from torch import nn

from minbert.loading.atomic import (DamagedFileError, atomic_directory, atomic_write, atomic_write_text,
                                    link, read_checksums, read_verified, readable_directory,
                                    record_checksums, verify_folder, write_file, write_hashed, write_text)
from minbert.loading.checkpoint import write_model
from minbert.loading.files import FileContentError, read_json_object
from minbert.model import BertModel
from minbert.loading.sentence_files import SentenceSettings, write_settings
from minbert.lora import merge_and_unload
from minbert.text.tokenizer import BertTokenizer
from tasks.data.inputs import first_change
from tasks.training import distributed
from tasks.training.flags import as_dict, flag_fields, flag_names, frozen
from tasks.training.lora_run import is_adapted
from tasks.training.lora_run import save_encoder as save_lora_encoder
from minbert.loading.schema import check_fields, read_document
from tasks.training.run_records import (INPUTS, RUN, check_training_checkpoint, read_heads, read_metrics,
                                        settings_schema)

class RunDir:
    """The files of one run, in one directory."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            probe = self.path / f".write-test-{os.getpid()}"  # one per process: several may start at once
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
        if distributed.process_rank() != 0:  # under torchrun, rank 0 writes
            return
        text = json.dumps({**as_dict(*settings), **facts}, indent=2, sort_keys=True, default=str)
        atomic_write_text(self.path / CONFIG_FILE, text + "\n")

    def record_inputs(self, data: list[dict], model: list[dict], resume: bool) -> None:
        """inputs.json: the fingerprints of the data files the run read and of its model folder's files
        (tasks/data/inputs.py). A --resume first compares them with what the run started with and refuses,
        naming the file, when one changed (ResumeRefused: the folder stays as it was). A folder from before
        inputs.json existed has nothing to compare: it gets the file now."""
        file = self.path / INPUTS_FILE
        if resume and file.is_file():
            saved = read_document(file, INPUTS)
            change = (first_change(saved["data"], data, "data file")
                      or first_change(saved["model"], model, "model file", by_name=True))
            if change:
                raise ResumeRefused(f"error: --resume: {change}; a resumed run must read the inputs it "
                                    f"started with: restore the file, or start a new run (another --out, "
                                    "without --resume)")
        if distributed.process_rank() == 0:
            atomic_write_text(file, json.dumps({"data": data, "model": model}, indent=1) + "\n")

    def drop_checkpoints(self, state: "TrainState", epochs: int) -> None:
        """A finished run's resume checkpoints (weights and optimizer moments, about 0.5 GB for the embedded
        model) serve nothing once the job has written its outputs: they are deleted then (claim_run, when
        the job ends well), so that a job that fails after training, writing its predictions, can still
        --resume to write them. best/ stays."""
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
    """Whether a --resume could continue the run in `path` (load_training_state reads these two)."""
    return any((readable_directory(path / "checkpoints") / name).is_file() for name in ("last.pt", PREVIOUS))


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
    command = resume_command()
    return f"continue it with: {command}" if command else "continue it with the same command and --resume"


def _check_same_settings(path: Path, settings: Sequence[Any]) -> None:
    """--resume continues a run with the settings it started with (config.json), except those marked
    `same_on_resume=False` (threads, --max-steps, where the data or the outputs are, ...)."""
    config_file = path / CONFIG_FILE
    if not settings or not config_file.is_file():
        return  # nothing to compare: a run that stopped before it wrote its settings
    saved = read_document(config_file, settings_schema(*settings))
    differ = [(flag_names(f, f.default)[0], saved[f.name], getattr(s, f.name))
              for s in settings for f in flag_fields(s) if f.metadata["same_on_resume"]
              and f.name in saved and frozen(saved[f.name]) != getattr(s, f.name)]
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
    if path.is_dir() and any(path.iterdir()):
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
    return pid if host == socket.gethostname() and pid > 0 and _alive(pid) else None


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


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


@contextlib.contextmanager
def claim_run(path: str | Path, job: str, model: str, identity: dict | None = None,
              resume: bool = False, settings: Sequence[Any] = ()) -> Iterator["RunDir"]:
    """The job's run directory, held for the job's lifetime; nothing of it is left behind on failure.

    Before anything is written: --out must not be a file, another run (unless --resume), or, with
    --resume, another job's run, one made with another model or `identity` (e.g. the task), or one whose
    config.json holds other `settings` (the instances the job parsed). Then a
    lock file keeps a second job off the folder until this one ends (a crashed job's lock is stale and
    taken over). run.json records job, model and identity, and `finished` when the job ends well after
    training every epoch. If the job fails before training wrote anything, the folder goes again if this
    call created it; if it fails later, failed.txt says why and how the run goes on. A job stopped by
    Ctrl-C or SIGTERM gets the line that says so (`Interrupted.message`, below).
    """
    path = Path(path)
    identity = identity or {}
    if distributed.process_rank() != 0:  # under torchrun, rank 0 claims the folder for all
        yield RunDir(path)
        return
    _check_reuse(path, job, model, identity, resume, settings)
    created = not path.exists()  # else, without --resume, it is empty (_check_reuse)
    run = RunDir(path)
    lock = _take_lock(path)
    failed = (path / FAILED_FILE).read_text(encoding="utf-8", errors="replace") if (path / FAILED_FILE).is_file() else None
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


@dataclass
class TrainState:
    """Where training is; saved in checkpoints/last.pt so a run can resume exactly."""

    epoch: int = 0  # the epoch in progress (0-based)
    step_in_epoch: int = 0  # steps of that epoch already taken
    global_step: int = 0
    best_score: float = -math.inf
    best_epoch: int = -1
    history: list = dataclasses.field(default_factory=list)  # one dict per finished epoch
    epoch_losses: dict = dataclasses.field(default_factory=dict)  # task -> losses of the epoch's steps so far
    # task -> [[place in epochs, loss], ...] for every step so far (the plot's curve)
    step_losses: dict = dataclasses.field(default_factory=dict)


PREVIOUS = "last.prev.pt"  # the checkpoint before last.pt, kept in case last.pt proves damaged


def save_training_state(path: Path, model: nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any,
                        state: TrainState,
                        world: distributed.Distributed = distributed.Distributed(),
                        scaler: torch.amp.GradScaler | None = None, keep: str | None = None) -> None:
    """Everything needed to continue exactly: weights, optimizer moments, schedule, position, RNG, and fp16's
    loss scale (`scaler`, when enabled).

    checkpoints/ is written whole (atomic.py): `path` (last.pt) anew, and `keep`, the name of the checkpoint
    known whole (the one saved last, or the one a --resume read), as last.prev.pt, a hard link to the same
    bytes; checksums.sha256 records the sha256 of both, last.pt's hashed as it is written. A full disk
    half-way leaves checkpoints/ as it was. Distributed, the processes hold the same weights and optimizer
    state: rank 0 writes for all.
    """
    if not world.is_main:
        return
    payload = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "train_state": dataclasses.asdict(state),
        "torch_rng": torch.get_rng_state(),
        "python_rng": random.getstate(),
    }
    if scaler is not None and scaler.is_enabled():
        payload["scaler"] = scaler.state_dict()
    with atomic_directory(path.parent, keep_others=False) as new:
        sums = {path.name: write_hashed(new / path.name, lambda file: torch.save(payload, file))}
        if keep is not None and (path.parent / keep).is_file():
            link(path.parent / keep, new / PREVIOUS)
            recorded = read_checksums(path.parent).get(keep)
            if recorded is not None:  # a checkpoint from before checksums were recorded goes unrecorded
                sums[PREVIOUS] = recorded
        record_checksums(new, sums)


def load_training_state(path: Path, model: nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any,
                        scaler: torch.amp.GradScaler | None = None) -> tuple[TrainState, Path]:
    """Restore what `save_training_state` wrote, and say from which file: last.pt, or, when it is damaged
    (its sha256 differs from the one recorded) or unreadable, the earlier last.prev.pt, itself checked. Each
    file is read once, hashed and loaded from the same bytes. A checkpoint without a loss scale (written
    before fp16 was an option) leaves `scaler` as it starts."""
    folder = readable_directory(path.parent)  # checkpoints/, even if a crash interrupted its swap
    problems = []
    for candidate in (folder / path.name, folder / PREVIOUS):
        if not candidate.exists():
            continue
        try:
            payload = check_training_checkpoint(
                torch.load(io.BytesIO(read_verified(candidate)), map_location="cpu", weights_only=False),
                candidate, model)
            model.load_state_dict(payload["model"])
            optimizer.load_state_dict(payload["optimizer"])
            scheduler.load_state_dict(payload["scheduler"])
            if scaler is not None and scaler.is_enabled() and payload.get("scaler"):
                scaler.load_state_dict(payload["scaler"])
        except Exception as error:  # noqa: BLE001 - any unreadable checkpoint is reported, then skipped
            problems.append(str(error) if isinstance(error, DamagedFileError) or str(candidate) in str(error)
                            else f"{candidate} is unreadable ({error})")
            print(f"warning: {problems[-1]}", file=sys.stderr)
            continue
        torch.set_rng_state(payload["torch_rng"])
        random.setstate(payload["python_rng"])
        state = TrainState(**payload["train_state"])
        earlier = " (the earlier checkpoint, which is whole)" if problems else ""
        print(f"resuming from {candidate}{earlier}, at step {state.global_step}", file=sys.stderr)
        return state, candidate
    run = path.parent.parent
    if problems:
        kept = ("" if len(problems) > 1 else
                f"; this run keeps no earlier checkpoint ({PREVIOUS} comes with the second save)")
        raise SystemExit(f"error: --resume: no whole checkpoint to resume from: {'; '.join(problems)}{kept}; "
                         f"start over: delete {run} (or choose another --out) and run the command without "
                         "--resume")
    raise SystemExit(f"error: --resume given, but there is no checkpoint at {path}")


def plot_history(history: list[dict], path: Path, step_losses: dict | None = None) -> None:
    """A PNG of two panels over the epochs, ticked at whole epochs: every task's training loss (each step's,
    faint, with its moving average and the epoch means as dots) and every dev metric after each epoch."""
    import matplotlib

    matplotlib.use("Agg")  # no screen needed
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    epochs = [r["epoch"] for r in history]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for i, task in enumerate(history[0]["train_loss"]):
        points = (step_losses or {}).get(task) or []
        if points:
            places, losses = zip(*points)
            left.plot(places, losses, color=f"C{i}", alpha=0.2, linewidth=0.6)
            left.plot(places, moving_average(losses), color=f"C{i}", linewidth=1.8, label=task)
        means = [(r["epoch"], r["train_loss"][task]) for r in history
                 if r["train_loss"].get(task) is not None]
        if means:
            left.plot(*zip(*means), "o", color=f"C{i}", markeredgecolor="black",
                      label=None if points else f"{task} (epoch mean)")
    if all(loss > 0 for losses in (step_losses or {}).values() for _, loss in losses):
        left.set_yscale("log")  # the tasks' losses differ by orders of magnitude
    left.set(title="training loss (steps, moving average, epoch means)", xlabel="epoch", ylabel="loss")
    if left.get_legend_handles_labels()[0]:
        left.legend(fontsize="small")
    for task in history[0]["dev"]:
        for metric in history[0]["dev"][task]:
            right.plot(epochs, [r["dev"][task][metric] for r in history], marker="o",
                       label=f"{task} {metric}")
    right.plot(epochs, [r["overall"] for r in history], marker="s", color="black", label="overall")
    right.set(title="dev metrics", xlabel="epoch")
    right.legend(fontsize="small")
    for axes in (left, right):
        axes.set_xlim(0, max(max(epochs), 1) * 1.02)  # room for the last epoch's dots
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))  # whole epochs
        axes.grid(alpha=0.3)
    fig.tight_layout()
    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=100))
    plt.close(fig)


def moving_average(values: Sequence[float]) -> list[float]:
    """An exponential moving average, debiased at the start (as TensorBoard's smoothing), over about a
    twentieth of the points (at most 50)."""
    span = min(50, max(1, len(values) // 20))
    decay = 1 - 2 / (span + 1)
    average, out = 0.0, []
    for n, value in enumerate(values, start=1):
        average = decay * average + (1 - decay) * value
        out.append(average / (1 - decay ** n) if decay else average)
    return out


# ----- Ctrl-C and SIGTERM: stop at a step boundary, saved ----------------------------------------------


SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """The job was stopped by a signal. `where`: the step at which the loop saved the run (empty when the
    signal stopped the job at once); `message`: the line for the user, completed by claim_run, which knows
    what the run folder holds."""

    def __init__(self, signum: int, where: str = "") -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum, self.where, self.message = signum, where, ""

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_status(self) -> int:
        return 128 + self.signum  # 130 for SIGINT, 143 for SIGTERM, as a shell reports them


class _Requests:
    """The process's signal state: whether the loop defers a first signal, and the one it deferred."""

    deferring = False
    pending: int | None = None


_STATE = _Requests()


def _on_signal(signum: int, frame) -> None:
    if _STATE.deferring and _STATE.pending is None:
        _STATE.pending = signum
        name = signal.Signals(signum).name
        if os.environ.get("RANK", "0") != "0":  # under torchrun every process gets it; rank 0 says so
            return
        # (a handler can interrupt a write to stderr, which then refuses a second one: the note is a courtesy)
        with contextlib.suppress(RuntimeError, OSError, ValueError):
            print(f"\n{name} received: the run stops after this step (or this evaluation) and saves itself; "
                  f"another {name} stops it at once", file=sys.stderr, flush=True)
        return
    raise Interrupted(signum)


@contextlib.contextmanager
def signals_stop_the_job() -> Iterator[None]:
    """While inside: SIGINT and SIGTERM raise Interrupted (or, in the loop, ask it to stop). Python runs
    signal handlers in the main thread only, so elsewhere this does nothing; a signal the shell told the
    process to ignore (a background job's SIGINT) stays ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in SIGNALS}
    for s in SIGNALS:
        if previous[s] is not signal.SIG_IGN:
            signal.signal(s, _on_signal)
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """The training loop: a first signal only asks it to stop (`stop_requested`), where it can save the
    run."""
    outer = _STATE.deferring
    _STATE.deferring, _STATE.pending = True, None
    try:
        yield
        late = _STATE.pending  # asked after the loop last looked: it stops now, not never
    finally:
        _STATE.deferring, _STATE.pending = outer, None
    if late is not None:
        raise Interrupted(late)


def stop_requested() -> int | None:
    """The signal that asked the loop to stop, or None."""
    return _STATE.pending


def resume_command() -> str | None:
    """The command line that started this process with --resume added, when the process is a job started
    from a shell (python -m tasks.<job> or pretrain.run); None when a job's `main` was called by other code
    (a test, experiments.study, a notebook), whose command line is not the job's, or by torchrun (whose
    own options come before the job's)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    job = spec is not None and spec.name.startswith(("tasks.", "pretrain."))
    if not job or "TORCHELASTIC_RUN_ID" in os.environ:
        return None
    argv = list(getattr(sys, "orig_argv", sys.argv))
    return shlex.join(argv if "--resume" in argv else [*argv, "--resume"])


# ----- best/: the encoder and the heads, saved and loaded back -----------------------------------------


HEADS_WEIGHTS = "heads.safetensors"
HEADS_SETTINGS = "heads.json"


def head_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """Every parameter and buffer outside the encoder (`bert.`)."""
    return {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()
            if not k.startswith("bert.")}


def save_checkpoint(model: nn.Module, directory: Path, tokenizer: BertTokenizer, head_settings: dict,
                    sentence: SentenceSettings | None = None) -> None:
    """The encoder in Hugging Face format, plus the heads and the settings that rebuild them (and the
    sentence-transformers files, when `sentence` says how the job pooled), into the new best/ the loop is
    writing (atomic.py). A LoRA run's encoder: peft's adapter files and the merged encoder in merged/
    (lora_run.py)."""
    encoder = directory
    if is_adapted(model.bert):
        encoder = save_lora_encoder(model.bert, directory, tokenizer)
    else:
        write_model(model.bert, directory, tokenizer=tokenizer)
    if sentence is not None:
        write_settings(encoder, sentence, model.bert.config.hidden_size)
    write_file(directory / HEADS_WEIGHTS, lambda path: save_safetensors(head_state(model), str(path)))
    write_text(directory / HEADS_SETTINGS, json.dumps(head_settings, indent=2, sort_keys=True) + "\n")


def check_best_on_resume(best: Path, state: TrainState) -> None:
    """A resumed run's best/ must be whole to be loaded back at the end: a damaged one is said at once, and
    forgotten (`state`'s best score), so that the next evaluation writes best/ anew."""
    try:
        verify_folder(readable_directory(best))
    except DamagedFileError as error:
        print(f"warning: {error}; best/ is written anew at the next evaluation", file=sys.stderr)
        state.best_score, state.best_epoch = -math.inf, -1


def load_checkpoint(model: nn.Module, directory: Path) -> None:
    """Load what `save_checkpoint` wrote into a model of the same shape (strictly), once every file matches
    the sha256 recorded when it was saved. A LoRA model gets the merged encoder, its adapters folded in
    (merge_and_unload), as --predict reads it."""
    directory = readable_directory(directory)  # best/, even if a crash interrupted its swap
    verify_folder(directory)
    if is_adapted(model.bert):
        merge_and_unload(model.bert)
    model.bert.load_state_dict(BertModel.from_pretrained(directory).state_dict())
    heads = read_heads(directory / HEADS_WEIGHTS, head_state(model))
    model.load_state_dict({**model.state_dict(), **heads})


def read_run_settings(run_dir: str, job: str, keys: Sequence[str], settings: Sequence[type] = ()
                      ) -> tuple[Path, dict]:
    """A finished run's folder (or its best/ folder) -> (best/, the settings `job` saved with its heads).

    The settings must name `job`, hold every one of `keys`, and each of the `settings` classes' fields it
    holds must be of the flag's kind; anything else is a one-line error."""
    best = readable_directory(Path(run_dir) / "best")  # best/, even if a crash interrupted its swap
    best = best if best.is_dir() else Path(run_dir)
    path = best / HEADS_SETTINGS
    if not path.is_file():
        raise SystemExit(f"error: --predict {run_dir}: no {path} (expected a tasks.{job} run folder that "
                         "finished at least one epoch, or its best/ folder)")
    verify_folder(best)  # before any of it is read (load_checkpoint checks again what it loads)
    saved = read_json_object(path)
    if saved.get("job") != job:
        who = f"tasks.{saved['job']}" if isinstance(saved.get("job"), str) else f"something other than tasks.{job}"
        raise SystemExit(f"error: --predict {run_dir}: {path} was written by {who}, whose heads "
                         f"tasks.{job} cannot rebuild")
    check_fields(saved, settings_schema(*settings, required=keys), f"{path}: ")
    return best, saved
