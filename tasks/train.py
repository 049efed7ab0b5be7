"""The one training loop every job uses: batches from one or more tasks, AdamW, evaluation, checkpoints.

A job (multitask.py, sentiment.py, ...) builds a model and a list of tasks; each task knows how to make
its training batches for an epoch, compute a loss on one batch, and evaluate itself on its dev set.
This loop does the rest, the same way for every job:

- task sampling: "round-robin" takes one batch of every task per step and sums their losses (tasks that
  run out drop out); "proportional" takes one task per step, chosen with probability proportional to its
  remaining batches. Either way every training example is used exactly once per epoch.
- our AdamW with no decay on biases and LayerNorm, a separate (larger) learning rate for the freshly
  initialised heads, optional layer-wise learning-rate decay, warm-up then decay, global gradient
  clipping, optional bf16 autocast;
- evaluation on the dev sets after every epoch, the best checkpoint by the job's overall score;
- a run directory: config.json (the run's settings), metrics.jsonl (one JSON line per epoch),
  loss_and_dev.png, checkpoints/last.pt (everything needed to resume: model, optimizer, scheduler,
  position in the epoch, random state), and best/ (written by the job's `save_best`);
- under torchrun, data parallelism over the processes (distributed.py): each takes a slice of every
  batch, DDP averages the gradients, rank 0 evaluates and writes.

Read next: multitask.py.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence

import torch
from torch import nn
from tqdm.auto import tqdm

from minbert.atomic import atomic_path, atomic_write_text
from optim.adamw import AdamW
from optim.param_groups import make_param_groups, uses_weight_decay
from optim.schedules import SCHEDULES
from tasks import distributed

SAMPLINGS = ("round-robin", "proportional")


class Task(Protocol):
    """What the loop needs from a task. Batches are whatever the task's `loss` accepts."""

    name: str

    def train_batches(self, epoch: int) -> list[Any]:
        """This epoch's training batches, in order (deterministic given the task's seed and `epoch`)."""

    def loss(self, model: nn.Module, batch: Any) -> torch.Tensor:
        """A scalar loss for one batch."""

    def evaluate(self, model: nn.Module) -> dict[str, float]:
        """Dev-set metrics, computed with the model in eval mode."""


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
    device: str = "cpu"

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
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)


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


# ----- schedule of batches --------------------------------------------------------------------------


def interleave(task_batches: dict[str, list[Any]], sampling: str, seed: int,
               epoch: int) -> list[list[tuple[str, Any]]]:
    """The epoch's steps: each step is a list of (task name, batch) whose losses are summed."""
    queues = {name: list(batches) for name, batches in task_batches.items() if batches}
    steps = []
    if sampling == "round-robin":
        while queues:
            steps.append([(name, queue.pop(0)) for name, queue in queues.items()])
            queues = {name: queue for name, queue in queues.items() if queue}
        return steps
    rng = random.Random(f"interleave-{seed}-{epoch}")
    while queues:
        names = list(queues)
        name = rng.choices(names, weights=[len(queues[n]) for n in names])[0]
        steps.append([(name, queues[name].pop(0))])
        if not queues[name]:
            del queues[name]
    return steps


# ----- optimizer ------------------------------------------------------------------------------------


def build_optimizer(model: nn.Module, config: TrainConfig) -> AdamW:
    """AdamW over the model: the encoder (`model.bert`) at `lr` with optional layer-wise decay, the heads
    at `head_lr`; biases and LayerNorm weights never decay. Frozen parameters get no gradient, and our
    AdamW skips them."""
    groups = make_param_groups(model.bert, lr=config.lr, weight_decay=config.weight_decay,
                               layer_decay=config.layerwise_decay)
    heads = [(name, p) for name, p in model.named_parameters() if not name.startswith("bert.")]
    for decay in (True, False):
        chosen = [(n, p) for n, p in heads if uses_weight_decay(n) == decay]
        if chosen:
            groups.append({"params": [p for _, p in chosen], "param_names": [n for n, _ in chosen],
                           "lr": config.head_lr, "weight_decay": config.weight_decay if decay else 0.0})
    return AdamW(groups, lr=config.lr, weight_decay=config.weight_decay)


def make_schedule(optimizer: torch.optim.Optimizer, config: TrainConfig, total_steps: int,
                  steps_per_epoch: int):
    """The --schedule's LambdaLR; --warmup is its warm-up fraction (slanted triangular: cut_frac)."""
    warmup_steps = int(config.warmup * total_steps)
    if config.schedule in ("linear", "cosine"):
        return SCHEDULES[config.schedule](optimizer, warmup_steps, total_steps)
    if config.schedule == "constant":
        return SCHEDULES["constant"](optimizer, warmup_steps)
    if config.schedule == "slanted_triangular":
        return SCHEDULES["slanted_triangular"](optimizer, total_steps, cut_frac=config.warmup or 0.1)
    return SCHEDULES["exponential"](optimizer, steps_per_epoch=steps_per_epoch)  # CS224N reports: gamma 0.96


def freeze(module: nn.Module) -> None:
    """The course's `--option pretrain`: the encoder's weights stay as loaded, only heads learn."""
    for param in module.parameters():
        param.requires_grad_(False)


# ----- run directory --------------------------------------------------------------------------------


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

    def write_config(self, settings: dict) -> None:
        if distributed.process_rank() != 0:  # under torchrun, rank 0 writes
            return
        atomic_write_text(self.path / "config.json",
                          json.dumps(settings, indent=2, sort_keys=True, default=str) + "\n")

    def append_metrics(self, record: dict) -> None:
        lines = self.metrics.read_text(encoding="utf-8") if self.metrics.exists() else ""
        atomic_write_text(self.metrics, lines + json.dumps(record, sort_keys=True) + "\n")

    def rewrite_metrics(self, history: list[dict]) -> None:
        atomic_write_text(self.metrics, "".join(json.dumps(r, sort_keys=True) + "\n" for r in history))


def save_training_state(path: Path, model: nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any,
                        state: TrainState,
                        world: distributed.Distributed = distributed.Distributed()) -> None:
    """Everything needed to continue exactly: weights, optimizer moments, schedule, position, RNG.

    Distributed, the processes hold the same weights and optimizer state: rank 0 writes for all.
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
    previous = path.with_suffix(".prev.pt")
    if path.exists():  # keep the last good one until the new one is completely on disk
        path.replace(previous)
    with atomic_path(path) as tmp:
        torch.save(payload, tmp)


def load_training_state(path: Path, model: nn.Module, optimizer: torch.optim.Optimizer,
                        scheduler: Any) -> TrainState:
    """Restore what `save_training_state` wrote; a corrupt file falls back to the previous one."""
    candidates = [path, path.with_suffix(".prev.pt")]
    errors = []
    for candidate in candidates:
        if not candidate.exists():
            continue
        try:
            payload = torch.load(candidate, map_location="cpu", weights_only=False)
            model.load_state_dict(payload["model"])
            optimizer.load_state_dict(payload["optimizer"])
            scheduler.load_state_dict(payload["scheduler"])
        except Exception as error:  # noqa: BLE001 - any unreadable checkpoint is reported, then skipped
            errors.append(f"{candidate}: {error}")
            print(f"warning: checkpoint {candidate} is unreadable ({error}); trying the previous one",
                  file=sys.stderr)
            continue
        torch.set_rng_state(payload["torch_rng"])
        random.setstate(payload["python_rng"])
        print(f"resuming from {candidate}", file=sys.stderr)
        return TrainState(**payload["train_state"])
    if errors:
        raise SystemExit("error: no usable checkpoint to resume from:\n  " + "\n  ".join(errors))
    raise SystemExit(f"error: --resume given, but there is no checkpoint at {path}")


# ----- the loop -------------------------------------------------------------------------------------


def train(
    model: nn.Module,
    tasks: Sequence[Task],
    config: TrainConfig,
    run: RunDir,
    overall_score: Callable[[dict[str, dict[str, float]]], float],
    save_best: Callable[[nn.Module, Path], None],
    resume: bool = False,
) -> TrainState:
    """Train `model` on `tasks`; returns the final state (history of dev metrics, best epoch)."""
    world = distributed.setup(config.device)
    device = distributed.device_for(config.device, world)
    model.to(device)
    by_name = {t.name: t for t in tasks}
    task_loss = distributed.wrap(distributed.TaskLosses(model, by_name), world, device)
    optimizer = build_optimizer(model, config)
    steps_per_epoch = len(interleave({t.name: t.train_batches(0) for t in tasks}, config.sampling,
                                     config.seed, 0))
    total_steps = steps_per_epoch * config.epochs  # --max-steps stops early but never reshapes the schedule
    scheduler = make_schedule(optimizer, config, total_steps, steps_per_epoch)
    state = TrainState()
    last = run.checkpoints / "last.pt"
    if resume:
        state = load_training_state(last, model, optimizer, scheduler)
    trainable = [p for p in model.parameters() if p.requires_grad]
    untrainable: set[str] = set()
    started = time.perf_counter()

    if config.eval_first and state.global_step == 0 and not state.history:
        record = evaluate_and_record(model, tasks, overall_score, state, run, started, {}, epoch=0,
                                     epoch_complete=True, world=world)
        if world.is_main:
            print(f"before training: overall {record['overall']:.4f}", file=sys.stderr)

    while state.epoch < config.epochs:
        steps = interleave({t.name: t.train_batches(state.epoch) for t in tasks}, config.sampling,
                           config.seed, state.epoch)
        if state.step_in_epoch == 0 or not state.epoch_losses:  # a resumed epoch keeps its steps' losses
            state.epoch_losses = {t.name: [] for t in tasks}
        losses: dict[str, list[float]] = state.epoch_losses
        model.train()
        bar = tqdm(total=len(steps), initial=state.step_in_epoch,
                   desc=f"epoch {state.epoch + 1}/{config.epochs}",
                   file=sys.stderr, dynamic_ncols=True, disable=None if world.is_main else True)
        for step in steps[state.step_in_epoch:]:
            if _done(state, config):
                break
            optimizer.zero_grad(set_to_none=True)
            total = 0.0
            for name, batch in step:
                rows, weight = distributed.shard(batch, world)  # all rows and weight 1 in one process
                with torch.autocast(device.type, dtype=torch.bfloat16, enabled=config.bf16):
                    loss = task_loss(name, rows) * weight
                if not torch.isfinite(loss):
                    raise FloatingPointError(
                        f"the {name} loss became {loss.item()} at step {state.global_step + 1} (epoch "
                        f"{state.epoch + 1}); the last good checkpoint is {last}")
                if loss.requires_grad:
                    loss.backward()
                elif name not in untrainable:  # e.g. a parameter-free cosine head on a frozen encoder
                    untrainable.add(name)
                    print(f"note: the {name} loss reaches no trainable parameter (frozen encoder, "
                          "parameter-free head); it is reported but trains nothing", file=sys.stderr)
                losses[name].append(loss.item() / world.world_size)  # summed over processes below
                total += loss.item()
            if config.max_grad_norm > 0:
                torch.nn.utils.clip_grad_norm_(trainable, config.max_grad_norm)
            optimizer.step()
            scheduler.step()
            state.step_in_epoch += 1
            state.global_step += 1
            bar.update(1)
            bar.set_postfix(loss=f"{total:.3f}", lr=f"{scheduler.get_last_lr()[0]:.2e}")
            if config.checkpoint_every and state.global_step % config.checkpoint_every == 0:
                save_training_state(last, model, optimizer, scheduler, state, world)
        bar.close()

        losses = {name: distributed.sum_across(values, world) for name, values in losses.items()}
        record = evaluate_and_record(model, tasks, overall_score, state, run, started, losses,
                                     epoch=state.epoch + 1, epoch_complete=state.step_in_epoch == len(steps),
                                     world=world)
        if record["overall"] > state.best_score:
            state.best_score, state.best_epoch = record["overall"], record["epoch"]
            if world.is_main:
                save_best(model, run.best)
            record["best"] = True
            if world.is_main:
                run.rewrite_metrics(state.history)
        if world.is_main:
            print(f"epoch {record['epoch']}: overall {record['overall']:.4f} " + " ".join(
                f"{task}.{metric}={value:.4f}" for task, metrics in record["dev"].items()
                for metric, value in metrics.items()) + (" (best so far, saved)" if record["best"] else ""),
                file=sys.stderr)
        if state.step_in_epoch == len(steps):  # a finished epoch; a --max-steps stop resumes mid-epoch
            state.epoch += 1
            state.step_in_epoch = 0
        save_training_state(last, model, optimizer, scheduler, state, world)
        if world.is_main:
            plot_history(state.history, run.plot)
        if _done(state, config):
            break
    distributed.barrier(world)  # rank 0's last files are written before any process moves on
    return state


def evaluate_and_record(model: nn.Module, tasks: Sequence[Task], overall_score: Callable, state: TrainState,
                        run: RunDir, started: float, losses: dict[str, list[float]], epoch: int,
                        epoch_complete: bool,
                        world: distributed.Distributed = distributed.Distributed()) -> dict:
    """Dev metrics of every task, appended to the history and to metrics.jsonl.

    Distributed, rank 0 evaluates and writes, and every process gets its record (the same history everywhere).
    """
    record = None
    if world.is_main:
        model.eval()
        with torch.no_grad():
            dev = {t.name: t.evaluate(model) for t in tasks}
        record = {"epoch": epoch, "global_step": state.global_step, "epoch_complete": epoch_complete,
                  "train_loss": {t.name: (sum(losses[t.name]) / len(losses[t.name])
                                          if losses.get(t.name) else None)
                                 for t in tasks},
                  "dev": dev, "overall": overall_score(dev), "best": False,
                  "elapsed_s": round(time.perf_counter() - started, 1)}
        run.append_metrics(record)
    record = distributed.broadcast(record, world)
    state.history.append(record)
    return record


def _done(state: TrainState, config: TrainConfig) -> bool:
    return bool(config.max_steps) and state.global_step >= config.max_steps


def plot_history(history: list[dict], path: Path) -> None:
    """Training loss and every dev metric per epoch, one panel each, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")  # no screen needed
    import matplotlib.pyplot as plt

    epochs = [r["epoch"] for r in history]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for task in history[0]["train_loss"]:
        left.plot(epochs, [r["train_loss"][task] for r in history], marker="o", label=task)
    left.set(title="training loss (epoch mean)", xlabel="epoch", ylabel="loss")
    left.legend()
    for task in history[0]["dev"]:
        for metric in history[0]["dev"][task]:
            right.plot(epochs, [r["dev"][task][metric] for r in history], marker="o",
                       label=f"{task} {metric}")
    right.plot(epochs, [r["overall"] for r in history], marker="s", color="black", label="overall")
    right.set(title="dev metrics", xlabel="epoch")
    right.legend(fontsize="small")
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    plt.close(fig)


def add_train_arguments(parser, head_lr_help: str = "peak learning rate of the freshly initialised "
                                                    "task heads") -> None:
    """The loop's flags, shared by every job (the course's names kept: --batch_size, --lr, --epochs...)."""
    d = TrainConfig()
    g = parser.add_argument_group("training")
    g.add_argument("--epochs", type=int, default=d.epochs,
                   help="passes over the training data (default %(default)s)")
    g.add_argument("--lr", type=float, default=d.lr, help="peak learning rate of the encoder")
    g.add_argument("--head-lr", type=float, default=d.head_lr, help=head_lr_help)
    g.add_argument("--batch_size", "--batch-size", dest="batch_size", type=int, default=d.batch_size,
                   help="examples per batch (per task, per step)")
    g.add_argument("--weight-decay", type=float, default=d.weight_decay,
                   help="AdamW's decoupled weight decay (never on biases and LayerNorm)")
    g.add_argument("--schedule", choices=sorted(SCHEDULES), default=d.schedule, help="learning-rate schedule")
    g.add_argument("--warmup", type=float, default=d.warmup,
                   help="warm-up length as a fraction of all training steps")
    g.add_argument("--max-grad-norm", type=float, default=d.max_grad_norm,
                   help="clip the global gradient norm to this (0: no clipping)")
    g.add_argument("--layerwise-decay", type=float, default=d.layerwise_decay,
                   help="layer-wise lr decay xi (Sun et al. 2019): layer k-1 gets xi times layer k's rate")
    g.add_argument("--sampling", choices=SAMPLINGS, default=d.sampling,
                   help="round-robin: one batch of every task per step, losses summed; proportional: one "
                        "task per step, chosen in proportion to its remaining batches (default %(default)s)")
    g.add_argument("--bf16", action="store_true", help="bfloat16 autocast for forward and loss")
    g.add_argument("--seed", type=int, default=d.seed, help="random seed (data order, dropout, heads)")
    g.add_argument("--max-steps", type=int, default=d.max_steps,
                   help="stop after this many optimizer steps (0: no limit); the schedule still spans "
                        "--epochs, so a stopped run continues exactly with --resume")
    g.add_argument("--checkpoint-every", type=int, default=d.checkpoint_every,
                   help="also save the resumable state every N steps (0: at the end of each epoch only)")
    g.add_argument("--eval-first", action="store_true",
                   help="evaluate on the dev sets before the first step (the zero-shot baseline; epoch 0)")
    g.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    g.add_argument("--use_gpu", "--use-gpu", dest="use_gpu", action="store_true",
                   help="train on CUDA (refused when no GPU is present)")


def train_config_from_args(args, freeze_encoder: bool) -> TrainConfig:
    if args.use_gpu and not torch.cuda.is_available():
        raise SystemExit("error: --use_gpu given, but PyTorch sees no CUDA device")
    try:
        return TrainConfig(
            epochs=args.epochs, lr=args.lr, head_lr=args.head_lr, batch_size=args.batch_size,
            weight_decay=args.weight_decay, schedule=args.schedule, warmup=args.warmup,
            max_grad_norm=args.max_grad_norm, layerwise_decay=args.layerwise_decay, sampling=args.sampling,
            bf16=args.bf16, freeze_encoder=freeze_encoder, seed=args.seed, max_steps=args.max_steps,
            checkpoint_every=args.checkpoint_every, eval_first=args.eval_first,
            device="cuda" if args.use_gpu else "cpu",
        )
    except ValueError as error:  # TrainConfig's checks name the flag
        raise SystemExit(f"error: {error}") from None
