"""What a run saves as it trains: the resume state (checkpoints/), and the best epoch's model (best/).

checkpoints/last.pt holds everything a stopped run needs to continue exactly (the model, the optimizer, the
schedule, fp16's loss scale, TrainState, the random state), the one before kept as last.prev.pt. It holds
tensors and plain values only and is read with torch.load(weights_only=True): a checksum proves a file
whole, not trusted, so no file handed over with a run folder can run code here.

best/ is a Hugging Face-format encoder folder that `transformers` opens, plus the task heads
(heads.safetensors, and heads.json, the settings that rebuild them), sentence-transformers' files where the
job trained sentence vectors (so `SentenceEncoder(best)` and `SentenceTransformer(best)` pool as the job
did) and, for a `--lora` run, peft's adapter files and the merged encoder in best/merged/, which every
reader of best/ loads. It is saved whole at every best epoch with each file's sha256, and loaded back
(`load_checkpoint`) once every file matches.

Read next: run_folder.py (the folder these live in).
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import torch
from safetensors.torch import save_file as save_safetensors
from torch import nn

from minbert.loading.atomic import (DamagedFileError, atomic_directory, link, read_checksums, read_verified,
                                    readable_directory, record_checksums, verify_folder, write_file,
                                    write_hashed, write_text)
from minbert.loading.checkpoint import CheckpointError, read_torch, read_weights, write_model
from minbert.loading.files import FileContentError, check_file, read_json_object
from minbert.loading.schema import Field, Schema, check_fields
from minbert.model import BertModel
from minbert.text.tokenizer import BertTokenizer
from tasks.training.process import World
from tasks.training.run_folder import PREVIOUS, ResumeRefused, settings_schema
from tasks.training.settings import TrainingSettings


# ----- the resume state: checkpoints/last.pt ------------------------------------------------------------


# checkpoints/last.pt: what save_training_state writes (checkpoints.py), TrainState's fields inside.
_COUNT = Field("integer", "[0, inf]")
TRAIN_STATE = Schema({"epoch": _COUNT, "step_in_epoch": _COUNT, "global_step": _COUNT,
                      "best_score": Field("real"), "best_epoch": Field("integer", "[-1, inf]"),
                      "history": Field("array", items=Field("object")), "epoch_losses": Field("object"),
                      "step_losses": Field("object")},
                     ("epoch", "step_in_epoch", "global_step", "best_score", "best_epoch", "history"))
TRAINING_CHECKPOINT = Schema(
    {"model": Field("object", items=Field("tensor")), "optimizer": Field("object"),
     "scheduler": Field("object"), "train_state": TRAIN_STATE,
     "torch_rng": Field("tensor"), "python_rng": Field("any"), "scaler": Field("object")},
    ("model", "optimizer", "scheduler", "train_state", "torch_rng", "python_rng"))


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


def save_training_state(path: Path, model: nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any,
                        state: TrainState,
                        world: World = World(),
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
        try:  # tensors and plain values only (weights_only=True): a checkpoint cannot run code
            payload = check_training_checkpoint(read_torch(candidate, read_verified(candidate)), candidate, model)
            model.load_state_dict(payload["model"])
            optimizer.load_state_dict(payload["optimizer"])
            scheduler.load_state_dict(payload["scheduler"])
            if scaler is not None and scaler.is_enabled() and payload.get("scaler"):
                scaler.load_state_dict(payload["scaler"])
            torch.set_rng_state(payload["torch_rng"])
            random.setstate(payload["python_rng"])
            state = TrainState(**payload["train_state"])
        except Exception as error:  # noqa: BLE001 - any unreadable checkpoint is reported, then skipped
            problems.append(str(error) if isinstance(error, DamagedFileError) or str(candidate) in str(error)
                            else f"{candidate} is unreadable ({error})")
            print(f"warning: {problems[-1]}", file=sys.stderr)
            continue
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


def check_training_checkpoint(payload: object, path: Path, model: torch.nn.Module) -> dict:
    """The dict inside checkpoints/last.pt: its keys and their types, TrainState's fields, and the model's
    weights, each tensor of the model's shape."""
    if found := TRAINING_CHECKPOINT.problem(payload, str(path), prefix=f"{path}: "):
        raise FileContentError(found)
    check_tensors_fit(payload["model"], model.state_dict(), path, "the model")
    return payload


def check_tensors_fit(state: dict[str, torch.Tensor], expected: dict[str, torch.Tensor], path: Path,
                      what: str = "the model's heads") -> None:
    """Every tensor the model has, of its shape, and no other; refused naming the file, each tensor and both
    shapes."""
    missing, unknown = sorted(set(expected) - set(state)), sorted(set(state) - set(expected))
    wrong = [f"{k} {tuple(v.shape)}, the model's {tuple(expected[k].shape)}" for k, v in state.items()
             if k in expected and v.shape != expected[k].shape]
    if missing or unknown or wrong:
        raise CheckpointError(f"{path}: does not fit {what} (missing {missing}, unknown {unknown}, of "
                              f"another shape {wrong}); written with other settings, or by another job?")


def read_heads(path: Path, expected: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """best/heads.safetensors, read as any weights file (checkpoint.py: truncated, unreadable, a folder in its
    place: named), each tensor the shape of the model's (`expected`)."""
    state = read_weights(check_file(path, CheckpointError))
    check_tensors_fit(state, expected, path)
    return state


def check_progress_possible(state: TrainState, training: TrainingSettings, steps_per_epoch: int,
                            last: Path) -> None:
    """A resumed run must be able to go on from where its checkpoint stands: a position past the end of
    the epoch (the training data shrank), or a --max-steps it has already reached, would evaluate the
    same epoch over and over without a step (what a run folder's inputs.json normally catches first)."""
    if state.step_in_epoch > steps_per_epoch or state.global_step > steps_per_epoch * training.epochs:
        raise ResumeRefused(f"error: --resume: {last} stands at step {state.step_in_epoch} of epoch "
                         f"{state.epoch + 1}, but an epoch now has {steps_per_epoch} steps (did the training "
                         "data or the batch size change?); start a new run (another --out, without --resume)")
    if training.max_steps and state.global_step >= training.max_steps:
        raise ResumeRefused(f"error: --resume with --max-steps {training.max_steps}, but the run has taken "
                         f"{state.global_step} steps already ({last}); give a larger --max-steps, or none")


# ----- best/: the best epoch's model, for use --------------------------------------------------------


def _adapted(bert: nn.Module) -> bool:
    """Whether `bert` carries LoRA adapters. A LoRA layer exists only once minbert/lora.py is imported (by
    --lora), so a run without it loads none of LoRA's files."""
    lora = sys.modules.get("minbert.lora")
    return lora is not None and bool(lora.lora_layers(bert))


HEADS_WEIGHTS = "heads.safetensors"
HEADS_SETTINGS = "heads.json"


def head_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """Every parameter and buffer outside the encoder (`bert.`)."""
    return {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()
            if not k.startswith("bert.")}


def save_checkpoint(model: nn.Module, directory: Path, tokenizer: BertTokenizer, head_settings: dict,
                    sentence: Mapping[str, Any] | None = None) -> None:
    """The encoder in Hugging Face format, plus the heads and the settings that rebuild them (and the
    sentence-transformers files, when `sentence` says how the job pooled: the fields of
    minbert/loading/sentence_files.py's SentenceSettings), into the new best/ the loop is writing
    (atomic.py). A LoRA run's encoder: peft's adapter files and the merged encoder in merged/
    (`save_encoder`)."""
    encoder = directory
    if _adapted(model.bert):
        encoder = save_encoder(model.bert, directory, tokenizer)
    else:
        write_model(model.bert, directory, tokenizer=tokenizer)
    if sentence is not None:
        from minbert.loading.sentence_files import SentenceSettings, write_settings  # only when written
        for folder in {encoder, directory}:  # a LoRA run's best/ too, where SentenceTransformer looks
            write_settings(folder, SentenceSettings(**sentence), model.bert.config.hidden_size)
    write_file(directory / HEADS_WEIGHTS, lambda path: save_safetensors(head_state(model), str(path)))
    write_text(directory / HEADS_SETTINGS, json.dumps(head_settings, indent=2, sort_keys=True) + "\n")


def write_best(best: Path, save: Callable[[Path], None]) -> None:
    """best/ written by `save` whole beside the old one, with the sha256 of each file, then swapped in."""
    with atomic_directory(best, keep_others=False) as new_best:
        save(new_best)
        record_checksums(new_best)


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
    if _adapted(model.bert):
        from minbert.lora import merge_and_unload
        merge_and_unload(model.bert)
    model.bert.load_state_dict(BertModel.from_pretrained(directory).state_dict())
    heads = read_heads(directory / HEADS_WEIGHTS, head_state(model))
    model.load_state_dict({**model.state_dict(), **heads})


def save_encoder(bert: nn.Module, directory: Path, tokenizer) -> Path:
    """A LoRA run's encoder into best/: peft's adapter files and the tokenizer's (so SentenceTransformer(best/)
    builds base + adapters), and the merged plain folder best/merged/ (with the tokenizer's files). Returns
    the merged folder (sentence-transformers' files go in both)."""
    from minbert.loading.adapter_files import save_merged, write_adapter  # only under --lora
    from minbert.loading.hub import MERGED  # best/merged/: the encoder with its adapters folded in
    write_adapter(bert, directory)  # best/ is being written whole (save_checkpoint)
    tokenizer.save(directory)
    return save_merged(bert, directory / MERGED, tokenizer=tokenizer)


def read_run_settings(run_dir: str, job: str, keys: Sequence[str], settings: Sequence[Any] = ()
                      ) -> tuple[Path, dict]:
    """A finished run's folder (or its best/ folder) -> (best/, the settings `job` saved with its heads).

    The settings must name `job`, hold every one of `keys`, and each flag of the `settings` groups it holds
    must be of the flag's kind; anything else is a one-line error."""
    best = readable_directory(Path(run_dir) / "best")  # best/, even if a crash interrupted its swap
    best = best if best.is_dir() else Path(run_dir)
    path = best / HEADS_SETTINGS
    if not path.is_file():
        raise SystemExit(f"error: --predict {run_dir}: no {path} (expected a tasks.{job} run folder that "
                         "finished at least one epoch, or its best/ folder)")
    verify_folder(best)  # before any of it is read (load_checkpoint checks again what it loads)
    saved = read_json_object(path)
    if "job" not in saved:
        raise SystemExit(f"error: --predict {run_dir}: {path} lacks its job (the field every job writes, "
                         f"here '{job}'): damaged, or not written by tasks.{job}")
    if saved["job"] != job:
        named = isinstance(saved["job"], str)
        who = f"tasks.{saved['job']}" if named else f"something other than tasks.{job}"
        raise SystemExit(f"error: --predict {run_dir}: {path} was written by {who}, whose heads "
                         f"tasks.{job} cannot rebuild")
    check_fields(saved, settings_schema(*settings, required=keys), f"{path}: ")
    return best, saved
