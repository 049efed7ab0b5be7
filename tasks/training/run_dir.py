"""A run's directory and the state that lets a stopped run continue exactly.

A run directory holds config.json (the run's settings), metrics.jsonl (one JSON line per epoch),
loss_and_dev.png, checkpoints/last.pt (everything needed to resume: model, optimizer, scheduler, position
in the epoch, random state; the previous one kept as last.prev.pt until the new one is on disk), and
best/ (written by the job's `save_best`).

Read next: loop.py (which writes all of this).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import random
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from minbert.atomic import atomic_path, atomic_write_text
from tasks.training import distributed


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

    def drop_checkpoints(self, state: "TrainState", epochs: int) -> None:
        """A finished run's resume checkpoints (weights and optimizer moments, about 0.5 GB for the embedded
        model) serve nothing any more: delete them so a laptop's disk does not fill. best/ stays."""
        if state.epoch >= epochs and self.checkpoints.is_dir():
            shutil.rmtree(self.checkpoints)
            print(f"dropped the finished run's resume checkpoints ({self.checkpoints}; --keep-checkpoints "
                  "keeps them)", file=sys.stderr)

    def rewrite_metrics(self, history: list[dict]) -> None:
        atomic_write_text(self.metrics, "".join(json.dumps(r, sort_keys=True) + "\n" for r in history))


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
