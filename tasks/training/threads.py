"""How many CPU threads a job computes with: --threads, or a default that leaves busy cores alone.

PyTorch splits each CPU operation over `torch.get_num_threads()` threads (one per physical core by
default) and waits for the slowest before the next operation starts. When another process is using one
of those cores, the thread that lands there runs at a fraction of its speed and every operation waits for
it: on a laptop with a browser, a second job or a test suite running, training with a thread per core is
five times slower than with one thread fewer (docs/results.md, "A busy core"; bench/busy_core.py). So
unless told otherwise, a job looks at how busy the cores are just before it starts (half a second of
`psutil.cpu_percent`, while the job itself is idle) and uses only the idle ones, at least one.

The load is sampled once: a process that starts later is not seen. `--threads N` fixes the number, and
so does OMP_NUM_THREADS when it is set (PyTorch has then already applied it).

Read next: config.py (where the jobs call this).
"""

from __future__ import annotations

import os
from typing import Callable

import psutil
import torch

SAMPLE_S = 0.5


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
