"""Graded: BertSelfAttention.split_heads and merge_heads, (B, T, C) <-> (B, H, T, D) with C = H * D."""

from __future__ import annotations

import pytest
import torch
from graded_helpers import additive, check_close, expectation, randomize, torch_multihead_attention

from minbert.attention import BertSelfAttention

pytestmark = pytest.mark.component("split_heads")

MIXED = ("tokens and heads are mixed up: (B, T, C) was read directly as (B, H, T, D); split C into (H, D) "
         "first, giving (B, T, H, D), then move the head axis before the tokens")
INTERLEAVED = ("C was split as (D, H), so head h got channels h, h + H, h + 2H, ...: head h must hold the "
               "channels h*D to (h+1)*D - 1, so split C as (H, D)")
NOT_MOVED = ("the heads were not moved back behind the tokens before merging: (B, H, T, D) must become "
             "(B, T, H, D), then (B, T, C)")


def module(config) -> BertSelfAttention:
    return BertSelfAttention(config).eval()


def numbered(*shape: int) -> torch.Tensor:
    return torch.arange(torch.Size(shape).numel(), dtype=torch.float32).view(shape)


@expectation
def split_positions(B: int, T: int, H: int, D: int) -> torch.Tensor:
    """(B, H, T, D): where element [b, h, t, d] of the split sits in a numbered (B, T, C) tensor."""
    b, h, t, d = (torch.arange(n, dtype=torch.float32).view(shape) for n, shape in
                  ((B, (B, 1, 1, 1)), (H, (1, H, 1, 1)), (T, (1, 1, T, 1)), (D, (1, 1, 1, D))))
    return b * T * H * D + t * H * D + h * D + d  # token t's channels h*D..(h+1)*D-1


@expectation
def merge_positions(B: int, T: int, H: int, D: int) -> torch.Tensor:
    """(B, T, C): where element [b, t, c] of the merge sits in a numbered (B, H, T, D) tensor."""
    b, t, c = (torch.arange(n).view(shape) for n, shape in
               ((B, (B, 1, 1)), (T, (1, T, 1)), (H * D, (1, 1, H * D))))
    return b * H * T * D + (c // D) * T * D + t * D + c % D  # channel c is dimension c % D of head c // D


@pytest.mark.points(2)
@pytest.mark.todo("split_heads")
def test_split_heads_gives_each_head_its_slice_of_every_token(config):
    attention, H, D = module(config), config.num_attention_heads, config.head_dim
    x = numbered(2, 5, H * D)  # (B, T, C): every number says where it came from
    # head h of token t holds channels h*D..(h+1)*D-1
    check_close(attention.split_heads(x), split_positions(2, 5, H, D), "split_heads of a (2, 5, 32) "
                                                                       "tensor (4 heads of 8)",
                [(x.reshape(2, H, 5, D), MIXED),
                 (x.view(2, 5, D, H).permute(0, 3, 1, 2), INTERLEAVED)], atol=0, rtol=0)


@pytest.mark.points(2)
@pytest.mark.todo("merge_heads")
def test_merge_heads_puts_each_tokens_heads_side_by_side(config):
    attention, H, D = module(config), config.num_attention_heads, config.head_dim
    x = numbered(2, H, 5, D)  # (B, H, T, D)
    # channel h*D+d of token t
    check_close(attention.merge_heads(x), merge_positions(2, 5, H, D), "merge_heads of a (2, 4, 5, 8) tensor",
                [(x.reshape(2, 5, H * D), NOT_MOVED)], atol=0, rtol=0)


@pytest.mark.points(1)
@pytest.mark.todo("merge_heads")
def test_merge_undoes_split(config):
    attention = module(config)
    x = torch.randn(3, 7, config.hidden_size)
    check_close(attention.merge_heads(attention.split_heads(x)), x, "merge_heads(split_heads(x))", atol=0,
                rtol=0)


@pytest.mark.points(1)
@pytest.mark.todo("merge_heads")  # it runs both; merge_heads is the one done second (the README's order)
def test_self_attention_with_torchs_kernel_matches_torch_multihead_attention(config, padding_mask):
    ours = randomize(BertSelfAttention(config, attn_implementation="sdpa")).eval()
    hidden = torch.randn(3, 7, config.hidden_size)
    real = padding_mask.bool()
    check_close(ours(hidden, additive(padding_mask)).context[real],
                torch_multihead_attention(ours, config)(
                    hidden, hidden, hidden, key_padding_mask=padding_mask == 0)[0].detach()[real],
                "a self-attention module (your split and merge around torch's kernel)")
