"""Where this process stands among the run's processes: alone (`python -m`), or one of torchrun's.

A job started by `python -m` is one process, rank 0 of 1: it trains on every row of every batch, evaluates
and writes; `World` below is that process, and each of its methods is what the loop does then (nothing,
mostly). Under torchrun (WORLD_SIZE > 1 in the environment) the loop joins the others through
distributed.py, whose `Distributed` overrides those methods; a single process never loads it.

Read next: distributed.py.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any, Mapping

import torch
from torch import nn


def process_rank() -> int:
    """This process's rank as torchrun set it (0 when not launched by torchrun), usable before the loop
    joins the others: the jobs write their outputs (predictions, tables) from rank 0 only."""
    return env_count("RANK", 0)


def under_torchrun() -> bool:
    """Whether torchrun started this process among others (WORLD_SIZE > 1)."""
    return env_count("WORLD_SIZE", 1) > 1


def env_count(name: str, default: int) -> int:
    """A count torchrun puts in the environment (RANK, WORLD_SIZE, LOCAL_RANK), `default` when unset; set
    to anything but ASCII digits (empty too), a usage error naming the variable (exit status 2)."""
    value = os.environ.get(name)
    if value is None:
        return default
    if not (value.strip().isascii() and value.strip().isdigit()):
        print(f"error: environment variable {name}={value!r}: must be a whole number, as torchrun sets it "
              "(unset it to run as one process)", file=sys.stderr)
        raise SystemExit(2)
    return int(value)


@dataclass(frozen=True)
class World:
    """Rank `rank` of `world_size` processes; this class is the one process, which does everything itself."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def enabled(self) -> bool:
        """Whether there are other processes to agree with."""
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """Whether this process evaluates and writes the run's files (rank 0)."""
        return self.rank == 0

    def device_for(self, device: str) -> torch.device:
        """The device this process trains on, from --device."""
        return torch.device(device)

    def wrap(self, losses: TaskLosses, device: torch.device) -> nn.Module:
        """The module whose forward the loop calls for each batch's loss."""
        return losses

    def shard(self, batch: Any) -> tuple[Any, float]:
        """This process's rows of `batch` and the weight of their loss: all of them, weight 1."""
        return batch, 1.0

    def broadcast(self, value: Any) -> Any:
        """Rank 0's `value` on every process."""
        return value

    def sum_across(self, values: list[float]) -> list[float]:
        """Element-wise sum of `values` over the processes."""
        return values

    def barrier(self) -> None:
        """Wait until every process is here."""


def batch_rows(batch: Any) -> int:
    """The number of rows (examples) of a batch: the first dimension of its first tensor."""
    if isinstance(batch, torch.Tensor):
        return batch.size(0)
    if hasattr(batch, "rows"):
        return batch.rows()
    for item in batch:
        return batch_rows(item)
    raise ValueError("an empty batch has no rows")


class TaskLosses(nn.Module):
    """A module whose forward is one task's loss on one batch, so that DDP can wrap the whole computation.

    DDP synchronises gradients for what runs inside its wrapped module's forward; our tasks call their own
    methods on the model (predict_sentiment, ...), so the loss itself is the forward.
    """

    def __init__(self, model: nn.Module, tasks: Mapping[str, Any]) -> None:
        super().__init__()
        self.model = model
        self.tasks = dict(tasks)  # plain objects, not modules: no parameters of their own

    def forward(self, name: str, batch: Any) -> torch.Tensor:
        return self.tasks[name].loss(self.model, batch)
