"""The one training loop every job uses: batches from one or more tasks, AdamW, evaluation, checkpoints.

A job (multitask.py, sentiment.py, ...) builds a model and a list of tasks; each task knows how to make
its training batches for an epoch, compute a loss on one batch, and evaluate itself on its dev set.
This loop does the rest, the same way for every job:

- task sampling: "round-robin" takes one batch of every task per step and sums their losses (tasks that
  run out drop out); "proportional" takes one task per step, chosen with probability proportional to its
  remaining batches. Either way every training example is used exactly once per epoch.
- our AdamW with no decay on biases and LayerNorm, a separate (larger) learning rate for the freshly
  initialised heads, optional layer-wise learning-rate decay, warm-up then decay (optimizer.py), global
  gradient clipping, optional bf16 autocast or fp16 autocast with a dynamic loss scale (below), optional task
  loss weights (a task's `weight`); the settings are settings.py's TrainingSettings;
- fp16 (`--precision fp16`): float16's 5-bit exponent underflows small gradients, so the loss is multiplied by
  a scale before backward (torch.amp.GradScaler, PyTorch's AMP recipe): the gradients are unscaled before
  clipping; a step whose gradients hold an inf or NaN is skipped and the scale halves; after 2000 good steps
  it doubles. As in that recipe the schedule advances on a skipped step too, so --max-steps and the
  schedule's length stay what they are. The scale is part of the resumable checkpoint;
- evaluation on the dev sets after every epoch, the best checkpoint by the job's overall score;
- a run directory (run_folder.py): settings, metrics per epoch, a plot (plot.py), a resumable checkpoint
  (checkpoints.py), best/ (best.py);
- Ctrl-C or SIGTERM: the run stops at the next step boundary, saved, and says how to continue
  (signals.py);
- progress: tqdm's bar on a terminal; elsewhere (nohup, CI, a cluster's batch system) a plain line every
  30 seconds, `epoch 1/3 step 120/912 (13%) loss 1.2345 38.2 examples/s ETA 5m48s`;
- under torchrun, data parallelism over the processes (distributed.py): each takes a slice of every
  batch, DDP averages the gradients, rank 0 evaluates and writes.

Read next: ../multitask.py (the main job, built on this loop).
"""

from __future__ import annotations

import random
import signal
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence, TextIO

import torch
from torch import nn
from tqdm.auto import tqdm

from minbert.loading.atomic import atomic_directory, record_checksums
from tasks.training.best import check_best_on_resume
from tasks.training.checkpoints import TrainState, load_training_state, save_training_state
from optim.schedules import SCHEDULES
from tasks.training.plot import plot_history
from tasks.training.run_folder import ResumeRefused, RunDir
from tasks.training.signals import Interrupted, signals_deferred, stop_requested
from tasks.training.settings import TrainingSettings
from tasks.training.world import TaskLosses, World, batch_rows, under_torchrun


class Task(Protocol):
    """What the loop needs from a task. Batches are whatever the task's `loss` accepts."""

    name: str
    # optional: `weight`, how many times the task's loss counts in the gradient (1 where absent)

    def train_batches(self, epoch: int) -> list[Any]:
        """This epoch's training batches, in order (deterministic given the task's seed and `epoch`)."""

    def loss(self, model: nn.Module, batch: Any) -> torch.Tensor:
        """A scalar loss for one batch."""

    def evaluate(self, model: nn.Module) -> dict[str, float]:
        """Dev-set metrics, computed with the model in eval mode."""


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


# ----- the loop -------------------------------------------------------------------------------------


def train(
    model: nn.Module,
    tasks: Sequence[Task],
    optimizer: torch.optim.Optimizer,
    training: TrainingSettings,
    run: RunDir,
    overall_score: Callable[[dict[str, dict[str, float]]], float],
    save_best: Callable[[nn.Module, Path], None],
    resume: bool = False,
) -> TrainState:
    """Train `model` on `tasks` with `optimizer` (job.py's build_optimizer); returns the final state (history
    of dev metrics, best epoch)."""
    world = join_world(training.device)
    device = world.device_for(training.device)
    model.to(device)
    by_name = {t.name: t for t in tasks}
    task_loss = world.wrap(TaskLosses(model, by_name), device)

    def epoch_steps(epoch: int) -> list[list[tuple[str, Any]]]:
        return interleave({t.name: t.train_batches(epoch) for t in tasks}, training.sampling, training.seed,
                          epoch)

    built = {0: epoch_steps(0)}  # epoch 1's steps, built once: counted for the schedule, trained on below
    steps_per_epoch = len(built[0])
    total_steps = steps_per_epoch * training.epochs  # --max-steps stops early but never reshapes the schedule
    scheduler = make_schedule(optimizer, training, total_steps, steps_per_epoch)
    trainable = [p for p in model.parameters() if p.requires_grad]
    scaler = torch.amp.GradScaler(device.type, enabled=training.precision == "fp16")  # a no-op when disabled
    autocast = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(training.precision)  # None: fp32
    state = TrainState()
    last = run.checkpoints / "last.pt"
    good = None  # the checkpoint known whole: saved by this run, or read whole by --resume
    if steps_per_epoch == 0:
        raise SystemExit("error: an epoch has no training step (no task has a training batch): nothing to "
                         "train")
    if resume:
        state, good = load_training_state(last, model, optimizer, scheduler, scaler)
        check_best_on_resume(run.best, state)
        check_progress_possible(state, training, steps_per_epoch, last)
    task_weight = {t.name: getattr(t, "weight", 1.0) for t in tasks}  # the logged losses stay unweighted
    untrainable: set[str] = set()
    started = time.perf_counter()

    def save() -> None:
        nonlocal good
        save_training_state(last, model, optimizer, scheduler, state, world, scaler,
                            keep=good.name if good else None)  # kept as last.prev.pt
        good = last

    def where() -> str:
        return f"at step {state.global_step} of {total_steps}"

    # A first Ctrl-C or SIGTERM stops the run at the next step boundary (or when the evaluation in
    # progress ends), saved; a second one stops it at once (signals.py).
    with signals_deferred():
        if training.eval_first and state.global_step == 0 and not state.history:
            record = evaluate_and_record(model, tasks, overall_score, state, run, started, {}, epoch=0,
                                         epoch_complete=True, world=world)
            if world.is_main:
                print(f"before training: overall {record['overall']:.4f}", file=sys.stderr)
            _stop_if_asked(world, where(), save)

        while state.epoch < training.epochs:
            position = (state.epoch, state.global_step)
            steps = built.pop(state.epoch, None) or epoch_steps(state.epoch)
            built.clear()  # resumed past epoch 1, the run trains no more on the steps counted above
            if state.step_in_epoch == 0 or not state.epoch_losses:  # a resumed epoch keeps its steps' losses
                state.epoch_losses = {t.name: [] for t in tasks}
            losses: dict[str, list[float]] = state.epoch_losses
            model.train()
            desc = f"epoch {state.epoch + 1}/{training.epochs}"
            bar = tqdm(total=len(steps), initial=state.step_in_epoch, desc=desc,
                       file=sys.stderr, dynamic_ncols=True, disable=None if world.is_main else True)
            # Where tqdm draws nothing (stderr is not a terminal), plain lines say the same every 30 s.
            lines = ProgressLines(len(steps), desc, enabled=world.is_main and bar.disable,
                                  initial=state.step_in_epoch)
            epoch_started = time.perf_counter()
            for step in steps[state.step_in_epoch:]:
                if _done(state, training):
                    break
                optimizer.zero_grad(set_to_none=True)
                total = 0.0
                examples = 0
                for name, batch in step:
                    examples += batch_rows(batch)
                    rows, weight = world.shard(batch)  # all rows and weight 1 in one process
                    with torch.autocast(device.type, dtype=autocast, enabled=autocast is not None):
                        loss = task_loss(name, rows) * weight
                    if not torch.isfinite(loss):
                        raise FloatingPointError(
                            f"the {name} loss became {loss.item()} at step {state.global_step + 1} (epoch "
                            f"{state.epoch + 1}); " + (f"the last good checkpoint is {good}" if good
                                                       else "no checkpoint was saved before it"))
                    if loss.requires_grad:
                        scaler.scale(loss * task_weight.get(name, 1.0)).backward()
                    elif name not in untrainable:  # e.g. a parameter-free cosine head on a frozen encoder
                        untrainable.add(name)
                        print(f"note: the {name} loss reaches no trainable parameter (frozen encoder, "
                              "parameter-free head); it is reported but trains nothing", file=sys.stderr)
                    losses[name].append(loss.item() / world.world_size)  # summed over processes below
                    total += loss.item()
                if training.max_grad_norm > 0:
                    scaler.unscale_(optimizer)  # clipping sees the true gradients
                    torch.nn.utils.clip_grad_norm_(trainable, training.max_grad_norm)
                scaler.step(optimizer)  # optimizer.step(), unless fp16's gradients hold an inf or NaN
                scaler.update()
                with warnings.catch_warnings():  # a skipped first fp16 step is not the misordering it names
                    warnings.filterwarnings("ignore", r"Detected call of `lr_scheduler\.step\(\)`")
                    scheduler.step()
                state.step_in_epoch += 1
                state.global_step += 1
                bar.update(1)
                bar.set_postfix(loss=f"{total:.3f}", lr=f"{scheduler.get_last_lr()[0]:.2e}")
                lines.update(examples, total)
                saved = bool(training.checkpoint_every) and state.global_step % training.checkpoint_every == 0
                if saved:
                    save()
                _stop_if_asked(world, where(), None if saved else save, bar)
            bar.close()
            train_s = time.perf_counter() - epoch_started  # steps and --checkpoint-every saves, no evaluation

            losses = {name: world.sum_across(values) for name, values in losses.items()}
            place_step_losses(state, steps, losses)
            record = evaluate_and_record(model, tasks, overall_score, state, run, started, losses,
                                         epoch=state.epoch + 1,
                                         epoch_complete=state.step_in_epoch == len(steps), world=world,
                                         train_s=train_s)
            if record["overall"] > state.best_score:
                state.best_score, state.best_epoch = record["overall"], record["epoch"]
                if world.is_main:  # written whole beside the old best/, then swapped in, with checksums
                    with atomic_directory(run.best, keep_others=False) as new_best:
                        save_best(model, new_best)
                        record_checksums(new_best)
                record["best"] = True
                if world.is_main:
                    run.rewrite_metrics(state.history)
            if world.is_main:
                print(f"epoch {record['epoch']}: overall {record['overall']:.4f} " + " ".join(
                    f"{task}.{metric}={value:.4f}" for task, metrics in record["dev"].items()
                    for metric, value in metrics.items())
                    + (" (best so far, saved)" if record["best"] else ""), file=sys.stderr)
            if state.step_in_epoch == len(steps):  # a finished epoch; a --max-steps stop resumes mid-epoch
                state.epoch += 1
                state.step_in_epoch = 0
            save()
            if world.is_main:
                plot_history(state.history, run.plot, state.step_losses)
            _stop_if_asked(world, where(), None)  # saved just above
            if _done(state, training):
                break
            if (state.epoch, state.global_step) == position:  # would evaluate the same epoch forever
                raise SystemExit(f"error: epoch {state.epoch + 1} made no progress (step "
                                 f"{state.step_in_epoch} of {len(steps)}); {last} is as it ended")
    run.training_finished = state.epoch >= training.epochs  # claim_run then marks the run finished
    world.barrier()  # rank 0's last files are written before any process moves on
    return state


def make_schedule(optimizer: torch.optim.Optimizer, training: TrainingSettings, total_steps: int,
                  steps_per_epoch: int):
    """The --schedule's LambdaLR (optim/schedules.py), stepped once per optimizer step; --warmup is its
    warm-up fraction (slanted triangular: cut_frac)."""
    warmup_steps = int(training.warmup * total_steps)
    if training.schedule in ("linear", "cosine"):
        return SCHEDULES[training.schedule](optimizer, warmup_steps, total_steps)
    if training.schedule == "constant":
        return SCHEDULES["constant"](optimizer, warmup_steps)
    if training.schedule == "slanted_triangular":
        return SCHEDULES["slanted_triangular"](optimizer, total_steps, cut_frac=training.warmup or 0.1)
    return SCHEDULES["exponential"](optimizer, steps_per_epoch=steps_per_epoch)  # CS224N reports: gamma 0.96


def join_world(device: str) -> World:
    """This process alone, or under torchrun its place among the others (distributed.py, loaded only then)."""
    if not under_torchrun():
        return World()
    from tasks.training import distributed  # DDP and the process group: only under torchrun
    return distributed.setup(device)


def evaluate_and_record(model: nn.Module, tasks: Sequence[Task], overall_score: Callable, state: TrainState,
                        run: RunDir, started: float, losses: dict[str, list[float]], epoch: int,
                        epoch_complete: bool, world: World = World(),
                        train_s: float | None = None) -> dict:
    """Dev metrics of every task, appended to the history, which metrics.jsonl then holds.

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
                  "elapsed_s": round(time.perf_counter() - started, 1),
                  # this epoch's training time alone (a resumed epoch: since the resume); None before training
                  "train_s": None if train_s is None else round(train_s, 1)}
    record = world.broadcast(record)
    state.history.append(record)
    if world.is_main:  # the whole history: a run resumed from an older checkpoint lists no epoch twice
        run.rewrite_metrics(state.history)
    return record


def place_step_losses(state: TrainState, steps: list, losses: dict[str, list[float]]) -> None:
    """This epoch's step losses (each task's, summed over processes) at their place on the epoch axis, epoch
    e's steps spread over (e - 1, e], into `state.step_losses` for the plot; they replace what an earlier
    part of the same epoch (a --max-steps stop) put there."""
    places: dict[str, list[float]] = {name: [] for name in losses}
    for i, step in enumerate(steps[:state.step_in_epoch]):
        for name, _ in step:
            places.setdefault(name, []).append(state.epoch + (i + 1) / len(steps))
    for name, values in losses.items():
        before = [point for point in state.step_losses.get(name, []) if point[0] <= state.epoch]
        here = places[name][len(places[name]) - len(values):]  # a resume without them keeps the last ones
        state.step_losses[name] = before + [[x, loss] for x, loss in zip(here, values)]


def _stop_if_asked(world: World, where: str, save: Callable[[], None] | None,
                   bar: Any = None) -> None:
    """After a first Ctrl-C or SIGTERM (signals.py): save the run (`save`; None when it was just saved) and
    stop with Interrupted, which the job turns into one line saying how to continue."""
    signum = stop_requested()
    if world.enabled:  # DDP needs every process in every step: all stop where any one was asked to
        asked = world.sum_across([1.0 if signum else 0.0])[0] > 0
        signum = signum or (signal.SIGTERM if asked else None)
    if not signum:
        return
    if bar is not None:
        bar.close()
    if save is not None:
        save()
    raise Interrupted(signum, where)


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


def _done(state: TrainState, training: TrainingSettings) -> bool:
    return bool(training.max_steps) and state.global_step >= training.max_steps


# ----- progress lines where no bar is drawn -------------------------------------------------------


def format_duration(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{seconds:02d}s"


class ProgressLines:
    """The progress bar's facts as one line every `every_s` seconds; silent when `enabled` is False."""

    def __init__(self, total: int, desc: str, enabled: bool, every_s: float = 30.0, initial: int = 0,
                 file: TextIO | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.total, self.desc, self.enabled, self.every_s = total, desc, enabled, every_s
        self.initial = self.step = initial  # a resumed epoch starts part-way
        self.examples = 0
        self.file = file
        self.clock = clock
        self.started = self.last_printed = clock()

    def update(self, examples: int, loss: float) -> None:
        """One more step of `examples` examples with this loss; print if it is time."""
        self.step += 1
        self.examples += examples
        now = self.clock()
        if not self.enabled or (now - self.last_printed < self.every_s and self.step < self.total):
            return
        self.last_printed = now
        elapsed = max(now - self.started, 1e-9)
        steps_done = self.step - self.initial
        eta = (self.total - self.step) * elapsed / steps_done
        print(f"{self.desc} step {self.step}/{self.total} ({100 * self.step / max(self.total, 1):.0f}%) "
              f"loss {loss:.4f} {self.examples / elapsed:.1f} examples/s ETA {format_duration(eta)}",
              file=self.file or sys.stderr, flush=True)
