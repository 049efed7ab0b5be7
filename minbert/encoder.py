"""BertEncoder: the stack of L identical transformer layers, each reading the one before (BERT paper §3).

Each layer (layer.py) maps (B, T, C) to (B, T, C), so the stack is a loop; the additive mask is built
once per batch (model.py) and every layer reads the same one. Along the way the encoder can keep what a
caller asks for: every layer's output (for probing, or layer-wise features) and every layer's attention
probabilities (for minbert.extras.analysis).

Shape legend: B batch, T tokens, C hidden size, H heads, L layers.

Read next: model.py.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn

from minbert.config import BertConfig
from minbert.layer import BertLayer


class EncoderOutput(NamedTuple):
    last_hidden_state: torch.Tensor  # (B, T, C)
    hidden_states: tuple[torch.Tensor, ...] | None  # L + 1 tensors (B, T, C): embeddings, then each layer
    attentions: tuple[torch.Tensor, ...] | None  # L tensors (B, H, T, T)


class BertEncoder(nn.Module):
    """L identical layers applied in turn."""

    def __init__(self, config: BertConfig, attn_implementation: str = "sdpa") -> None:
        super().__init__()
        self.layer = nn.ModuleList(BertLayer(config, attn_implementation)
                                   for _ in range(config.num_hidden_layers))

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor,
                output_hidden_states: bool = False, output_attentions: bool = False) -> EncoderOutput:
        """hidden_states: (B, T, C) embeddings; attention_mask: additive (B, 1, 1, T)."""
        all_hidden = [hidden_states] if output_hidden_states else None
        all_attentions = [] if output_attentions else None
        # Hint: feed each layer's output to the next; collect what was asked for along the way.
        # BEGIN SOLUTION
        for layer in self.layer:
            hidden_states, probs = layer(hidden_states, attention_mask, output_attentions)
            if output_hidden_states:
                all_hidden.append(hidden_states)
            if output_attentions:
                all_attentions.append(probs)
        # END SOLUTION
        return EncoderOutput(hidden_states,
                             tuple(all_hidden) if output_hidden_states else None,
                             tuple(all_attentions) if output_attentions else None)
