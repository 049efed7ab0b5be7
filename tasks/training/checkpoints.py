"""The resume state: checkpoints/last.pt, everything a stopped run needs to continue exactly.

checkpoints/last.pt holds the model, the optimizer, the scheduler, the position in the epoch (TrainState)
and the random state; the one before is kept as last.prev.pt, and the sha256 of both in checksums.sha256,
which a --resume checks (what it reads back is checked by run_records.py's schema). It holds tensors and
plain values only (state dicts, the random states, counters) and is read with torch.load(weights_only=True):
a checksum proves a file whole, not trusted, so no file handed over with a run folder can run code here.

Read next: best.py (the best epoch's model, saved for use).
"""

from __future__ import annotations

import dataclasses
import math
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from minbert.loading.atomic import (DamagedFileError, atomic_directory, link, read_checksums, read_verified,
                                    readable_directory, record_checksums, write_hashed)
from minbert.loading.checkpoint import read_torch
from tasks.training.world import World
from tasks.training.run_records import check_training_checkpoint


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
    # task -> [[place in epochs, loss], ...] for every step so far (the plot's curve)
    step_losses: dict = dataclasses.field(default_factory=dict)


PREVIOUS = "last.prev.pt"  # the checkpoint before last.pt, kept in case last.pt proves damaged


def save_training_state(path: Path, model: nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any,
                        state: TrainState,
                        world: World = World(),
                        scaler: torch.amp.GradScaler | None = None, keep: str | None = None) -> None:
    """Everything needed to continue exactly: weights, optimizer moments, schedule, position, RNG, and fp16's
    loss scale (`scaler`, when enabled).

    checkpoints/ is written whole (atomic.py): `path` (last.pt) anew, and `keep`, the name of the checkpoint
    known whole (the one saved last, or the one a --resume read), as last.prev.pt, a hard link to the same
    bytes; checksums.sha256 records the sha256 of both, last.pt's hashed as it is written. A full disk
    half-way leaves checkpoints/ as it was. Distributed, the processes hold the same weights and optimizer
    state: rank 0 writes for all.
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
    if scaler is not None and scaler.is_enabled():
        payload["scaler"] = scaler.state_dict()
    with atomic_directory(path.parent, keep_others=False) as new:
        sums = {path.name: write_hashed(new / path.name, lambda file: torch.save(payload, file))}
        if keep is not None and (path.parent / keep).is_file():
            link(path.parent / keep, new / PREVIOUS)
            recorded = read_checksums(path.parent).get(keep)
            if recorded is not None:  # a checkpoint from before checksums were recorded goes unrecorded
                sums[PREVIOUS] = recorded
        record_checksums(new, sums)


def load_training_state(path: Path, model: nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any,
                        scaler: torch.amp.GradScaler | None = None) -> tuple[TrainState, Path]:
    """Restore what `save_training_state` wrote, and say from which file: last.pt, or, when it is damaged
    (its sha256 differs from the one recorded) or unreadable, the earlier last.prev.pt, itself checked. Each
    file is read once, hashed and loaded from the same bytes. A checkpoint without a loss scale (written
    before fp16 was an option) leaves `scaler` as it starts."""
    folder = readable_directory(path.parent)  # checkpoints/, even if a crash interrupted its swap
    problems = []
    for candidate in (folder / path.name, folder / PREVIOUS):
        if not candidate.exists():
            continue
        try:  # tensors and plain values only (weights_only=True): a checkpoint cannot run code
            payload = read_torch(candidate, read_verified(candidate))
            payload = check_training_checkpoint(payload, candidate, model)
            model.load_state_dict(payload["model"])
            optimizer.load_state_dict(payload["optimizer"])
            scheduler.load_state_dict(payload["scheduler"])
            if scaler is not None and scaler.is_enabled() and payload.get("scaler"):
                scaler.load_state_dict(payload["scaler"])
            torch.set_rng_state(payload["torch_rng"])
            random.setstate(payload["python_rng"])
            state = TrainState(**payload["train_state"])
        except Exception as error:  # noqa: BLE001 - any unreadable checkpoint is reported, then skipped
            problems.append(str(error) if isinstance(error, DamagedFileError) or str(candidate) in str(error)
                            else f"{candidate} is unreadable ({error})")
            print(f"warning: {problems[-1]}", file=sys.stderr)
            continue
        earlier = " (the earlier checkpoint, which is whole)" if problems else ""
        print(f"resuming from {candidate}{earlier}, at step {state.global_step}", file=sys.stderr)
        return state, candidate
    run = path.parent.parent
    if problems:
        kept = ("" if len(problems) > 1 else
                f"; this run keeps no earlier checkpoint ({PREVIOUS} comes with the second save)")
        raise SystemExit(f"error: --resume: no whole checkpoint to resume from: {'; '.join(problems)}{kept}; "
                         f"start over: delete {run} (or choose another --out) and run the command without "
                         "--resume")
    raise SystemExit(f"error: --resume given, but there is no checkpoint at {path}")
