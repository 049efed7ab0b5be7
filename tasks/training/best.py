"""best/: the best epoch's model, saved whole for use, verified and loaded back, and its settings read.

best/ is a Hugging Face-format encoder directory (config.json, model.safetensors, vocab.txt) that
`transformers` opens, plus the task heads in heads.safetensors and the settings that rebuild them in
heads.json (the job's name first among them). A job that trains sentence vectors (the main job's pair
heads) also writes sentence-transformers' files there, so `SentenceEncoder(best)` and
`SentenceTransformer(best)` pool and normalise as the job did. The loop saves it whole at every best epoch,
with the sha256 of each file in checksums.sha256; a job's outputs, its `--predict` and the notebooks load it
back (`load_checkpoint`), once every file matches its checksum. A LoRA run's best/ is peft's adapter folder
(lora_run.py); its files load only for a LoRA model.

Read next: signals.py (Ctrl-C and SIGTERM, which stop a run saved).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

import torch
from safetensors.torch import save_file as save_safetensors
from torch import nn

from minbert.loading.atomic import DamagedFileError, readable_directory, verify_folder, write_file, write_text
from minbert.loading.checkpoint import write_model
from minbert.loading.files import read_json_object
from minbert.loading.schema import check_fields
from minbert.model import BertModel
from minbert.text.tokenizer import BertTokenizer
from tasks.training.checkpoints import TrainState
from tasks.training.run_records import read_heads, settings_schema


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
    (lora_run.py)."""
    encoder = directory
    if _adapted(model.bert):
        from tasks.training.lora_run import save_encoder
        encoder = save_encoder(model.bert, directory, tokenizer)
    else:
        write_model(model.bert, directory, tokenizer=tokenizer)
    if sentence is not None:
        from minbert.loading.sentence_files import SentenceSettings, write_settings  # only when written
        for folder in {encoder, directory}:  # a LoRA run's best/ too, where SentenceTransformer looks
            write_settings(folder, SentenceSettings(**sentence), model.bert.config.hidden_size)
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
    if _adapted(model.bert):
        from minbert.lora import merge_and_unload
        merge_and_unload(model.bert)
    model.bert.load_state_dict(BertModel.from_pretrained(directory).state_dict())
    heads = read_heads(directory / HEADS_WEIGHTS, head_state(model))
    model.load_state_dict({**model.state_dict(), **heads})


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
