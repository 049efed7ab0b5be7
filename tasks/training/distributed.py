"""Data parallelism: the same job on several processes (CPU cores, GPUs, machines), launched by torchrun.

    torchrun --nproc_per_node 2 -m tasks.sentiment --task sst                     # 2 processes, one machine
    torchrun --nnodes 2 --node_rank 0 --master_addr HOST --master_port 29500 \\
             --nproc_per_node 4 -m tasks.multitask                              # on each of 2 machines

torchrun starts the processes and tells each its RANK, LOCAL_RANK and WORLD_SIZE; with WORLD_SIZE > 1 the
training loop (loop.py) loads this file, joins the process group (gloo on CPU, nccl on GPU), and its
`Distributed` overrides what world.py's one process does:

- every process builds the same batches (they are deterministic given the seed and the epoch) and takes its
  own contiguous slice of each one's rows, so each example is seen once per epoch across the processes and
  `--batch_size` stays the global batch size;
- the losses go through DistributedDataParallel (DDP), which averages the gradients across processes
  during backward. A slice's loss is scaled by (its rows / the batch's rows) x world size, so the average
  is exactly the gradient of the whole batch's mean loss, even when a batch does not split evenly. (A
  process whose slice would be empty gets one row with weight 0: DDP needs every process in every step.)
- only rank 0 evaluates on the dev sets, writes files and draws progress bars; it sends each evaluation's
  record to the others, so every process keeps the same history and picks the same best epoch.

What cannot match a single process exactly: dropout draws its masks per process, so with dropout on, the
runs are equally valid but not equal; and losses that compare rows with each other (in-batch negatives
rank each pair against the batch's others; masked-LM averages over masked tokens, not rows) see each slice
separately.

Read next: loop.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from tasks.training.world import TaskLosses, World, batch_rows, env_count


@dataclass(frozen=True)
class Distributed(World):
    """Rank `rank` of `world_size` processes that torchrun started, in one process group."""

    def device_for(self, device: str) -> torch.device:
        """Each process on a machine gets its own GPU (cuda:LOCAL_RANK); CPU processes share the CPU."""
        return torch.device(f"cuda:{self.local_rank}") if device.startswith("cuda") else torch.device(device)

    def wrap(self, losses: TaskLosses, device: torch.device) -> nn.Module:
        """DDP around the losses (any head may sit out a step: find_unused_parameters)."""
        ids = [device.index] if device.type == "cuda" else None
        return nn.parallel.DistributedDataParallel(losses, device_ids=ids, find_unused_parameters=True)

    def shard(self, batch: Any) -> tuple[Any, float]:
        """This process's contiguous slice of the batch's rows, and the weight of its loss (see the
        docstring)."""
        rows = batch_rows(batch)
        start, stop = rows * self.rank // self.world_size, rows * (self.rank + 1) // self.world_size
        if stop == start:  # fewer rows than processes: one row, counted for nothing
            return slice_rows(batch, 0, 1), 0.0
        return slice_rows(batch, start, stop), (stop - start) / rows * self.world_size

    def broadcast(self, value: Any) -> Any:
        """Rank 0's `value` on every process (any picklable object)."""
        box = [value]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def sum_across(self, values: list[float]) -> list[float]:
        """Element-wise sum of a list of floats over the processes (same length everywhere)."""
        if not values:
            return values
        tensor = torch.tensor(values, dtype=torch.float64)
        if dist.get_backend() == "nccl":  # nccl reduces GPU tensors only
            tensor = tensor.cuda()
        dist.all_reduce(tensor)
        return tensor.tolist()

    def barrier(self) -> None:
        dist.barrier()


def setup(device: str) -> Distributed:
    """Join the process group torchrun started us in (WORLD_SIZE > 1)."""
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device.startswith("cuda") else "gloo")
    local_rank = env_count("LOCAL_RANK", 0)
    if device.startswith("cuda"):
        torch.cuda.set_device(local_rank)
    return Distributed(dist.get_rank(), dist.get_world_size(), local_rank)


def slice_rows(batch: Any, start: int, stop: int) -> Any:
    """Rows start..stop-1 of every tensor in a batch (tensors, tuples, lists, NamedTuples of them).

    A batch type whose tensors are not all row-aligned defines its own `slice_rows(start, stop)`
    (pretrain.run.PretrainingBatch does, for its span targets).
    """
    if isinstance(batch, torch.Tensor):
        return batch[start:stop]
    if hasattr(batch, "slice_rows"):
        return batch.slice_rows(start, stop)
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # a NamedTuple
        return type(batch)(*(slice_rows(item, start, stop) for item in batch))
    if isinstance(batch, (tuple, list)):
        return type(batch)(slice_rows(item, start, stop) for item in batch)
    raise TypeError(f"cannot split a batch of type {type(batch).__name__} across processes")
