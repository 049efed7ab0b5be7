"""tasks/training/job.py's keep_freed_memory: a large block freed and asked for again comes back with its pages mapped.

A property, not a timing: the minor page faults of zeroing a 48 MiB tensor a second time, counted by the
kernel (getrusage). glibc's default maps such a block afresh (about 12,000 faults of 4 KiB pages); kept
memory, once the heap has grown to hold it, faults none. Linux and glibc only: elsewhere keep_freed_memory
does nothing and says so.
"""

from __future__ import annotations

import resource

import pytest
import torch

from tasks.training.job import glibc, keep_freed_memory

BLOCK = (48 << 20) // 4  # float32 numbers in 48 MiB, above glibc's 32 MiB mmap threshold


def faults_of_zeroing() -> int:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    block = torch.zeros(BLOCK)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    del block
    return faults


@pytest.mark.skipif(glibc() is None, reason="mallopt is glibc's")
def test_a_freed_large_block_comes_back_without_new_pages():
    assert keep_freed_memory()
    # The first requests grow the heap, mapping pages: torch asks for 64-byte aligned blocks, which glibc
    # carves with a margin, so the freed block fits the next request only once its neighbours have merged
    # with it (8 requests here, under pytest).
    faults = [faults_of_zeroing() for _ in range(20)]
    # glibc's default: ~12,000 each time; kept, none of the block's own (a long-lived pytest worker's other
    # allocations may fault a page or two meanwhile)
    assert max(faults[-3:]) < 100, faults
