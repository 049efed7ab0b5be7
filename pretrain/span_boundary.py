"""SpanBERT's span-boundary objective (SBO): predict each token of a masked span from its boundary.

Joshi et al. 2020, "SpanBERT" §3.2: for a masked span x_s .. x_e, each token x_i is predicted from the
encoder outputs of the two tokens just outside the span and a position embedding of i relative to the
span's start:

    h0 = [x_{s-1}; x_{e+1}; p_{i-s+1}]                 (eq. 1)
    h1 = LayerNorm(GeLU(W1 h0))
    y_i = LayerNorm(GeLU(W2 h1))                        (eq. 2)

and y_i goes through the masked-LM decoder (here: tied to the word embeddings, with its own bias): the head
is a BertLMPredictionHead (minbert/heads.py) whose transform is the two layers above, so the decoder is
written once.
The SBO loss is added to the masked-LM loss. Our spans never touch each other (minbert/masking.py), so the
boundary tokens are always unmasked, as the objective intends. Relative positions beyond the embedding
table (a span can be longer in pieces than in words) share the last embedding.

The head is for pre-training only: it is not part of a BERT checkpoint and is not saved with it.

Shape legend: B batch, T tokens, C hidden size, N masked tokens in the batch, V vocabulary size.

Read next: run.py.
"""

from __future__ import annotations

import torch
from torch import nn

from minbert.config import BertConfig
from minbert.heads import BertLMPredictionHead, masked_lm_loss
from minbert.model import init_bert_weights


class SpanBoundaryHead(nn.Module):
    def __init__(self, config: BertConfig, max_span_tokens: int = 20) -> None:
        super().__init__()
        c = config.hidden_size
        self.position_embeddings = nn.Embedding(max_span_tokens, c)
        mlp = nn.Sequential(nn.Linear(3 * c, c), nn.GELU(), nn.LayerNorm(c, eps=config.layer_norm_eps),
                            nn.Linear(c, c), nn.GELU(), nn.LayerNorm(c, eps=config.layer_norm_eps))  # eq. 2
        self.predictions = BertLMPredictionHead(config, transform=mlp)  # y_i, then the tied decoder
        init_bert_weights(self, config)

    def forward(self, hidden_states: torch.Tensor, rows: torch.Tensor, left: torch.Tensor,
                right: torch.Tensor, offsets: torch.Tensor, word_embeddings: torch.Tensor) -> torch.Tensor:
        """hidden_states: (B, T, C). rows, left, right, offsets: (N,) the batch row of each masked token,
        the positions s-1 and e+1 of its span, and i - s. Returns logits (N, V)."""
        offsets = offsets.clamp(max=self.position_embeddings.num_embeddings - 1)
        h0 = torch.cat([hidden_states[rows, left], hidden_states[rows, right],
                        self.position_embeddings(offsets)], dim=-1)  # (N, 3C)
        return self.predictions(h0, word_embeddings)  # (N, V)


def span_targets(spans: list[list[tuple[int, int]]]) -> tuple[torch.Tensor, ...]:
    """Per masked token of every span of every row: (rows, left, right, offsets, positions), each (N,)."""
    rows, left, right, offsets, positions = [], [], [], [], []
    for row, row_spans in enumerate(spans):
        for start, end in row_spans:
            for position in range(start, end + 1):
                rows.append(row)
                left.append(start - 1)
                right.append(end + 1)
                offsets.append(position - start)
                positions.append(position)
    return tuple(torch.tensor(x, dtype=torch.long) for x in (rows, left, right, offsets, positions))


def span_boundary_loss(head: SpanBoundaryHead, hidden_states: torch.Tensor, input_labels: torch.Tensor,
                       targets: tuple[torch.Tensor, ...], word_embeddings: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of the SBO predictions against the original tokens (input_labels: (B, T))."""
    rows, left, right, offsets, positions = targets
    logits = head(hidden_states, rows, left, right, offsets, word_embeddings)  # (N, V)
    return masked_lm_loss(logits.float(), input_labels[rows, positions])  # every one of the N is predicted
