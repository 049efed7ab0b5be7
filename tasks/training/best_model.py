"""Head checkpoints: a run's best/ folder, the encoder with the task heads, saved and loaded back.

best/ is a Hugging Face-format encoder directory (config.json, model.safetensors, vocab.txt) that
`transformers` opens, plus the task heads in heads.safetensors and the settings that rebuild them in
heads.json (the job's name first among them). A job that trains sentence vectors (the main job's pair
heads) also writes sentence-transformers' files there, so `SentenceEncoder(best)` and
`SentenceTransformer(best)` pool and normalise as the job did. The loop saves it at every best epoch
(`train_and_reload_best`); a job's outputs, its `--predict` and the notebooks load it back.

Read next: ../sentiment.py (the smallest job).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import torch
from safetensors.torch import load_file as load_safetensors
from safetensors.torch import save_file as save_safetensors
from torch import nn

from minbert.loading.atomic import atomic_write, atomic_write_text, readable_directory
from minbert.loading.checkpoint import save_model
from minbert.model import BertModel
from minbert.loading.sentence_files import SentenceSettings, write_settings
from minbert.text.tokenizer import BertTokenizer
from tasks.training import distributed
from tasks.training.config import TrainConfig
from tasks.training.loop import train
from tasks.training.run_dir import RunDir, TrainState

HEADS_WEIGHTS = "heads.safetensors"
HEADS_SETTINGS = "heads.json"


def head_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """Every parameter and buffer outside the encoder (`bert.`)."""
    return {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()
            if not k.startswith("bert.")}


def save_checkpoint(model: nn.Module, directory: Path, tokenizer: BertTokenizer, settings: dict,
                    sentence: SentenceSettings | None = None) -> None:
    """The encoder in Hugging Face format, plus the heads and the settings that rebuild them (and the
    sentence-transformers files, when `sentence` says how the job pooled)."""
    save_model(model.bert, directory, tokenizer=tokenizer)
    if sentence is not None:
        write_settings(directory, sentence, model.bert.config.hidden_size)
    atomic_write(directory / HEADS_WEIGHTS, lambda tmp: save_safetensors(head_state(model), str(tmp)))
    atomic_write_text(directory / HEADS_SETTINGS, json.dumps(settings, indent=2, sort_keys=True) + "\n")


def load_checkpoint(model: nn.Module, directory: Path) -> None:
    """Load what `save_checkpoint` wrote into a model of the same shape (strictly)."""
    directory = readable_directory(directory)  # best/, even if a crash interrupted its swap
    model.bert.load_state_dict(BertModel.from_pretrained(directory).state_dict())
    heads = load_safetensors(str(directory / HEADS_WEIGHTS))
    missing = set(head_state(model)) - set(heads)
    unknown = set(heads) - set(head_state(model))
    if missing or unknown:
        raise ValueError(f"{directory / HEADS_WEIGHTS}: does not fit the model's heads (missing "
                         f"{sorted(missing)}, unknown {sorted(unknown)}); was it written with other "
                         "head options?")
    model.load_state_dict({**model.state_dict(), **heads})


def read_run_settings(run_dir: str, job: str, keys: Sequence[str]) -> tuple[Path, dict]:
    """A finished run's folder (or its best/ folder) -> (best/, the settings `job` saved with its heads).

    The settings must name `job` and hold every one of `keys`; anything else is a one-line error."""
    best = readable_directory(Path(run_dir) / "best")  # best/, even if a crash interrupted its swap
    best = best if best.is_dir() else Path(run_dir)
    path = best / HEADS_SETTINGS
    if not path.is_file():
        raise SystemExit(f"error: --predict {run_dir}: no {path} (expected a tasks.{job} run folder that "
                         "finished at least one epoch, or its best/ folder)")
    try:
        settings = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise SystemExit(f"error: {path}: not valid JSON ({error})") from None
    writer = settings.get("job") if isinstance(settings, dict) else None
    if writer != job:
        who = f"tasks.{writer}" if writer else f"something other than tasks.{job}"
        raise SystemExit(f"error: --predict {run_dir}: {path} was written by {who}, whose heads "
                         f"tasks.{job} cannot rebuild")
    missing = [key for key in keys if key not in settings]
    if missing:
        raise SystemExit(f"error: {path}: missing {', '.join(missing)}; was it written by an older version?")
    return best, settings


def train_and_reload_best(model: nn.Module, tasks: Sequence, config: TrainConfig, run: RunDir, overall_score,
                          tokenizer: BertTokenizer, settings: dict, resume: bool,
                          sentence: SentenceSettings | None = None) -> TrainState | None:
    """The shared loop, each best epoch saved with `save_checkpoint`; then the best weights back in `model`,
    in eval mode, for the job's outputs. None in a torchrun process other than rank 0: rank 0 writes the
    outputs."""
    state = train(model, tasks, config, run, overall_score,
                  save_best=lambda m, d: save_checkpoint(m, d, tokenizer, settings, sentence), resume=resume)
    if distributed.process_rank() != 0:
        return None
    if not config.keep_checkpoints:
        run.drop_checkpoints(state, config.epochs)
    load_checkpoint(model, run.best)
    model.eval()
    return state
