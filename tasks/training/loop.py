"""The one training loop every job uses: a batch, its loss, backward, the optimizer's step; the rest hangs
off it.

A job gives a model, its optimizer's builder (job.py) and a list of tasks (`Task`). Each epoch's steps are
drawn once (`interleave`), and each step is `step`, nanoGPT's dozen lines: autocast, the loss times the
task's weight, `scaler.scale(loss).backward()`, unscale, clip, `scaler.step`, `update`, the schedule. fp16's
dynamic loss scale (torch.amp.GradScaler) is a no-op in bf16 and fp32: an fp16 step whose gradients hold an
inf or NaN is skipped and the scale halves, and the schedule advances all the same.

Around the step, each a named neighbour: the progress (`Progress`), the resumable state (checkpoints.py:
after every epoch, and every --checkpoint-every steps), Ctrl-C and SIGTERM (process.py), the evaluation
after each epoch (`evaluate_and_record`: metrics.jsonl), best/ and the picture (`plot_history`).

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

from minbert.loading.atomic import atomic_write
from optim.schedules import SCHEDULES
from tasks.training.checkpoints import (TrainState, check_best_on_resume, check_progress_possible,
                                        load_training_state, save_training_state, write_best)
from tasks.training.process import (Interrupted, TaskLosses, World, batch_rows, join_world, signals_deferred,
                                    stop_requested)
from tasks.training.run_folder import RunDir
from tasks.training.settings import TrainingSettings


class Task(Protocol):
    """What the loop needs from a task; a batch is whatever its `loss` takes; an optional `weight` says how
    many times its loss counts in the gradient (1 where absent)."""

    name: str

    def train_batches(self, epoch: int) -> list[Any]:  # in order, the same for the same seed and epoch
        ...

    def loss(self, model: nn.Module, batch: Any) -> torch.Tensor:  # a scalar
        ...

    def evaluate(self, model: nn.Module) -> dict[str, float]:  # dev metrics, the model in eval mode
        ...


def train(model: nn.Module, tasks: Sequence[Task],
          make_optimizer: Callable[[nn.Module], torch.optim.Optimizer], training: TrainingSettings,
          run: RunDir, overall_score: Callable[[dict[str, dict]], float],
          save_best: Callable[[nn.Module, Path], None], resume: bool = False) -> TrainState:
    """Train `model` on `tasks` with the optimizer `make_optimizer` builds (job.py's build_optimizer) in
    `run`'s folder; returns the final state (the history of dev metrics, the best epoch)."""
    world = join_world(training.device)
    device = world.device_for(training.device)
    model.to(device)
    task_loss = world.wrap(TaskLosses(model, {t.name: t for t in tasks}), device)  # DDP wraps it
    weights = {t.name: getattr(t, "weight", 1.0) for t in tasks}  # the logged losses stay unweighted
    trainable = [p for p in model.parameters() if p.requires_grad]

    def epoch_steps(epoch: int) -> list[list[tuple[str, Any]]]:
        return interleave({t.name: t.train_batches(epoch) for t in tasks}, training.sampling, training.seed,
                          epoch)

    built = {0: epoch_steps(0)}  # epoch 1's steps, built once: counted for the schedule, trained on below
    steps_per_epoch = len(built[0])
    total_steps = steps_per_epoch * training.epochs  # --max-steps stops early but never reshapes the schedule
    if steps_per_epoch == 0:
        raise SystemExit("error: no task has a training batch: an epoch has no step, nothing to train")
    optimizer = scheduler = None  # built by build_once

    def build_once() -> None:
        """After the first backward (a resumed run: before loading them), the same numbers (building draws
        no randomness): an untouched handout stops at the first TODO of the reading order, in the model."""
        nonlocal optimizer, scheduler
        if optimizer is None:
            optimizer = make_optimizer(model)
            scheduler = make_schedule(optimizer, training, total_steps, steps_per_epoch)

    scaler = torch.amp.GradScaler(device.type, enabled=training.precision == "fp16")  # a no-op when disabled
    autocast = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(training.precision)  # None: fp32
    state, last, good = TrainState(), run.checkpoints / "last.pt", None  # good: the checkpoint known whole
    if resume:
        build_once()
        state, good = load_training_state(last, model, optimizer, scheduler, scaler)
        check_best_on_resume(run.best, state)
        check_progress_possible(state, training, steps_per_epoch, last)
    untrainable: set[str] = set()

    def step(batches: list[tuple[str, Any]], losses: dict[str, list[float]]) -> float:
        """One optimizer step on the (task, batch) pairs of `batches`; returns their summed loss."""
        model.zero_grad(set_to_none=True)  # the optimizer's parameters are the model's
        total = 0.0
        for name, batch in batches:
            rows, weight = world.shard(batch)  # all rows and weight 1 in one process
            with torch.autocast(device.type, dtype=autocast, enabled=autocast is not None):
                loss = task_loss(name, rows) * weight
            if not torch.isfinite(loss):
                kept = f"the last good checkpoint is {good}" if good else "no checkpoint was saved before it"
                raise FloatingPointError(f"the {name} loss became {loss.item()} at step "
                                         f"{state.global_step + 1} (epoch {state.epoch + 1}); {kept}")
            if loss.requires_grad:
                scaler.scale(loss * weights[name]).backward()
            elif name not in untrainable:  # e.g. a parameter-free cosine head on a frozen encoder
                untrainable.add(name)
                print(f"note: the {name} loss reaches no trainable parameter (frozen encoder, parameter-free "
                      "head); it is reported but trains nothing", file=sys.stderr)
            losses[name].append(loss.item() / world.world_size)  # summed over processes after the epoch
            total += loss.item()
        build_once()
        if training.max_grad_norm > 0:
            scaler.unscale_(optimizer)  # clipping sees the true gradients
            torch.nn.utils.clip_grad_norm_(trainable, training.max_grad_norm)
        scaler.step(optimizer)  # optimizer.step(), unless fp16's gradients hold an inf or NaN
        scaler.update()
        with warnings.catch_warnings():  # a skipped first fp16 step is not the misordering it names
            warnings.filterwarnings("ignore", r"Detected call of `lr_scheduler\.step\(\)`")
            scheduler.step()
        return total

    def save() -> None:
        nonlocal good
        build_once()  # a run stopped before its first step saves them too
        save_training_state(last, model, optimizer, scheduler, state, world, scaler,
                            keep=good.name if good else None)  # kept as last.prev.pt
        good = last

    def where() -> str:
        return f"at step {state.global_step} of {total_steps}"

    started = time.perf_counter()
    with signals_deferred():  # a first Ctrl-C or SIGTERM stops the run at a step boundary, saved
        if training.eval_first and state.global_step == 0 and not state.history:
            record = evaluate_and_record(model, tasks, overall_score, state, run, started, {}, epoch=0,
                                         epoch_complete=True, world=world)
            if world.is_main:
                print(f"before training: overall {record['overall']:.4f}", file=sys.stderr)
            stop_if_asked(world, where(), save)
        while state.epoch < training.epochs:
            position = (state.epoch, state.global_step)
            steps = built.pop(state.epoch, None) or epoch_steps(state.epoch)
            built.clear()  # resumed past epoch 1, the run trains no more on the steps counted above
            if state.step_in_epoch == 0 or not state.epoch_losses:  # a resumed epoch keeps its steps' losses
                state.epoch_losses = {t.name: [] for t in tasks}
            model.train()
            progress = Progress(len(steps), state.step_in_epoch, f"epoch {state.epoch + 1}/{training.epochs}",
                                world.is_main, training.max_steps and training.max_steps - state.global_step)
            epoch_started = time.perf_counter()
            for batches in steps[state.step_in_epoch:]:
                if done(state, training):
                    break
                loss = step(batches, state.epoch_losses)
                state.step_in_epoch, state.global_step = state.step_in_epoch + 1, state.global_step + 1
                examples = sum(batch_rows(batch) for _, batch in batches)
                progress.update(examples, loss, scheduler.get_last_lr()[0])
                saved = bool(training.checkpoint_every) and state.global_step % training.checkpoint_every == 0
                if saved:
                    save()
                stop_if_asked(world, where(), None if saved else save, progress)
            progress.close()
            train_s = time.perf_counter() - epoch_started  # steps and --checkpoint-every saves, no evaluation

            losses = {name: world.sum_across(values) for name, values in state.epoch_losses.items()}
            place_step_losses(state, steps, losses)
            record = evaluate_and_record(model, tasks, overall_score, state, run, started, losses,
                                         state.epoch + 1, state.step_in_epoch == len(steps), world, train_s)
            if record["overall"] > state.best_score:
                state.best_score, state.best_epoch, record["best"] = record["overall"], record["epoch"], True
                if world.is_main:
                    write_best(run.best, lambda folder: save_best(model, folder))
                    run.rewrite_metrics(state.history)
            if world.is_main:
                print(f"epoch {record['epoch']}: overall {record['overall']:.4f} " + " ".join(
                    f"{task}.{metric}={value:.4f}" for task, metrics in record["dev"].items()
                    for metric, value in metrics.items())
                    + (" (best so far, saved)" if record["best"] else ""), file=sys.stderr)
            if state.step_in_epoch == len(steps):  # a finished epoch; a --max-steps stop resumes mid-epoch
                state.epoch, state.step_in_epoch = state.epoch + 1, 0
            save()
            if world.is_main:
                plot_history(state.history, run.plot, state.step_losses, steps_per_epoch)
            stop_if_asked(world, where(), None)  # saved just above
            if done(state, training):
                break
            if (state.epoch, state.global_step) == position:  # would evaluate the same epoch forever
                raise SystemExit(f"error: epoch {state.epoch + 1} made no progress (step "
                                 f"{state.step_in_epoch} of {len(steps)}); {last} is as it ended")
    run.training_finished = state.epoch >= training.epochs  # claim_run then marks the run finished
    world.barrier()  # rank 0's last files are written before any process moves on
    return state


# ----- what the loop steps through: the epoch's batches and the learning rate ---------------------------


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


def done(state: TrainState, training: TrainingSettings) -> bool:
    return bool(training.max_steps) and state.global_step >= training.max_steps


# ----- what hangs off it: evaluation, stopping, progress, the picture ------------------------------------


def evaluate_and_record(model: nn.Module, tasks: Sequence[Task], overall_score: Callable, state: TrainState,
                        run: RunDir, started: float, losses: dict[str, list[float]], epoch: int,
                        epoch_complete: bool, world: World = World(), train_s: float | None = None) -> dict:
    """Dev metrics of every task, appended to the history, which metrics.jsonl then holds (rank 0 evaluates
    and writes; every process gets the record, so that every history is the same)."""
    record = None
    if world.is_main:
        model.eval()
        with torch.no_grad():
            dev = {t.name: t.evaluate(model) for t in tasks}
        record = {"epoch": epoch, "global_step": state.global_step, "epoch_complete": epoch_complete,
                  "train_loss": {t.name: sum(lost) / len(lost) if (lost := losses.get(t.name)) else None
                                 for t in tasks},
                  "dev": dev, "overall": overall_score(dev), "best": False,
                  "elapsed_s": round(time.perf_counter() - started, 1),
                  "train_s": None if train_s is None else round(train_s, 1)}  # this epoch's, since a resume
    record = world.broadcast(record)
    state.history.append(record)
    if world.is_main:  # the whole history: a run resumed from an older checkpoint lists no epoch twice
        run.rewrite_metrics(state.history)
    return record


def place_step_losses(state: TrainState, steps: list, losses: dict[str, list[float]]) -> None:
    """This epoch's step losses (each task's, summed over processes), epoch e's spread over (e - 1, e], into
    `state.step_losses` for the plot, replacing what an earlier part of it (a --max-steps stop) put there."""
    places: dict[str, list[float]] = {name: [] for name in losses}
    for i, step in enumerate(steps[:state.step_in_epoch]):
        for name, _ in step:
            places.setdefault(name, []).append(state.epoch + (i + 1) / len(steps))
    for name, values in losses.items():
        before = [point for point in state.step_losses.get(name, []) if point[0] <= state.epoch]
        here = places[name][len(places[name]) - len(values):]  # a resume without them keeps the last ones
        state.step_losses[name] = before + [[x, loss] for x, loss in zip(here, values)]


def stop_if_asked(world: World, where: str, save: Callable[[], None] | None,
                  progress: Progress | None = None) -> None:
    """After a first Ctrl-C or SIGTERM (process.py): save the run (`save`; None when it was just saved) and
    stop with Interrupted, which the job turns into one line saying how to continue."""
    signum = stop_requested()
    if world.enabled:  # DDP needs every process in every step: all stop where any one was asked to
        asked = world.sum_across([1.0 if signum else 0.0])[0] > 0
        signum = signum or (signal.SIGTERM if asked else None)
    if not signum:
        return
    if progress is not None:
        progress.close()
    if save is not None:
        save()
    raise Interrupted(signum, where)


def format_duration(seconds: float) -> str:
    minutes, seconds = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{seconds:02d}s"


class ProgressLines:
    """The progress bar's facts as one line every `every_s` seconds; silent when `enabled` is False."""

    def __init__(self, total: int, desc: str, enabled: bool, every_s: float = 30.0, initial: int = 0,
                 file: TextIO | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.total, self.desc, self.enabled, self.every_s = total, desc, enabled, every_s
        self.initial = self.step = initial  # a resumed epoch starts part-way
        self.examples, self.file, self.clock = 0, file, clock
        self.started = self.last_printed = clock()

    def update(self, examples: int, loss: float) -> None:
        """One more step of `examples` examples with this loss; print if it is time."""
        self.step, self.examples = self.step + 1, self.examples + examples
        now = self.clock()
        if not self.enabled or (now - self.last_printed < self.every_s and self.step < self.total):
            return
        self.last_printed = now
        elapsed = max(now - self.started, 1e-9)
        eta = (self.total - self.step) * elapsed / (self.step - self.initial)
        print(f"{self.desc} step {self.step}/{self.total} ({100 * self.step / max(self.total, 1):.0f}%) "
              f"loss {loss:.4f} {self.examples / elapsed:.1f} examples/s ETA {format_duration(eta)}",
              file=self.file or sys.stderr, flush=True)


class Progress:
    """One epoch's progress: tqdm's bar on a terminal; elsewhere `ProgressLines` says the same every 30 s."""

    def __init__(self, total: int, initial: int, desc: str, main: bool, left: int = 0) -> None:
        if 0 < left < total - initial:  # --max-steps stops the run in this epoch: the bar and ETA end there
            total, desc = initial + left, f"{desc} (--max-steps)"
        self.bar = tqdm(total=total, initial=initial, desc=desc, file=sys.stderr, dynamic_ncols=True,
                        disable=None if main else True)
        self.lines = ProgressLines(total, desc, enabled=main and self.bar.disable, initial=initial)

    def update(self, examples: int, loss: float, lr: float) -> None:
        self.bar.update(1)
        self.bar.set_postfix(loss=f"{loss:.3f}", lr=f"{lr:.2e}")
        self.lines.update(examples, loss)

    def close(self) -> None:
        self.bar.close()


def plot_history(history: list[dict], path: Path, step_losses: dict | None = None, steps_per_epoch: int = 0):
    """A PNG of two panels over the epochs, ticked at whole epochs: every task's training loss (each step's,
    faint, with its moving average and the epoch means as dots) and every dev metric at its own step."""
    import matplotlib
    matplotlib.use("Agg")  # no screen needed
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    at = [r["global_step"] / steps_per_epoch if steps_per_epoch else r["epoch"] for r in history]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for i, task in enumerate(history[0]["train_loss"]):
        points = (step_losses or {}).get(task) or []
        if points:
            places, losses = zip(*points)
            left.plot(places, losses, color=f"C{i}", alpha=0.2, linewidth=0.6)
            left.plot(places, moving_average(losses), color=f"C{i}", linewidth=1.8, label=task)
        means = [(x, r["train_loss"][task]) for x, r in zip(at, history) if r["train_loss"][task] is not None]
        if means:
            left.plot(*zip(*means), "o", color=f"C{i}", markeredgecolor="black",
                      label=None if points else f"{task} (epoch mean)")
    if all(loss > 0 for losses in (step_losses or {}).values() for _, loss in losses):
        left.set_yscale("log")  # the tasks' losses differ by orders of magnitude
    left.set(title="training loss (steps, moving average, epoch means)", xlabel="epoch", ylabel="loss")
    if left.get_legend_handles_labels()[0]:
        left.legend(fontsize="small")
    for task in history[0]["dev"]:
        for metric in history[0]["dev"][task]:
            right.plot(at, [r["dev"][task][metric] for r in history], marker="o",
                       label=f"{task} {metric}")
    right.plot(at, [r["overall"] for r in history], marker="s", color="black", label="overall")
    right.set(title="dev metrics", xlabel="epoch")
    right.legend(fontsize="small")
    for axes in (left, right):
        axes.set_xlim(0, max(max(at), 1) * 1.02)  # room for the last epoch's dots
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))  # whole epochs
        axes.grid(alpha=0.3)
    fig.tight_layout()
    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=100))
    plt.close(fig)


def moving_average(values: Sequence[float]) -> list[float]:
    """An exponential moving average over about 1/20 of the points (at most 50), debiased as TensorBoard's."""
    span = min(50, max(1, len(values) // 20))
    decay = 1 - 2 / (span + 1)
    average, out = 0.0, []
    for n, value in enumerate(values, start=1):
        average = decay * average + (1 - decay) * value
        out.append(average / (1 - decay ** n) if decay else average)
    return out
