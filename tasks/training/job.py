"""What every job is made of around the loop, written once: its run (`JobRun`), the pre-trained encoder,
the model made ready to train (frozen, adapted, fast paths on), its optimizer, and one-line errors.

A job says only what is its own (its settings, data, model, tasks and outputs); the rest is here:

    with user_errors():  # one line, "error: ...", for what a user can fix
        settings = parse_settings(build_parser(), argv)  # settings.py: one object, "auto" decided
        with JobRun("sentiment", settings, {"task": settings.sentiment.task}) as run:  # seed, folder
            run.write_config(data_path=...)  # config.json: every setting, and where the data was
            bert, tokenizer, model_dir = run.load_encoder()  # checked against --max-length
            ...  # the job's model and tasks
            state = run.train(model, tasks, score, tokenizer=tokenizer, head_settings=heads)  # best/ back

Read next: ../sentiment.py (the smallest job).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import os
import signal
import sys
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import torch
from torch import nn

from minbert.config import BertConfig
from minbert.loading.errors import MinbertError, machine_limit, os_refusal, shorten
from minbert.loading.hub import resolve_model
from minbert.model import BertModel
from minbert.text.tokenizer import BertTokenizer
from optim.param_groups import make_param_groups, uses_weight_decay
from tasks.data.inputs import model_fingerprint, recorded, start_job
from tasks.data.sources import data_env
from tasks.training.checkpoints import TrainState, load_checkpoint, save_checkpoint
from tasks.training.loop import train
from tasks.training.process import Interrupted, in_handout, process_rank, signals_stop_the_job
from tasks.training.run_folder import RunDir, claim_run, default_run_dir
from tasks.training.settings import (OPTIMIZERS, JobSettings, RunSettings, SettingsParser, TrainingSettings,
                                     groups, resolve_settings)


# A failure that is ours, not the user's, keeps its traceback; this note ends it.
BUG_NOTE = "this is a bug in minbert, not in your files: please report it with the traceback above"
# The operating system's refusals of a write for a reason outside the program (EFBIG: the file outgrew the
# file system's or the process's size limit); every file is written beside its place first: nothing is half.
WRITE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EACCES, errno.EROFS, errno.EPERM)


def user_fault(error: BaseException) -> str | None:
    """The line a job prints for `error` where the user can fix it, else None (a bug of ours).

    The user's: every MinbertError (a file, checkpoint, config.json, data file, download or device, named by
    its message), a diverged run (FloatingPointError from the loop: the message names the step and the last
    good checkpoint), every refusal of the operating system (any OSError, and the symlink loop that
    pathlib raises as a RuntimeError), named by its path and cause, and a limit of the machine reached
    (memory, open files: errors.machine_limit), named with the limit."""
    if limit := machine_limit(error):
        return limit
    refusal = os_refusal(error)
    if refusal is None:
        return str(error) if isinstance(error, (MinbertError, FloatingPointError)) else None
    name, cause = refusal.filename, refusal.strerror
    if refusal.errno is None or name is None:  # a message of its own, naming the path
        return str(refusal)
    if refusal.errno in (errno.EACCES, errno.EPERM) and Path(name).is_file() and not os.access(name, os.R_OK):
        return f"cannot read {name}: {cause}"  # a file we may not read: "cannot write" would misname it
    if refusal.errno in WRITE_ERRNOS:
        return (f"cannot write {name}: {cause}; files written before are intact (every write goes to a "
                "temporary file first)")
    return f"{name}: {cause}"


def env_switch(name: str) -> bool:
    """The environment variable `name` as a switch: 1, true, yes or on (any case) turn it on; unset, empty,
    0, false, no or off leave it off; anything else is a usage error naming the variable (exit status 2)."""
    on, off = ("1", "true", "yes", "on"), ("0", "false", "no", "off", "")
    value = os.environ.get(name, "")
    if value.strip().lower() in on + off:
        return value.strip().lower() in on
    print(f"error: environment variable {name}={value!r}: must be one of {', '.join(on)} (on) or "
          f"{', '.join(off[:-1])} or empty (off)", file=sys.stderr)
    raise SystemExit(2)


@contextlib.contextmanager
def user_errors():
    """Run a job's body, its one error boundary: an error the user can fix (`user_fault`) becomes one line
    on stderr ("error: ...") and exit 1; a bug of ours keeps its traceback, which ends with BUG_NOTE.

    Every file is written atomically (minbert/loading/atomic.py), so a failed write leaves the previous
    version intact; the message says so. Ctrl-C and SIGTERM print the line the run folder's state calls for
    (`Interrupted.message`, from claim_run) and exit 128 + the signal's number. MINBERT_TRACEBACK=1 (a
    switch: `env_switch`) gives the traceback instead.
    """
    show_traceback = env_switch("MINBERT_TRACEBACK")
    start_job()  # the files this job reads are its inputs (tasks/data/inputs.py), not an earlier job's
    reserve = bytearray(4 << 20)  # given back when memory runs out, so that the line below has room
    try:
        with signals_stop_the_job():
            yield
    except KeyboardInterrupt as error:
        if show_traceback:
            raise
        stop = error if isinstance(error, Interrupted) else Interrupted(signal.SIGINT)
        if process_rank() == 0:  # under torchrun, every process got the signal; one says so
            print(stop.message or f"interrupted by {stop.name} while no run was being written: nothing "
                  "to save", file=sys.stderr)
        raise SystemExit(stop.exit_status) from None
    except BaseException as error:  # an Exception, or a native library's panic (tokenizers' PanicException)
        del reserve
        if isinstance(error, (SystemExit, GeneratorExit)):
            raise
        line = user_fault(error)
        # a handout's unwritten TODO (grading/regions.py's stub) is the student's next step, not our bug: its
        # traceback ends at the TODO's line, as the handout's README says
        todo = isinstance(error, NotImplementedError) and str(error).startswith("TODO: ")
        if line is None and not todo and BUG_NOTE not in getattr(error, "__notes__", ()):  # once (study)
            if hasattr(error, "add_note"):  # Python 3.11+
                error.add_note(BUG_NOTE)
            else:  # Python 3.10 prints no notes: the line goes before the traceback
                print(BUG_NOTE.replace("the traceback above", "the traceback below"), file=sys.stderr)
        if line is None or show_traceback:
            raise
        raise SystemExit(f"error: {shorten(line)}") from None


def check_max_length(max_length: int, config: BertConfig, pairs: bool = False) -> None:
    """--max-length must hold [CLS] and [SEP] (and a second [SEP] for pairs) and fit the model's positions."""
    smallest = 3 if pairs else 2
    if max_length < smallest:
        raise SystemExit(f"error: --max-length {max_length} is too small: the special tokens alone "
                         f"need {smallest}")
    if max_length > config.max_position_embeddings:
        raise SystemExit(f"error: --max-length {max_length} exceeds the model's "
                         f"{config.max_position_embeddings} positions")


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


def check_out_apart(out: Path, data_dir: str | None, model: str | None) -> None:
    """--out must not be the data folder (--data-dir, $MINBERT_DATA) or the model folder (--model), nor lie
    inside one: the run's checkpoints, predictions and best/ would mix with the inputs, and a later run
    would read them as data or as the model."""
    env = os.environ.get("MINBERT_DATA")
    places = [("--data-dir", data_dir), ("MINBERT_DATA", env), ("--model", model)]
    where = out.resolve()
    for name, place in places:
        if place and Path(place).is_dir():
            inputs = Path(place).resolve()
            if where == inputs or inputs in where.parents:
                relation = "is" if where == inputs else "is inside"
                raise SystemExit(f"error: --out {out} {relation} the {name} folder {place}: a run's outputs "
                                 "do not belong among its inputs; choose an --out outside it")


def load_encoder(name_or_path: str,
                 attn_implementation: str = "sdpa") -> tuple[BertModel, BertTokenizer, Path]:
    """Resolve and load the pre-trained encoder and its tokenizer; print what was loaded. A LoRA run's best/
    gives its merged encoder (best/merged/)."""
    model_dir = resolve_model(name_or_path)
    model_class = BertModel
    if attn_implementation == "unpadded":  # a model class of its own, loaded only when settings.py chose it
        from minbert.fast.unpadded import UnpaddedBertModel as model_class  # packs the batch first
    bert, report = model_class.from_pretrained(
        model_dir, attn_implementation=attn_implementation, return_report=True)
    tokenizer = BertTokenizer.from_pretrained(model_dir)
    print(f"model: {model_dir} ({bert.config.num_hidden_layers} layers, hidden {bert.config.hidden_size}, "
          f"{attn_implementation} attention); {report}", file=sys.stderr)
    return bert, tokenizer, model_dir


def load_job_encoder(job: JobSettings, pairs: bool = False) -> tuple[BertModel, BertTokenizer, Path]:
    """--model's encoder with the resolved --attn-implementation, its tokenizer and its folder; --max-length
    checked against it (pairs: two [SEP])."""
    bert, tokenizer, model_dir = load_encoder(job.model, job.attn_implementation)
    check_max_length(job.max_length, bert.config, pairs)
    return bert, tokenizer, model_dir


def freeze(module: nn.Module) -> None:
    """The course's `--option pretrain`: the encoder's weights stay as loaded, only heads learn."""
    for param in module.parameters():
        param.requires_grad_(False)


def use_fast_paths(model: nn.Module) -> nn.Module:
    """Outside a student's handout (process.in_handout), the fast paths that give the same numbers for the
    model as built: minbert.fast.dropout's cheaper CPU dropout in place of every nn.Dropout, and freed memory
    kept for the next step (`keep_freed_memory`). Returns `model`."""
    if not in_handout():
        from minbert.fast.dropout import use_fast_dropout
        use_fast_dropout(model)
        keep_freed_memory()
    return model


M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4  # glibc's <malloc.h>


def glibc():
    """The C library when it is glibc (it has mallopt), else None (macOS, musl)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "mallopt") and hasattr(libc, "gnu_get_libc_version") else None


def keep_freed_memory() -> bool:
    """No mmap for large blocks, and the heap's free top kept, so that a freed block serves the next step's
    request with its pages mapped. glibc returns a freed block of 32 MiB or more to the system, and a step
    frees and asks again for the same ones: MiniLM's word embeddings' gradient (30,522 x 384 float32,
    45 MiB) is built anew by every backward, and zeroing its fresh pages took 15-38 ms of a 255 ms bf16
    step on one core (docs/results.md). Numbers do not change; the process keeps what it used at its peak.
    Returns whether glibc took both settings."""
    libc = glibc()
    keep = 1 << 30  # the free top of the heap given back above 1 GiB only
    return libc is not None and bool(libc.mallopt(M_MMAP_MAX, 0)) and bool(libc.mallopt(M_TRIM_THRESHOLD,
                                                                                         keep))


def add_adapters(bert: nn.Module, r: int, alpha: float, dropout: float, targets: str) -> list[str]:
    """--lora R's adapters (Hu et al. 2021) on `bert` in place of each nn.Linear of --lora-targets, every
    other encoder weight frozen (the heads train fully); returns the adapted layers' names. A rank beyond
    min(O, I) of an O x I layer only costs memory (an absurd one more than the machine holds): refused. A
    resume checkpoint holds the adapted model, so --resume rebuilds the same adapters first; best/ is peft's
    (checkpoints.py)."""
    from minbert.lora import ALL_LINEAR, apply_lora, target_names  # LoRA's files load only under --lora
    chosen = targets if targets == ALL_LINEAR else tuple(targets.split(","))
    before = sum(p.numel() for p in bert.parameters())
    try:
        layers = [bert.get_submodule(name) for name in target_names(bert, chosen)]
    except ValueError as error:
        raise SystemExit(f"error: --lora-targets {targets}: {error}") from None
    most = min(min(layer.in_features, layer.out_features) for layer in layers)
    if r > most:
        raise SystemExit(f"error: --lora {r}: the adapted layers' B A has rank at most {most} (the smallest "
                         f"side of their weights), so a larger rank adds nothing; give --lora {most} or less")
    names = apply_lora(bert, r, alpha, dropout, chosen)
    adapters = sum(p.numel() for p in bert.parameters() if p.requires_grad)
    print(f"LoRA: r={r}, alpha={alpha:g}, dropout={dropout:g} on {len(names)} layers ({targets}): "
          f"{adapters:,} adapter parameters train, the encoder's {before:,} stay frozen; the heads train "
          "fully", file=sys.stderr)
    return names


def build_optimizer(model: nn.Module, training: TrainingSettings) -> torch.optim.Optimizer:
    """The --optimizer's row of OPTIMIZERS over the parameter groups: the model's one BertModel (or, without
    one, all of it) at --lr, with --layerwise-decay's smaller rates below (optim/param_groups.py), the rest
    (the heads) at --head-lr; biases and LayerNorm weights never decay. Frozen parameters (--option
    pretrain's encoder, all but --lora's adapters) are left out: no state kept for them."""
    encoders = [module for module in model.modules() if isinstance(module, BertModel)]
    if len(encoders) > 1:
        raise TypeError(f"build_optimizer: {type(model).__name__} holds {len(encoders)} BertModels, not one")
    encoder = encoders[0] if encoders else model
    groups = make_param_groups(encoder, lr=training.lr, weight_decay=training.weight_decay,
                               layer_decay=training.layerwise_decay)
    groups = [{**g, "params": [p for p in g["params"] if p.requires_grad],
               "param_names": [n for n, p in zip(g["param_names"], g["params"]) if p.requires_grad]}
              for g in groups]
    groups = [g for g in groups if g["params"]]
    in_encoder = {id(p) for p in encoder.parameters()}
    heads = [(name, p) for name, p in model.named_parameters() if id(p) not in in_encoder and p.requires_grad]
    for decay in (True, False):
        chosen = [(n, p) for n, p in heads if uses_weight_decay(n) == decay]
        if chosen:
            groups.append({"params": [p for _, p in chosen], "param_names": [n for n, _ in chosen],
                           "lr": training.head_lr, "weight_decay": training.weight_decay if decay else 0.0})
    return OPTIMIZERS[training.optimizer](groups, training)


def parse_settings(parser: SettingsParser, argv: Sequence[str] | None, resolve: bool = True) -> RunSettings:
    """The command line as the job's settings object (--seeds checked against --seed: repeats, or both given)
    and, unless `resolve` is False, the run's real settings decided (settings.py's `resolve_settings`)."""
    settings = parser.parse(argv)
    if settings.seeds is not None:
        if any(a == "--seed" or a.startswith("--seed=") for a in (sys.argv[1:] if argv is None else argv)):
            parser.error("give --seed or --seeds, not both")
        if len(set(settings.seeds)) != len(settings.seeds):
            parser.error(f"--seeds has repeats: {list(settings.seeds)}")
    return resolve_settings(settings) if resolve else settings


class JobRun:
    """One run of a job in its run folder: the steps every job takes around its own data, model and tasks.

    As a context manager it seeds torch with --seed (`seed=False`: the job did, before drawing fresh heads)
    and claims the folder (`claim_run`: --out, else runs/<job>/<date-time>). `identity`: what else a
    --resume must match (the task, the dataset, ...).
    """

    def __init__(self, name: str, settings: RunSettings, identity: dict | None = None, *,
                 out: str | Path | None = None, resume: bool | None = None, model: str | None = None,
                 seed: bool = True) -> None:
        self.name, self.settings, self.identity, self.seed = name, settings, identity or {}, seed
        self.job, self.training = settings.job, settings.training
        self.out = out or (self.job.out if self.job else None) or default_run_dir(name)
        self.resume = self.training.resume if resume is None else resume
        self.model = model or self.job.model
        self.folder: RunDir | None = None

    def __enter__(self) -> "JobRun":
        check_out_apart(Path(self.out), self.job.data_dir if self.job else None, self.model)
        if self.seed:
            torch.manual_seed(self.training.seed)
        self._claim = claim_run(self.out, self.name, self.model, self.identity, self.resume,
                                groups(self.settings))
        self.folder = self._claim.__enter__()
        return self

    def __exit__(self, *error: Any) -> bool | None:
        return self._claim.__exit__(*error)

    def write_config(self, **facts: Any) -> None:
        """config.json: every group of the settings as the run really uses it, and `facts` (where the data
        was, ...). Called once the job has read its data: first inputs.json, the fingerprints of the data
        files read and of the model folder, which a --resume must find unchanged (checked before anything
        is written)."""
        model_dir = resolve_model(self.model)
        self.folder.record_inputs(recorded(), model_fingerprint(model_dir), self.resume)
        self.folder.write_config(*groups(self.settings), **facts)

    def load_encoder(self, pairs: bool = False) -> tuple[BertModel, BertTokenizer, Path]:
        """--model's encoder, its tokenizer and its folder (`load_job_encoder`)."""
        return load_job_encoder(self.job, pairs)

    def train(self, model: nn.Module, tasks: Sequence, overall_score: Callable[[dict], float], *,
              tokenizer: BertTokenizer | None = None, head_settings: dict | None = None,
              sentence: Mapping[str, Any] | None = None,
              save_best: Callable[[nn.Module, Path], None] | None = None) -> TrainState | None:
        """The loop, each best epoch saved in best/: the encoder and heads with `head_settings` (and
        sentence-transformers' files where `sentence` says how the job pooled), or by `save_best`. Then
        best/'s weights go back into `model`, in eval mode, for the job's outputs (not after a `save_best` of
        the job's own). None in a torchrun process other than rank 0: rank 0 writes the outputs."""
        if self.job is not None and self.job.freeze_encoder:
            freeze(model.bert)
        if self.job is not None and self.job.lora is not None:  # before the loop: --resume loads into them
            add_adapters(model.bert, self.job.lora, self.job.lora_alpha, self.job.lora_dropout,
                         self.job.lora_targets)
        use_fast_paths(model)  # the model now whole (encoder, heads, adapters): the loop trains it as given
        if save_best is None:
            def save_best(model: nn.Module, directory: Path) -> None:
                save_checkpoint(model, directory, tokenizer, head_settings, sentence)
        state = train(model, tasks, lambda model: build_optimizer(model, self.training), self.training,
                      self.folder, overall_score, save_best, resume=self.resume)
        if process_rank() != 0:
            return None
        if not self.training.keep_checkpoints:
            self.folder.drop_checkpoints(state, self.training.epochs)
        if head_settings is not None:
            load_checkpoint(model, self.folder.best)
            model.eval()
        return state
