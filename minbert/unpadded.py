"""Unpadded execution: a padded batch runs as one row of its real tokens, and attention per sequence.

A batch of B sequences padded to the longest, T, holds B * T positions, but only N of them are tokens;
with the lengths of real data (most sentences far shorter than the longest in their batch) N is often
half of B * T or less. Everything in BERT except attention works on each token alone (the embeddings,
every Linear, LayerNorm, GELU, dropout), so it may just as well run on the N real tokens, packed into
one row (1, N, C), and skip the padding's share of the work. Only attention mixes tokens: there each
sequence attends over its own slice of the row, without padding and without a mask (the "unpadded"
kernel in attention.py). FlashAttention's variable-length path (`unpad_input` / `pad_input`, one kernel
over cumulative sequence lengths) and ModernBERT (Warner et al. 2024, §2.1.2) work the same way.

`Packing` records where the real tokens sit. BertModel builds one per batch when its attn_implementation
is "unpadded" (model.py) and hands it to the layers in place of the additive mask; the embeddings
gather the real tokens with it, the attention kernel splits the row by its lengths, and the model pads
its outputs again. The layers' own code is unchanged: it works on any leading shape.

Finding the real tokens is the one step whose result decides the shapes that follow, so it reads the
sequence lengths back to the host, once per batch (on an accelerator, one wait per batch, as
FlashAttention's unpadding has).

Shape legend: B batch, T tokens (padded length), N real tokens in the batch, C hidden size, H heads,
D head size, L_b the length of sequence b.

Read next: heads.py.
"""

from __future__ import annotations

from typing import NamedTuple

import torch


class Packing(NamedTuple):
    """Where the N real tokens of a padded (B, T) batch sit: row b's real tokens are the b-th slice."""

    indices: torch.Tensor  # (N,) flat index b * T + t of each real token, row after row
    positions: torch.Tensor  # (N,) each real token's position t in its padded row
    lengths: tuple[int, ...]  # (L_1, ..., L_B): real tokens per row, on the host, summing to N
    batch_shape: tuple[int, int]  # (B, T) of the padded batch

    @classmethod
    def from_mask(cls, attention_mask: torch.Tensor) -> "Packing | None":
        """The packing of a (B, T) mask (1 = token, 0 = padding); None when nothing is padded.

        Any pattern of padding works (left, right or in between): each real token keeps the position
        it has in its padded row, and attends to the real tokens of its row, exactly as when padded.
        """
        if attention_mask.dim() != 2:
            raise ValueError(f"attention_mask must have shape (B, T), got {tuple(attention_mask.shape)}")
        B, T = attention_mask.shape
        keep = attention_mask.reshape(-1) != 0  # (B * T,)
        lengths = keep.view(B, T).sum(dim=1).tolist()  # the host read: shapes below depend on it
        if sum(lengths) == B * T:
            return None  # nothing to skip: the padded path does the same work without the gathers
        # nonzero_static: N is known from the lengths, so this needs no second read of the mask.
        indices = keep.nonzero_static(size=sum(lengths)).squeeze(1)  # (N,), row-major: rows contiguous
        return cls(indices, indices % T, tuple(lengths), (B, T))

    def unpad(self, x: torch.Tensor | None) -> torch.Tensor | None:
        """(B, T, ...) -> (1, N, ...): the real tokens of a padded tensor, as one row. None stays None."""
        if x is None:
            return None
        B, T = self.batch_shape
        if tuple(x.shape[:2]) != (B, T):
            raise ValueError(f"attention_mask has shape {(B, T)}, but the input has shape "
                             f"{tuple(x.shape[:2])}")
        return x.reshape(B * T, *x.shape[2:])[self.indices][None]  # (B * T, ...) -> (N, ...) -> (1, N, ...)

    def pad(self, x: torch.Tensor) -> torch.Tensor:
        """(1, N, ...) -> (B, T, ...), with 0 at the padding positions."""
        B, T = self.batch_shape
        flat = x.new_zeros(B * T, *x.shape[2:])  # (B * T, ...)
        return flat.index_copy(0, self.indices, x[0]).view(B, T, *x.shape[2:])
