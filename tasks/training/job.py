"""What every fine-tuning job starts with: the course's file flags, the pre-trained encoder, one-line errors.

- `course_file_flags`: the course starter's file flags (--sst_train ... --sts_test_out) of a job's tasks,
  settings like config.py's JobSettings (tasks/data/course_files.py reads and writes what they name);
- `load_encoder`: a model name or directory -> our BertModel and its tokenizer, with what was loaded;
- `user_errors`: what a user can fix (a bad path, data file, checkpoint or config.json, a full disk) ends
  the job with one line, "error: ...", instead of a traceback (MINBERT_TRACEBACK=1 shows it); so do Ctrl-C
  and SIGTERM (interrupt.py: the line says how to continue; exit status 130 or 143).

Read next: best_model.py (what a job saves and loads back).
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import os
import signal
import sys
from dataclasses import make_dataclass
from pathlib import Path
from typing import Any, Mapping

from minbert.checkpoint import CheckpointError
from minbert.config import BertConfig, ConfigError
from minbert.hub import resolve_model
from minbert.model import BertModel
from minbert.tokenizer import BertTokenizer
from minbert.unpadded import model_class
from tasks.data.course import task_files
from tasks.data.examples import DataFileError
from tasks.data.sources import DownloadError, data_env
from tasks.training import interrupt
from tasks.training.arguments import existing_file, output_file
from tasks.training.distributed import process_rank
from tasks.training.settings import flag


def course_input(dataset: str, split: str) -> Any:
    # the training and dev files shape the run; a resumed run may name other test files
    return flag(None, f"instead of <data-dir>/{task_files([dataset], [split])[0]}", type=existing_file,
                course=True, same_on_resume=split != "test")


def course_output(prefix: str, split: str) -> Any:
    return flag(None, f"instead of <out>/predictions/{prefix}-{split}-output.csv", type=output_file,
                course=True, same_on_resume=False)


def course_file_flags(tasks: Mapping[str, str]) -> type:
    """The course's file flags of `tasks` (prefix -> dataset: {"sst": "sst", "para": "quora", ...}) as a
    settings class: --{prefix}_{train,dev,test} for the inputs, then --{prefix}_{dev,test}_out for the
    predictions, each None unless given."""
    inputs = [(f"{p}_{split}", str | None, course_input(dataset, split))
              for p, dataset in tasks.items() for split in ("train", "dev", "test")]
    outputs = [(f"{p}_{split}_out", str | None, course_output(p, split))
               for p in tasks for split in ("dev", "test")]
    files = make_dataclass("CourseFiles", inputs + outputs, frozen=True)
    files.__doc__ = "The course's files (each flag replaces one file that --data-dir or --out gives)."
    return files


# Errors that mean the input is wrong, not the code; their messages name the file, key or field. Also a
# diverged run (FloatingPointError from the training loop: the message names the step and the last good
# checkpoint).
USER_ERRORS = (CheckpointError, ConfigError, DataFileError, DownloadError, FileNotFoundError,
               FloatingPointError)
# Writing failed for a reason outside the program (EFBIG: the file outgrew the file system's or the process's
# size limit).
WRITE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EACCES, errno.EROFS, errno.EPERM)


@contextlib.contextmanager
def user_errors():
    """Run a job's body; an error the user can fix becomes one line on stderr ("error: ...") and exit 1.

    Every file is written atomically (minbert/atomic.py), so a failed write leaves the previous version
    intact; the message says so. Ctrl-C and SIGTERM print the line the run folder's state calls for
    (`Interrupted.message`, from claim_run) and exit 128 + the signal's number. Set MINBERT_TRACEBACK=1 to
    get the traceback instead.
    """
    try:
        with interrupt.signals_stop_the_job():
            yield
    except KeyboardInterrupt as error:
        if os.environ.get("MINBERT_TRACEBACK"):
            raise
        stop = error if isinstance(error, interrupt.Interrupted) else interrupt.Interrupted(signal.SIGINT)
        if process_rank() == 0:  # under torchrun, every process got the signal; one says so
            print(stop.message or f"interrupted by {stop.name} while no run was being written: nothing "
                  "to save", file=sys.stderr)
        raise SystemExit(stop.exit_status) from None
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
    """The shared datasets folder (holding glue/, trec/, hwv/, ...): --data-dir, else $MINBERT_DATA (set, it
    must exist: tasks.data.sources.data_env), else ../shared/data beside the checkout (this file is
    tasks/training/job.py inside the checkout). (The course jobs find their CSV files with
    tasks.data.sources.resolve_data_dir.)"""
    beside = Path(__file__).resolve().parents[3] / "shared" / "data"
    candidate = Path(data_dir) if data_dir else data_env() or beside
    if candidate.is_dir():
        return candidate
    raise SystemExit(f"error: no data folder found (tried {candidate}); point --data-dir or MINBERT_DATA at "
                     "the shared datasets folder")


def load_encoder(name_or_path: str,
                 attn_implementation: str = "sdpa") -> tuple[BertModel, BertTokenizer, Path]:
    """Resolve and load the pre-trained encoder and its tokenizer; print what was loaded."""
    model_dir = resolve_model(name_or_path)
    # The unpadded path is a model class of its own, which packs the batch before the embeddings.
    bert, report = model_class(attn_implementation).from_pretrained(
        model_dir, attn_implementation=attn_implementation, return_report=True)
    tokenizer = BertTokenizer.from_pretrained(model_dir)
    print(f"model: {model_dir} ({bert.config.num_hidden_layers} layers, hidden {bert.config.hidden_size}, "
          f"{attn_implementation} attention); {report}", file=sys.stderr)
    return bert, tokenizer, model_dir
