"""Graded, hidden: extended_attention_mask on long masks, and its refusal of a mask of the wrong rank."""

from __future__ import annotations

import pytest
import torch
from graded_helpers import check_close

from minbert.model import extended_attention_mask

pytestmark = [pytest.mark.component("attention_mask"), pytest.mark.visibility("after_published")]


@pytest.mark.points(1)
def test_random_masks_broadcast_over_heads_and_queries():
    padding = (torch.rand(5, 11) > 0.3).long()
    mask = extended_attention_mask(padding, torch.float32)
    scores = torch.zeros(5, 3, 11, 11) + mask  # (B, H, T, T): every head and query sees the same row
    row = torch.where(padding.bool(), 0.0, torch.finfo(torch.float32).min)  # (B, T)
    check_close(scores, row[:, None, None, :].expand(5, 3, 11, 11),
                "the mask broadcast over 3 heads and 11 queries", atol=0, rtol=1e-6)
