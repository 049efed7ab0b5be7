"""Graded, hidden: mean_pool in float64 on long, ragged batches."""

from __future__ import annotations

import pytest
import torch
from graded_helpers import check_close

from minbert.pooling import mean_pool

pytestmark = [pytest.mark.component("mean_pool"), pytest.mark.visibility("after_published")]


@pytest.mark.points(1)
def test_ragged_batch_in_float64():
    hidden = torch.randn(4, 30, 8, dtype=torch.float64)
    lengths = [30, 1, 17, 2]
    mask = torch.tensor([[1] * n + [0] * (30 - n) for n in lengths])
    check_close(mean_pool(hidden, mask), torch.stack([hidden[b, :n].mean(0) for b, n in enumerate(lengths)]),
                "the means of rows of 30, 1, 17 and 2 real tokens",
                atol=1e-12)
