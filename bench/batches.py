"""What the benches share: where the course data is, the matmul FLOPs a batch costs, and the matmul peak.

Read next: job_step.py.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable

import torch

from minbert.config import BertConfig


def default_data_dir() -> Path:
    """$MINBERT_DATA/cs224n, else ../shared/data/cs224n beside the checkout (as the tasks look)."""
    shared = os.environ.get("MINBERT_DATA")
    if shared:
        return Path(shared) / "cs224n"
    return Path(__file__).resolve().parents[2] / "shared" / "data" / "cs224n"


def matmul_flops(config: BertConfig, lengths: list[int], unpadded: bool) -> int:
    """Forward matmul FLOPs: 2 m n k per linear and per attention product, for the positions computed."""
    C, I, L = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    B, T = len(lengths), max(lengths)
    tokens = sum(lengths) if unpadded else B * T
    squares = sum(n * n for n in lengths) if unpadded else B * T * T  # query-key pairs
    linears = 2 * tokens * (4 * C * C + 2 * C * I)  # query, key, value, attention output; FFN in and out
    attention = 2 * 2 * squares * C  # Q K^T and probs V, summed over the heads
    return L * (linears + attention) + 2 * B * C * C  # + the pooler


def timed(step: Callable[[], object], device: torch.device) -> float:
    """Seconds one call takes, waiting for an accelerator to finish."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    step()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start


def measure_peak(dtype: torch.dtype, device: torch.device, n: int = 2048, tries: int = 3) -> float:
    """GFLOP/s of the best of `tries` n x n matmuls in `dtype`: the matmul peak we can hope to reach."""
    a, b = (torch.randn(n, n, device=device).to(dtype) for _ in range(2))
    best = float("inf")
    for _ in range(tries):
        best = min(best, timed(lambda: torch.mm(a, b), device))
    return 2 * n ** 3 / best / 1e9
