"""Multi-head self-attention: every token's new vector is a weighted mix of all tokens' values.

Vaswani et al. 2017, §3.2: Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V, computed by H heads in
parallel on D = C / H dimensional projections and concatenated (BERT keeps the concatenation at C and
lets the following dense layer, in layer.py, mix the heads).

Interchangeable kernels compute the same thing, looked up by name in ATTENTION_KERNELS:
- `eager_attention`: the formula written out on `attention_scores` (the exercise; it can also return the
  probabilities);
- `sdpa_attention`: PyTorch's fused `scaled_dot_product_attention`, faster, tested equal to eager.
A variant that attends differently subclasses BertSelfAttention and overrides its `attend` (label
attention, label_attention.py; the unpadded fast path, minbert.fast.unpadded).

Shape legend: B batch, T tokens, C hidden size, H heads, D head size (C = H * D).

Read next: layer.py.
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from minbert.config import BertConfig


def attention_scores(query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    """S = Q K^T / sqrt(D): how well each query matches each key (Vaswani et al. eq. 1, inside the softmax).

    query: (B, H, T_q, D), key: (B, H, T_k, D). Returns (B, H, T_q, T_k). Label attention
    (label_attention.py) scores its label queries with it too.
    """
    # Hint: without the 1/sqrt(D) the dot products grow with D and the softmax saturates (paper §3.2.1).
    # BEGIN SOLUTION
    return query @ key.transpose(-1, -2) / math.sqrt(query.size(-1))
    # END SOLUTION


def eager_attention(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attention_mask: torch.Tensor,
    dropout: nn.Module | None = None, return_probs: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Scaled dot-product attention written out.

    query, key, value: (B, H, T, D). attention_mask: additive, broadcastable to (B, H, T, T):
    0 where a key may be attended, a very large negative number where it is padding.
    dropout: the layer's nn.Dropout, applied to the attention probabilities (BERT applies it there, as
    the TF code does; in eval mode it does nothing); None: no dropout.
    Returns the context (B, H, T, D) and, if asked, the probabilities (B, H, T, T) before dropout.
    """
    # Hints: 1. the scores S (`attention_scores`, above)
    #        2. add the mask, so padding gets (almost) zero probability after the softmax
    #        3. softmax over the keys (the last axis), then `dropout` (when there is one) on the
    #           probabilities, then mix the values
    # BEGIN SOLUTION
    scores = attention_scores(query, key)  # (B, H, T, T)
    scores = scores + attention_mask
    probs = scores.softmax(dim=-1)  # each query's row sums to 1 over the keys
    context = (probs if dropout is None else dropout(probs)) @ value  # (B, H, T, D)
    # END SOLUTION
    return context, (probs if return_probs else None)


def sdpa_attention(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attention_mask: torch.Tensor | None,
    dropout: nn.Module | None = None, return_probs: bool = False,
) -> tuple[torch.Tensor, None]:
    """The same computation with PyTorch's fused kernel (it never materialises the probabilities).

    The additive mask goes in as a boolean one (True = may attend), which PyTorch applies with -inf;
    None means nothing to mask.
    Outputs equal the eager kernel's for every sequence with at least one real token; a sequence that
    is all padding gets a zero context here and a uniform average there (neither means anything).
    """
    if return_probs:
        raise ValueError("the sdpa kernel cannot return attention probabilities; use the eager kernel")
    # Why boolean: PyTorch's CPU flash kernel runs ~15% faster masking with -inf than with our finite
    # finfo.min (forward, MiniLM size, batch 32, 2 threads), ~2% of a whole forward pass; this is what
    # put us level with transformers, which also passes a boolean mask (measured side by side). It also
    # needs no cast under bf16 autocast. Our masks hold only 0 and finfo.min, so `== 0` loses nothing.
    dropout_p = dropout.p if dropout is not None and dropout.training else 0.0
    if dropout_p > 0.0 and query.device.type == "cpu":
        # PyTorch's CPU fused kernels take no dropout: given some, they fall back to this same computation
        # written out, with F.dropout's random mask. So training on a CPU runs the eager kernel, with the
        # layer's own dropout module (minbert.fast.dropout swaps in a cheaper one); evaluation, and
        # every GPU, keep the fused one.
        if attention_mask is None:
            attention_mask = query.new_zeros(())  # nothing masked: an additive 0, broadcast
        return eager_attention(query, key, value, attention_mask, dropout)
    keep = attention_mask == 0 if attention_mask is not None else None  # (B, 1, 1, T), broadcast like it
    context = F.scaled_dot_product_attention(query, key, value, attn_mask=keep, dropout_p=dropout_p)
    return context, None


# The kernels by name; a model picks one with `attn_implementation`, as in Hugging Face.
ATTENTION_KERNELS: dict[str, Callable] = {"eager": eager_attention, "sdpa": sdpa_attention}


class SelfAttentionOutput(NamedTuple):
    context: torch.Tensor  # (B, T, C) the heads' outputs, concatenated
    probs: torch.Tensor | None  # (B, H, T, T) attention probabilities, when asked for


class BertSelfAttention(nn.Module):
    """Project to queries, keys and values, split into heads, attend, and concatenate the heads."""

    def __init__(self, config: BertConfig, attn_implementation: str = "sdpa") -> None:
        super().__init__()
        self.num_heads = config.num_attention_heads  # H
        self.head_dim = config.head_dim  # D
        self.query = nn.Linear(config.hidden_size, config.hidden_size)
        self.key = nn.Linear(config.hidden_size, config.hidden_size)
        self.value = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout = nn.Dropout(config.attention_probs_dropout_prob)  # on the probabilities (TF code)
        self.attn_implementation = check_kernel_name(attn_implementation)

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor,
                output_attentions: bool = False) -> SelfAttentionOutput:
        """hidden_states: (B, T, C); attention_mask: additive (B, 1, 1, T), see model.py."""
        query = self.split_heads(self.query(hidden_states))
        key = self.split_heads(self.key(hidden_states))
        value = self.split_heads(self.value(hidden_states))
        context, probs = self.attend(query, key, value, attention_mask, output_attentions)
        return SelfAttentionOutput(self.merge_heads(context), probs)

    def attend(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
               attention_mask: torch.Tensor,
               output_attentions: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        """This layer's kernel on (B, H, T, D) heads: context (B, H, T, D) and maybe probabilities.

        A variant that attends differently overrides this method (LabelSelfAttention, in
        label_attention.py).
        """
        # Only the eager kernel can hand back the probabilities, so asking for them selects it.
        kernel = ATTENTION_KERNELS["eager" if output_attentions else self.attn_implementation]
        return kernel(query, key, value, attention_mask, self.dropout, output_attentions)

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, C) -> (B, H, T, D): head h of token t holds x[b, t, h*D:(h+1)*D]."""
        # Hint: split C into (H, D) first, (B, T, H, D), then put the heads before the tokens; reading
        # (B, T, C) directly as (B, H, T, D) mixes up tokens and heads.
        # BEGIN SOLUTION
        B, T, _ = x.shape
        return x.view(B, T, self.num_heads, self.head_dim).transpose(1, 2)  # (B, T, C) -> (B, H, T, D)
        # END SOLUTION

    def merge_heads(self, x: torch.Tensor) -> torch.Tensor:
        """(B, H, T, D) -> (B, T, C), the inverse of split_heads: each token's H head outputs side by side."""
        # Hint: tokens back before the heads, (B, T, H, D), then (H, D) becomes one axis of C = H * D;
        # after moving axes the numbers are no longer in row order in memory.
        # BEGIN SOLUTION
        B, _, T, _ = x.shape
        return x.transpose(1, 2).reshape(B, T, self.num_heads * self.head_dim)  # (B, H, T, D) -> (B, T, C)
        # END SOLUTION


def check_kernel_name(name: str) -> str:
    if name not in ATTENTION_KERNELS:
        raise ValueError(f"attn_implementation must be one of {sorted(ATTENTION_KERNELS)}, got {name!r}")
    return name
