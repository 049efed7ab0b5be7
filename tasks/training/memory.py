"""Freed memory kept for the next step: the training loop's large buffers without fresh pages every step.

glibc's malloc serves a request of 32 MiB or more (the ceiling of its dynamic mmap threshold) with a fresh
mmap, and returns those pages to the system when the block is freed. A training step frees and asks again
for the same blocks: in MiniLM the word embeddings' gradient is 30,522 x 384 float32 numbers (45 MiB),
built anew by every backward (the embedding's backward zeroes a new tensor and adds the rows in; zero_grad
then drops it). Each step the zeroing touched 11,000 new pages: 15-38 ms of a 255 ms bf16 step on one core
(bench/step_profile.py: `aten::fill_` on (30522, 384) was the largest operator after the matmuls), 31 ms for
a bare torch.zeros(30522, 384) against 1.5-5 ms from memory kept. `keep_freed_memory` tells glibc never to
use mmap and not to give the top of its heap back, so a freed block is there, its pages mapped, for the
next step's request. Numbers do not change; the process keeps what it used at its peak (a training run
keeps it anyway: the same blocks come back every step).

Only glibc has mallopt; elsewhere (macOS, musl) this does nothing.

Read next: fast_paths.py (through which a job calls it, before the loop).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

# glibc's <malloc.h>
M_TRIM_THRESHOLD = -1
M_MMAP_MAX = -4
KEEP = 1 << 30  # the free top of the heap given back above 1 GiB only


def glibc():
    """The C library when it is glibc (it has mallopt), else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "mallopt") and hasattr(libc, "gnu_get_libc_version") else None


def keep_freed_memory() -> bool:
    """No mmap for large blocks, and the heap's free top kept: freed blocks serve the next step's requests.
    Returns whether glibc took both settings."""
    libc = glibc()
    if libc is None:
        return False
    return bool(libc.mallopt(M_MMAP_MAX, 0)) and bool(libc.mallopt(M_TRIM_THRESHOLD, KEEP))
