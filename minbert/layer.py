"""BertLayer: one transformer encoder block, post-LayerNorm as in BERT and the original Transformer.

Vaswani et al. 2017, §3.1: each sub-layer's output is LayerNorm(x + Sublayer(x)), with dropout on the
sub-layer's output before the residual add (§5.4). The two sub-layers are multi-head self-attention and a
position-wise feed-forward network, here with BERT's exact (erf) GELU (BERT paper §3; Hendrycks & Gimpel).

The module names (attention.self, attention.output, intermediate, output) are the checkpoint's names.

Shape legend: B batch, T tokens, C hidden size, I intermediate (feed-forward) size.

Read next: encoder.py.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from minbert.attention import BertSelfAttention
from minbert.config import BertConfig


class AddNorm(nn.Module):
    """Dense projection, dropout, residual add, LayerNorm: LayerNorm(x + Dropout(W h + b))."""

    def __init__(self, in_features: int, config: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(in_features, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        """hidden_states: (B, T, in_features), the sub-layer's output; residual: (B, T, C), its input."""
        # Hint: post-LN, the norm comes after the residual add (Vaswani et al. §3.1), not before; the norm is
        # self.LayerNorm, whose eps (1e-12, the checkpoint's) is not torch's default (1e-5).
        # BEGIN SOLUTION
        return self.LayerNorm(residual + self.dropout(self.dense(hidden_states)))
        # END SOLUTION


class BertAttention(nn.Module):
    """Self-attention followed by its add & norm."""

    def __init__(self, config: BertConfig, attn_implementation: str = "sdpa") -> None:
        super().__init__()
        # "self.self" looks odd, but it is the checkpoint's name: attention.self.query.weight, ...
        self.self = BertSelfAttention(config, attn_implementation)
        self.output = AddNorm(config.hidden_size, config)


class BertIntermediate(nn.Module):
    """The feed-forward network's expansion: C -> I with the exact erf GELU."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """(B, T, C) -> (B, T, I): GELU(h W^T + b), the first half of the feed-forward network."""
        # Hint: GELU(x) = x Phi(x), Phi the standard normal CDF (Hendrycks & Gimpel), the exact (erf) form
        # of BERT's TF code; its tanh approximation differs by ~1e-3, enough to break checkpoint parity.
        # BEGIN SOLUTION
        return F.gelu(self.dense(hidden_states), approximate="none")  # (B, T, I)
        # END SOLUTION


class LayerOutput(NamedTuple):
    hidden_states: torch.Tensor  # (B, T, C)
    attention_probs: torch.Tensor | None  # (B, H, T, T), when asked for


class BertLayer(nn.Module):
    """Attention sub-layer, then feed-forward sub-layer, each wrapped in add & norm."""

    def __init__(self, config: BertConfig, attn_implementation: str = "sdpa") -> None:
        super().__init__()
        self.attention = BertAttention(config, attn_implementation)
        self.intermediate = BertIntermediate(config)
        self.output = AddNorm(config.intermediate_size, config)  # I -> C, the FFN's second half

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor,
                output_attentions: bool = False) -> LayerOutput:
        """hidden_states: (B, T, C); attention_mask: additive (B, 1, 1, T). Returns (B, T, C)."""
        # Hints: 1. self-attention, then its add & norm with the layer's input as the residual
        #        2. the feed-forward network (intermediate, then output's add & norm)
        # BEGIN SOLUTION
        context, probs = self.attention.self(hidden_states, attention_mask, output_attentions)
        attention_output = self.attention.output(context, hidden_states)
        layer_output = self.output(self.intermediate(attention_output), attention_output)
        # END SOLUTION
        return LayerOutput(layer_output, probs)
