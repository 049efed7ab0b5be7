"""Graded, hidden: split_heads and merge_heads on other sizes, and on a tensor not laid out in row order."""

from __future__ import annotations

import pytest
import torch
from graded_helpers import check_close

from minbert.attention import BertSelfAttention

pytestmark = [pytest.mark.component("split_heads"), pytest.mark.visibility("after_published"),
              pytest.mark.todo("merge_heads")]


@pytest.mark.points(1)
def test_round_trip_with_six_heads_and_a_transposed_input(config):
    attention = BertSelfAttention(config.replace(hidden_size=36, num_attention_heads=6)).eval()
    x = torch.randn(11, 3, 36).transpose(0, 1)  # (B=3, T=11, C): a view, not in row order
    heads = attention.split_heads(x)
    check_close(heads[:, 4], x[:, :, 24:30], "head 4 of a 6-head split (hidden 36)", atol=0, rtol=0)
    check_close(attention.merge_heads(heads.transpose(2, 3).transpose(2, 3)), x,
                "merge_heads of a (3, 6, 11, 6) tensor (after the split)", atol=0, rtol=0)
