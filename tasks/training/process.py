"""This process and the machine it runs on: what runs here, where the process stands among torchrun's, and
the signals it is sent.

- What runs here, decided once for the run (settings.py's `resolve_settings`): whether this is a student's
  handout (`in_handout`, the one place that asks), the threads, the precision and the attention kernel.
- Where the process stands: alone (`World`, whose methods are what the loop does then: nothing, mostly), or
  one of torchrun's (WORLD_SIZE > 1: `Distributed`), each taking its own contiguous slice of every batch,
  so that each example is seen once per epoch and --batch-size stays the global batch size:

      torchrun --nproc_per_node 2 -m tasks.sentiment --task sst                     # 2 processes, one machine
      torchrun --nnodes 2 --node_rank 0 --master_addr HOST --master_port 29500 \\
               --nproc_per_node 4 -m tasks.multitask                              # on each of 2 machines

  DistributedDataParallel averages the gradients during backward; a slice's loss is scaled by (its rows /
  the batch's rows) x world size, so the average is exactly the gradient of the whole batch's mean loss (a
  process whose slice would be empty gets one row with weight 0: DDP needs every process in every step).
  Rank 0 alone evaluates, writes and draws progress, and sends each evaluation's record to the others.
  Dropout draws its masks per process, and losses that compare rows with each other (in-batch negatives,
  masked-LM's mean over masked tokens) see each slice separately, so runs are equally valid but not equal.
- Signals: a first SIGINT (Ctrl-C) or SIGTERM (`kill`, a scheduler, a container's stop) during training asks
  the loop to stop at the next step boundary, saved, and the job exits 130 or 143 (as a shell reports a
  process a signal ended) with the command that continues it; a second signal, or one outside training,
  stops at once (nothing is lost).

Read next: loop.py (the loop these serve).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import shlex
import signal
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import psutil
import torch
import torch.distributed as dist
from torch import nn

ATTENTION_CHOICES = ("auto", "unpadded", "sdpa", "eager")
PRECISIONS = ("auto", "fp32", "bf16", "fp16")
HANDOUT_MARKER = "minbert_handout"  # grading/handout.py MARKER: written into the handout's wheel


# ----- what runs here ---------------------------------------------------------------------------------


@functools.cache
def in_handout() -> bool:
    """Whether this runs a student's handout: its installed part carries HANDOUT_MARKER. There the jobs run
    the student's own code (the lesson's AdamW, its dropout, its eager attention for "auto"), and a fast path
    only when named (--attn-implementation unpadded or sdpa)."""
    return importlib.util.find_spec(HANDOUT_MARKER) is not None


def attn_implementation_for(requested: str, device: str, precision: str, predicting: bool = False) -> str:
    """--attn-implementation -> the kernel. "auto": "unpadded" on a CPU for fp32 training (486 ms a step
    against sdpa's 513 on 2 cores; under bf16 sdpa won, 285 against 360) and for --predict in any precision
    (a forward alone, as SentenceEncoder.encode runs it), else "sdpa". In a student's handout "auto" is the
    student's "eager"; the others run when named."""
    if requested == "auto" and in_handout():
        return "eager"
    if requested != "auto":
        return requested
    return "unpadded" if device == "cpu" and (precision == "fp32" or predicting) else "sdpa"


def resolve_precision(requested: str, device: str, predicting: bool = False) -> tuple[str, str]:
    """(precision, why): `auto` is bf16 where the device multiplies bfloat16 natively (AVX-512 BF16 or AMX,
    NVIDIA since Ampere: emulated, it is slower than fp32), else fp16 on a CUDA GPU, else fp32; under
    --predict fp32, as a run's own evaluation is."""
    if requested not in PRECISIONS:
        raise ValueError(f"--precision must be one of {PRECISIONS}, got {requested!r}")
    if requested != "auto":
        return requested, f"--precision {requested}"
    if predicting:
        return "fp32", ("the default under --predict: the run evaluated in fp32, so its dev predictions come "
                        "back; --precision bf16 for autocast")
    cuda = device.startswith("cuda")
    probes = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")  # as PyTorch's CPU dispatch sees them
    if (torch.cuda.is_available() and torch.cuda.is_bf16_supported(including_emulation=False) if cuda
            else any(getattr(torch.cpu, probe, lambda: False)() for probe in probes)):
        return "bf16", f"--precision auto: {'the GPU' if cuda else 'this CPU'} multiplies bfloat16 natively"
    if cuda:
        return "fp16", ("--precision auto: the GPU has no native bfloat16 but multiplies float16 natively; "
                        "float16 autocast with a dynamic loss scale")
    return "fp32", "--precision auto: this CPU has no native bfloat16 matrix multiply"


def busy_cores(sample_s: float = 0.5) -> float:
    """Cores' worth of CPU that other processes used over `sample_s` seconds, before the job does anything (a
    core busy elsewhere makes every operation wait for its thread)."""
    return sum(psutil.cpu_percent(interval=sample_s, percpu=True)) / 100.0


def idle_threads(most: int, busy: float) -> int:
    """A core more than half used counts as busy (round): a half-speed thread slows every operation."""
    return max(1, most - round(busy))


def choose_threads(requested: int | None, env: dict | None = None,
                   sample: Callable[[], float] = busy_cores) -> tuple[int, str]:
    """(threads, why): --threads; else OMP_NUM_THREADS's (PyTorch applied it); else the idle cores."""
    env = os.environ if env is None else env
    if requested:
        return requested, f"--threads {requested}"
    if env.get("OMP_NUM_THREADS"):
        return torch.get_num_threads(), f"OMP_NUM_THREADS={env['OMP_NUM_THREADS']}"
    most, busy = torch.get_num_threads(), sample()  # PyTorch's default: one thread per core it may use
    threads = idle_threads(most, busy)
    if threads == most:
        return threads, f"{most} cores, {busy:.1f} busy with other work"
    return threads, (f"{busy:.1f} of {most} cores busy with other work when the job started, so {threads}; "
                     "beside a busy core 2 threads trained 4.8x slower than 1 (docs/results.md, A busy core)")


# ----- where this process stands: alone, or one of torchrun's ----------------------------------------


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


def join_world(device: str) -> World:
    """This process alone, or under torchrun its place among the others (the process group joined)."""
    return setup(device) if under_torchrun() else World()


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


# ----- signals: Ctrl-C and SIGTERM stop a run saved ------------------------------------------------------


SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """The job was stopped by a signal. `where`: the step at which the loop saved the run (empty when the
    signal stopped the job at once); `message`: the line for the user, completed by claim_run, which knows
    what the run folder holds."""

    def __init__(self, signum: int, where: str = "") -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum, self.where, self.message = signum, where, ""

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_status(self) -> int:
        return 128 + self.signum  # 130 for SIGINT, 143 for SIGTERM, as a shell reports them


class _Requests:
    """The process's signal state: whether the loop defers a first signal, and the one it deferred."""

    deferring = False
    pending: int | None = None


_STATE = _Requests()


def _on_signal(signum: int, frame) -> None:
    if _STATE.deferring and _STATE.pending is None:
        _STATE.pending = signum
        name = signal.Signals(signum).name
        if os.environ.get("RANK", "0") != "0":  # under torchrun every process gets it; rank 0 says so
            return
        # (a handler can interrupt a write to stderr, which then refuses a second one: the note is a courtesy)
        with contextlib.suppress(RuntimeError, OSError, ValueError):
            print(f"\n{name} received: the run stops after this step (or this evaluation) and saves itself; "
                  f"another {name} stops it at once", file=sys.stderr, flush=True)
        return
    raise Interrupted(signum)


@contextlib.contextmanager
def signals_stop_the_job() -> Iterator[None]:
    """While inside: SIGINT and SIGTERM raise Interrupted (or, in the loop, ask it to stop). Python runs
    signal handlers in the main thread only, so elsewhere this does nothing; a signal the shell told the
    process to ignore (a background job's SIGINT) stays ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in SIGNALS}
    for s in SIGNALS:
        if previous[s] is not signal.SIG_IGN:
            signal.signal(s, _on_signal)
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """The training loop: a first signal only asks it to stop (`stop_requested`), where it can save the
    run."""
    outer = _STATE.deferring
    _STATE.deferring, _STATE.pending = True, None
    try:
        yield
        late = _STATE.pending  # asked after the loop last looked: it stops now, not never
    finally:
        _STATE.deferring, _STATE.pending = outer, None
    if late is not None:
        raise Interrupted(late)


def stop_requested() -> int | None:
    """The signal that asked the loop to stop, or None."""
    return _STATE.pending


def resume_command(out: Path) -> str:
    """The command line that started this process with --out `out` (unless it named one) and --resume added,
    when the process is a job started from a shell (python -m tasks.<job> or pretrain.run); said in words when
    a job's `main` was called by other code (a test, experiments.study, a notebook), whose command line is not
    the job's, or by torchrun (whose own options come before the job's)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    job = spec is not None and spec.name.startswith(("tasks.", "pretrain."))
    if not job or "TORCHELASTIC_RUN_ID" in os.environ:
        return f"the same command with --out {out} --resume"
    argv = list(getattr(sys, "orig_argv", sys.argv))
    named = any(a.split("=")[0] == "--out" for a in argv)  # a default run's folder is named by its time
    return shlex.join([*argv, *([] if named else ["--out", str(out)]), *({"--resume"} - set(argv))])
