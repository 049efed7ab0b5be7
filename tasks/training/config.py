"""The training loop's settings: TrainConfig, and the flags every job exposes for it.

Every job adds these flags with `add_train_arguments` and turns the parsed arguments into a TrainConfig
with `train_config_from_args`; TrainConfig checks its own values and names the flag when one is wrong.

Read next: loop.py (what the settings drive).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import torch

from optim.schedules import SCHEDULES
from tasks.training.arguments import non_negative, non_negative_int, positive, positive_int, real
from tasks.training.precision import PRECISIONS, resolve_precision
from tasks.training.threads import apply_threads

SAMPLINGS = ("round-robin", "proportional")
WARMUP = real(0.0, 1.0, high_open=True, meaning="a fraction of the training steps")
LAYER_DECAY = real(0.0, 1.0, low_open=True, meaning="1: no decay")
EMA_DECAY = real(0.0, 1.0, high_open=True, meaning="0: no average")
AVERAGE_FRACTION = real(0.0, 1.0, meaning="a fraction of the training steps; 0: no average")
ATTENTION_CHOICES = ("auto", "unpadded", "sdpa", "eager")
# The main job under auto (bf16 on this CPU) matched fp32's dev figures within run-to-run noise, in half
# the time per epoch (README, "The main job").
DEFAULT_PRECISION = "auto"


@dataclass(frozen=True)
class TrainConfig:
    """Settings of the loop (every job exposes them as flags; see `add_train_arguments`)."""

    epochs: int = 2
    lr: float = 5e-5
    head_lr: float = 1e-3
    batch_size: int = 32
    weight_decay: float = 0.01
    schedule: str = "linear"
    warmup: float = 0.1
    max_grad_norm: float = 1.0
    layerwise_decay: float = 1.0
    sampling: str = "round-robin"
    bf16: bool = False
    freeze_encoder: bool = False
    seed: int = 11711
    max_steps: int = 0
    checkpoint_every: int = 0
    eval_first: bool = False
    keep_checkpoints: bool = False
    device: str = "cpu"
    # (task name, factor) pairs: that task's loss counts factor times in the gradient; unnamed tasks 1.
    task_weights: tuple[tuple[str, float], ...] = ()
    ema: float = 0.0  # decay of the weights' moving average that is evaluated and saved; 0: none
    # the plain mean of the weights after each step of this last fraction of training is evaluated and
    # saved; 0: none
    average_last: float = 0.0

    def __post_init__(self) -> None:
        checks = [
            (self.epochs >= 1, "--epochs must be at least 1"),
            (self.lr > 0 and self.head_lr > 0, "--lr and --head-lr must be positive"),
            (self.batch_size >= 1, "--batch-size must be at least 1"),
            (0.0 <= self.warmup < 1.0, "--warmup is a fraction of the training steps, in [0, 1)"),
            (self.max_grad_norm >= 0, "--max-grad-norm must be >= 0 (0 turns clipping off)"),
            (0.0 < self.layerwise_decay <= 1.0, "--layerwise-decay must be in (0, 1]"),
            (self.sampling in SAMPLINGS, f"--sampling must be one of {SAMPLINGS}"),
            (self.schedule in SCHEDULES, f"--schedule must be one of {sorted(SCHEDULES)}"),
            (self.max_steps >= 0 and self.checkpoint_every >= 0,
             "--max-steps and --checkpoint-every must be >= 0"),
            (all(w > 0 for _, w in self.task_weights), "--task-weights must all be positive"),
            (0.0 <= self.ema < 1.0, "--ema must be in [0, 1) (0: no average)"),
            (0.0 <= self.average_last <= 1.0, "--average-last must be in [0, 1] (0: no average)"),
            (not (self.ema and self.average_last),
             "--ema and --average-last are two weight averages; pick one"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)


def add_train_arguments(parser, head_lr_help: str = "peak learning rate of the freshly initialised "
                                                    "task heads") -> None:
    """The loop's flags, shared by every job (the course's names kept: --batch_size, --lr, --epochs...)."""
    d = TrainConfig()
    g = parser.add_argument_group("training")
    g.add_argument("--epochs", type=positive_int, default=d.epochs,
                   help="passes over the training data (default %(default)s)")
    g.add_argument("--lr", type=positive, default=d.lr, help="peak learning rate of the encoder")
    g.add_argument("--head-lr", type=positive, default=d.head_lr, help=head_lr_help)
    g.add_argument("--batch_size", "--batch-size", dest="batch_size", type=positive_int, default=d.batch_size,
                   help="examples per batch (per task, per step)")
    g.add_argument("--weight-decay", type=non_negative, default=d.weight_decay,
                   help="AdamW's decoupled weight decay (never on biases and LayerNorm)")
    g.add_argument("--schedule", choices=sorted(SCHEDULES), default=d.schedule, help="learning-rate schedule")
    g.add_argument("--warmup", type=WARMUP, default=d.warmup,
                   help="warm-up length as a fraction of all training steps")
    g.add_argument("--max-grad-norm", type=non_negative, default=d.max_grad_norm,
                   help="clip the global gradient norm to this (0: no clipping)")
    g.add_argument("--layerwise-decay", type=LAYER_DECAY, default=d.layerwise_decay,
                   help="layer-wise lr decay xi (Sun et al. 2019): layer k-1 gets xi times layer k's rate")
    g.add_argument("--ema", type=EMA_DECAY, default=d.ema, metavar="DECAY",
                   help="evaluate and save an exponential moving average of the weights with this decay "
                        "(e.g. 0.999; optim/ema.py), training goes on with the raw weights (default 0: off)")
    g.add_argument("--average-last", type=AVERAGE_FRACTION, default=d.average_last, metavar="FRACTION",
                   help="evaluate and save the plain mean of the weights after every step of the last "
                        "FRACTION of training (checkpoint averaging; e.g. 0.33: about the last of 3 "
                        "epochs; optim/ema.py), training goes on with the raw weights (default 0: off)")
    g.add_argument("--sampling", choices=SAMPLINGS, default=d.sampling,
                   help="round-robin: one batch of every task per step, losses summed; proportional: one "
                        "task per step, chosen in proportion to its remaining batches (default %(default)s)")
    g.add_argument("--precision", choices=PRECISIONS, default=None,
                   help="fp32, or bf16 autocast for forward and loss; auto: bf16 where the CPU or GPU "
                        "multiplies bfloat16 natively (AVX-512 BF16, AMX, Ampere or later), else fp32; the "
                        f"run prints which it picked (default {DEFAULT_PRECISION})")
    g.add_argument("--bf16", action="store_true", help="the same as --precision bf16")
    g.add_argument("--threads", type=non_negative_int, default=0,
                   help="CPU threads (0: one per core that is idle when the job starts, at least one; "
                        "OMP_NUM_THREADS, when set, decides instead; see threads.py) (default %(default)s)")
    g.add_argument("--seed", type=non_negative_int, default=d.seed,
                   help="random seed (data order, dropout, heads)")
    g.add_argument("--max-steps", type=non_negative_int, default=d.max_steps,
                   help="stop after this many optimizer steps (0: no limit); the schedule still spans "
                        "--epochs, so a stopped run continues exactly with --resume")
    g.add_argument("--checkpoint-every", type=non_negative_int, default=d.checkpoint_every,
                   help="also save the resumable state every N steps (0: at the end of each epoch only)")
    g.add_argument("--eval-first", action="store_true",
                   help="evaluate on the dev sets before the first step (the zero-shot baseline; epoch 0)")
    g.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    g.add_argument("--keep-checkpoints", action="store_true",
                   help="keep a finished run's resume checkpoints (about 0.5 GB for the embedded model; by "
                        "default they are deleted once training ends, best/ and every output stay)")
    g.add_argument("--use_gpu", "--use-gpu", dest="use_gpu", action="store_true",
                   help="train on CUDA (refused when no GPU is present)")


def attn_implementation_for(requested: str, device: str, precision: str) -> str:
    """--attn-implementation -> the kernel's name. "auto": "unpadded" for fp32 on a CPU, else "sdpa".

    Why (the main job's training steps, forward + backward + AdamW, on 2 idle CPU cores, MiniLM, its
    length-bucketed batches of 32): in fp32 the unpadded path took 486 ms a step against sdpa's 513;
    under bf16 sdpa took 285 ms against the unpadded path's 360 (its per-sentence attention pays for
    small bf16 kernels). On a GPU the unpadded path was never measured here, and its loop launches one
    attention kernel per sentence, so the GPU keeps sdpa's fused kernels.
    """
    if requested != "auto":
        return requested
    return "unpadded" if device == "cpu" and precision == "fp32" else "sdpa"


def device_from_args(args) -> str:
    """--use_gpu -> "cuda" (refused without a GPU) or "cpu", whose threads --threads then sets (and says)."""
    if args.use_gpu and not torch.cuda.is_available():
        raise SystemExit("error: --use_gpu given, but PyTorch sees no CUDA device")
    if args.use_gpu:
        return "cuda"
    args.threads, why = apply_threads(args.threads)
    print(f"threads: {args.threads} ({why})", file=sys.stderr)
    return "cpu"


def train_config_from_args(args, freeze_encoder: bool) -> TrainConfig:
    device = device_from_args(args)
    if args.bf16 and args.precision not in (None, "bf16"):
        raise SystemExit(f"error: --bf16 and --precision {args.precision} contradict each other")
    precision, why = resolve_precision("bf16" if args.bf16 else args.precision or DEFAULT_PRECISION, device)
    print(f"precision: {precision} ({why})", file=sys.stderr)
    args.precision, args.bf16 = precision, precision == "bf16"  # so the run's config.json records what ran
    if hasattr(args, "attn_implementation"):  # the jobs' --attn-implementation (job.add_job_arguments)
        args.attn_implementation = attn_implementation_for(args.attn_implementation, device, precision)
    try:
        return TrainConfig(
            epochs=args.epochs, lr=args.lr, head_lr=args.head_lr, batch_size=args.batch_size,
            weight_decay=args.weight_decay, schedule=args.schedule, warmup=args.warmup,
            max_grad_norm=args.max_grad_norm, layerwise_decay=args.layerwise_decay, sampling=args.sampling,
            bf16=args.bf16, freeze_encoder=freeze_encoder, seed=args.seed, max_steps=args.max_steps,
            checkpoint_every=args.checkpoint_every, eval_first=args.eval_first,
            keep_checkpoints=args.keep_checkpoints,
            device=device, task_weights=getattr(args, "task_weights", ()), ema=args.ema,
            average_last=args.average_last,
        )
    except ValueError as error:  # TrainConfig's checks name the flag
        raise SystemExit(f"error: {error}") from None
