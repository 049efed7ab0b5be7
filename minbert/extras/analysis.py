"""What the layers of a trained encoder do: the measures of Manginas et al. (2020), section 5.

- angular distance between the [CLS] vectors of two layers, arccos(cos(u, v)) / pi, in [0, 1]
  (0: same direction, 0.5: orthogonal), averaged over documents: a (L+1) x (L+1) matrix, layer 0 being
  the embeddings. Structured variants should push [CLS] further between the layers that feed levels.
- entropy of the attention, per layer: the heads' distributions averaged, then the entropy of each
  real token's row (in nats), averaged over tokens and documents. High: attention spread out.
- KL divergence between the attention distributions of two heads of one layer, averaged over head
  pairs (both orders), rows and documents: how different the heads of a layer are.
- KL divergence between the head-averaged attention of two layers: a L x L matrix (row: P, column: Q in
  KL(P || Q)); how much the attention pattern changes from layer to layer.

Padding is never counted: rows of padded query positions are left out, and padded keys have probability
exactly 0 in every distribution (0 log 0 = 0).

Shape legend: B batch, H heads, T tokens, C hidden size, L layers.

Read next: ../tasks/hierarchical.py (which runs this on the dev set of every variant).
"""

from __future__ import annotations

import math
from typing import Iterable

import torch

EPS = 1e-12  # floor for probabilities inside a log: a key attended by P but not at all by Q


def angular_distance(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """arccos(cos(u, v)) / pi for rows of u and v (..., C) -> (...)."""
    cosine = torch.nn.functional.cosine_similarity(u, v, dim=-1, eps=EPS)
    return torch.arccos(cosine.clamp(-1.0, 1.0)) / math.pi


def entropy(p: torch.Tensor) -> torch.Tensor:
    """-sum p log p over the last dimension (0 log 0 = 0). (..., T) -> (...)."""
    return -torch.xlogy(p, p).sum(dim=-1)


def kl_divergence(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """KL(p || q) = sum p (log p - log q) over the last dimension. (..., T), (..., T) -> (...)."""
    return (torch.xlogy(p, p) - torch.xlogy(p, q.clamp(min=EPS))).sum(dim=-1)


def pairwise_kl(p: torch.Tensor) -> torch.Tensor:
    """KL(p_i || p_j) for every pair of distributions along the second-to-last dimension.

    p: (..., N, T) -> (..., N, N), entry [i, j] = KL(p_i || p_j); equal to `kl_divergence` pair by pair.
    """
    self_term = torch.xlogy(p, p).sum(dim=-1)  # (..., N): sum p_i log p_i
    cross = p @ p.clamp(min=EPS).log().transpose(-1, -2)  # (..., N, N): sum p_i log p_j
    return self_term[..., :, None] - cross


class LayerStatistics:
    """Running sums of the four measures over batches; `result()` gives the averages."""

    def __init__(self) -> None:
        self.angle_sum: torch.Tensor | None = None
        self.documents = 0
        self.entropy_sum = self.head_kl_sum = self.layer_kl_sum = None
        self.rows = 0

    def add(self, hidden_states: Iterable[torch.Tensor], attentions: Iterable[torch.Tensor],
            attention_mask: torch.Tensor) -> None:
        """hidden_states: L + 1 tensors (B, T, C); attentions: L tensors (B, H, T, T);
        attention_mask: (B, T)."""
        cls = torch.stack([h[:, 0] for h in hidden_states], dim=1).double()  # (B, L+1, C)
        angles = angular_distance(cls[:, :, None], cls[:, None, :]).sum(dim=0)  # (L+1, L+1)
        self.angle_sum = angles if self.angle_sum is None else self.angle_sum + angles
        self.documents += cls.size(0)

        probs = torch.stack(list(attentions), dim=1).float()  # (B, L, H, T, T)
        real = attention_mask.bool()  # (B, T): query rows that count
        rows = probs.permute(0, 3, 1, 2, 4)[real]  # (R, L, H, T): every real query row
        mean_heads = rows.mean(dim=2)  # (R, L, T)
        num_heads = rows.size(2)
        entropies = entropy(mean_heads).double().sum(dim=0)  # (L,)
        # KL(p_h || p_g) = sum p_h log p_h - sum p_h log p_g: the second term of every pair at once is a
        # matrix product over the keys, which never builds the (R, L, H, H, T) tensor of all pairs.
        pairs = pairwise_kl(rows)  # (R, L, H, H); diagonal 0
        head_kl = pairs.double().sum(dim=(0, 2, 3)) / max(1, num_heads * (num_heads - 1))  # (L,)
        layer_kl = pairwise_kl(mean_heads).double().sum(dim=0)  # (L, L)
        if self.entropy_sum is None:
            self.entropy_sum, self.head_kl_sum, self.layer_kl_sum = entropies, head_kl, layer_kl
        else:
            self.entropy_sum += entropies
            self.head_kl_sum += head_kl
            self.layer_kl_sum += layer_kl
        self.rows += rows.size(0)

    def result(self) -> dict[str, list]:
        if not self.documents:
            raise ValueError("no batches were added")
        return {"cls_angular_distance": (self.angle_sum / self.documents).tolist(),
                "attention_entropy": (self.entropy_sum / self.rows).tolist(),
                "head_kl": (self.head_kl_sum / self.rows).tolist(),
                "layer_kl": (self.layer_kl_sum / self.rows).tolist(),
                "documents": self.documents, "token_rows": self.rows}
