"""What a classifier reads: the [CLS] vector of one layer or of several, combined (Sun et al. 2019, Table 3),
and, for texts longer than the window, the [CLS] vectors of their chunks, combined (their section 5.3.1).

Layer features (`--layer-features`): last (BERT's default), layer:K (0 = the embeddings), first-4, last-4,
all; several are combined (`--layer-combine`) by concatenation (n x C), the element-wise mean, or the max.

Chunks (`--chunks mean|max|attention`): a text is cut into consecutive chunks of max_length - 2 pieces,
each encoded as `[CLS] chunk [SEP]`, and the chunks' final [CLS] vectors are combined by their mean, their
max, or a learned self-attention pooling; chunks that only pad a batch are masked out of all three.

Shape legend: B batch, N chunks per text, C hidden size.

Read next: classifier.py (the model that reads these features).
"""

from __future__ import annotations

from typing import Sequence

import torch
from torch import nn

from minbert.pooling import attention_pool, max_pool, mean_pool

LAYER_COMBINES = ("concat", "mean", "max")
CHUNK_POOLINGS = ("mean", "max", "attention")


def select_layers(spec: str, num_layers: int) -> tuple[int, ...]:
    """Indices into the encoder's hidden states (0 = embeddings, num_layers = the last layer)."""
    if spec == "last":
        return (num_layers,)
    if spec == "first-4":
        return tuple(range(1, min(4, num_layers) + 1))
    if spec == "last-4":
        return tuple(range(max(1, num_layers - 3), num_layers + 1))
    if spec == "all":
        return tuple(range(1, num_layers + 1))
    if spec.startswith("layer:") and spec[6:].isdigit() and int(spec[6:]) <= num_layers:
        return (int(spec[6:]),)
    raise ValueError(f"layer features must be last, layer:K with 0 <= K <= {num_layers}, first-4, last-4 "
                     f"or all; got {spec!r}")


def feature_size(hidden_size: int, layers: Sequence[int], combine: str) -> int:
    return hidden_size * len(layers) if combine == "concat" else hidden_size


def layer_features(hidden_states: Sequence[torch.Tensor], layers: Sequence[int],
                   combine: str) -> torch.Tensor:
    """The chosen layers' [CLS] vectors (each (B, C)), combined: (B, n C) for concat, else (B, C)."""
    cls = [hidden_states[i][:, 0] for i in layers]
    if combine == "concat":
        return torch.cat(cls, dim=-1)
    stacked = torch.stack(cls, dim=1)  # (B, n, C)
    if combine == "mean":
        return stacked.mean(dim=1)
    if combine == "max":
        return stacked.amax(dim=1)
    raise ValueError(f"layer combine must be one of {LAYER_COMBINES}, got {combine!r}")


def chunk_pieces(pieces: Sequence[int], chunk_size: int, max_chunks: int = 0) -> list[list[int]]:
    """Consecutive chunks of at most chunk_size pieces (at least one chunk, maybe empty); max_chunks > 0 keeps
    the first max_chunks - 1 and the last one (head and tail, as head+tail truncation does for pieces)."""
    if chunk_size < 1:
        raise ValueError(f"chunk size must be at least 1, got {chunk_size}")
    chunks = [list(pieces[i:i + chunk_size]) for i in range(0, len(pieces), chunk_size)] or [[]]
    if max_chunks and len(chunks) > max_chunks:
        chunks = chunks[:max_chunks - 1] + chunks[-1:]
    return chunks


class ChunkPooling(nn.Module):
    """Combine the [CLS] vectors of a text's chunks (B, N, C) into one (B, C), padded chunks masked."""

    def __init__(self, hidden_size: int, how: str = "mean") -> None:
        super().__init__()
        if how not in CHUNK_POOLINGS:
            raise ValueError(f"chunk pooling must be one of {CHUNK_POOLINGS}, got {how!r}")
        self.how = how
        self.score = nn.Linear(hidden_size, 1) if how == "attention" else None

    def forward(self, chunks: torch.Tensor, chunk_mask: torch.Tensor) -> torch.Tensor:
        """chunks: (B, N, C); chunk_mask: (B, N), True for real chunks (each text has at least one)."""
        # Chunks are to a text what tokens are to a sentence: the sentence poolings apply as they are.
        if self.how == "mean":
            return mean_pool(chunks, chunk_mask)
        if self.how == "max":
            return max_pool(chunks, chunk_mask)
        return attention_pool(chunks, chunk_mask, self.score(chunks).squeeze(-1))  # scores (B, N)
