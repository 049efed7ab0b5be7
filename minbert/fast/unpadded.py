"""Unpadded execution: a padded batch runs as one row of its real tokens, and attention per sequence.

A batch padded to the longest holds B * T positions, of which often half or less are tokens. Everything in
a layer but attention works on each token alone, so it runs on the N real tokens packed into one row
(1, N, C); only attention mixes tokens, and there each sequence attends over its own slice, without
padding or mask. FlashAttention's variable-length path and ModernBERT (Warner et al. 2024, §2.1.2) work
the same way.

This file subclasses the readable modules and changes none of them: `UnpaddedSelfAttention` overrides
BertSelfAttention's `attend` hook (the mask it is handed is then the (B,) lengths, on the host), and
`UnpaddedBertModel` packs its inputs (with each token's padded position as `position_ids`), runs the same
embeddings and layers on the row, and pads the outputs again, with 0 at the padding, before the pooler. Its
weights and checkpoints are BertModel's. Finding the real tokens decides the shapes that follow, so it
reads the lengths back to the host once per batch (as FlashAttention's unpadding does).

Shape legend: B batch, T tokens (padded length), N real tokens in the batch, C hidden size, H heads,
D head size, L_b the length of sequence b.

Read next: dropout.py (a cheaper random mask).
"""

from __future__ import annotations

import contextlib
from typing import NamedTuple

import torch
from torch import nn

from minbert.attention import BertSelfAttention, attention_scores, sdpa_attention
from minbert.config import BertConfig
from minbert.fast.dropout import Dropout, keep_masks
from minbert.model import BertModel, BertModelOutput


class Packing(NamedTuple):
    """Where the N real tokens of a padded (B, T) batch sit: row b's real tokens are the b-th slice."""

    indices: torch.Tensor  # (N,) flat index b * T + t of each real token, row after row
    positions: torch.Tensor  # (1, N) each real token's position t in its padded row
    lengths: tuple[int, ...]  # (L_1, ..., L_B): real tokens per row, on the host, summing to N
    batch_shape: tuple[int, int]  # (B, T) of the padded batch

    @classmethod
    def from_mask(cls, attention_mask: torch.Tensor) -> "Packing | None":
        """The packing of a (B, T) mask (1 = token, 0 = padding); None when nothing is padded.

        Any pattern of padding works (left, right or in between): each real token keeps the position
        it has in its padded row, and attends to the real tokens of its row, exactly as when padded.
        """
        B, T = attention_mask.shape
        keep = attention_mask.reshape(B * T) != 0  # (B * T,)
        lengths = keep.view(B, T).sum(dim=1).tolist()  # the host read: shapes below depend on it
        if sum(lengths) == B * T:
            return None  # nothing to skip: the padded path does the same work without the gathers
        # nonzero_static: N is known from the lengths, so this needs no second read of the mask.
        indices = keep.nonzero_static(size=sum(lengths)).squeeze(1)  # (N,), row-major: rows contiguous
        return cls(indices, (indices % T)[None], tuple(lengths), (B, T))

    def unpad(self, x: torch.Tensor | None) -> torch.Tensor | None:
        """(B, T, ...) -> (1, N, ...): the real tokens of a padded tensor, as one row. None stays None."""
        if x is None:
            return None
        B, T = self.batch_shape
        return x.reshape(B * T, *x.shape[2:])[self.indices][None]  # (B * T, ...) -> (N, ...) -> (1, N, ...)

    def pad(self, x: torch.Tensor) -> torch.Tensor:
        """(1, N, ...) -> (B, T, ...), with 0 at the padding positions."""
        B, T = self.batch_shape
        flat = x.new_zeros(B * T, *x.shape[2:])  # (B * T, ...)
        return flat.index_copy(0, self.indices, x[0]).view(B, T, *x.shape[2:])


def unpadded_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, lengths: tuple[int, ...],
                       dropout: nn.Module | None = None) -> torch.Tensor:
    """The sdpa kernel, sequence by sequence, for a batch packed into one row of its N real tokens.

    query, key, value: (1, H, N, D); sequence b is the b-th slice of lengths[b] = L_b tokens and attends
    only to itself, with no padding and so no mask. Returns the context (1, H, N, D).
    """
    # Why a loop of B calls: on 2 CPU cores, bert-base heads, 32 sequences of 2-128 tokens, forward and
    # backward took 25 ms this way, 53 ms padded, 71 ms re-padded around the packed row, 203 ms with a
    # block-diagonal (N, N) mask, 304 ms as nested tensors. torch.split's backward is one concatenation.
    dtype = query.dtype
    # Why float32 when training under bf16 autocast on a CPU: torch 2.13's CPU flash-attention backward
    # ran 2-3x slower in bf16 than in float32 (51 against 19 ms a layer, MiniLM heads, 32 sequences of
    # 2-128 tokens); the forward alone is faster in bf16, so only training pays for the casts.
    upcast = query.device.type == "cpu" and dtype in (torch.bfloat16, torch.float16) and query.requires_grad
    with torch.autocast("cpu", enabled=False) if upcast else contextlib.nullcontext():
        query, key, value = (x.to(torch.float32 if upcast else dtype) for x in (query, key, value))
        if type(dropout) is Dropout and dropout.training and 0.0 < dropout.p < 1.0 and not query.is_cuda:
            # training with minbert's dropout (a job puts it in the model): the same numbers, less work
            return dropped_out_attention(query, key, value, lengths, dropout.p).to(dtype)
        pieces = zip(*(x.split(lengths, dim=2) for x in (query, key, value)))  # B x (1, H, L_b, D)
        contexts = [sdpa_attention(q, k, v, None, dropout)[0] for q, k, v in pieces]
        return torch.cat(contexts, dim=2).to(dtype)  # B x (1, H, L_b, D) -> (1, H, N, D)


def dropped_out_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                          lengths: tuple[int, ...], p: float) -> torch.Tensor:
    """Training on a CPU, what sdpa_attention computes for each sequence (the eager kernel with the fast
    dropout), bit for bit, in fewer and larger operations. query, key, value: (1, H, N, D), sequence b the
    b-th slice of lengths[b] tokens; returns (1, H, N, D). All the dropout masks come from one draw
    (keep_masks: the same numbers as one draw per sequence); sequences of one length attend in one batched
    product (a bucketed batch of 64 holds about 20 lengths; tests/test_unpadded.py holds the results equal
    bit for bit); no zero mask is added (x + 0.0 is x).
    """
    H = query.size(1)
    masks = keep_masks([(1, H, L, L) for L in lengths], p, query.dtype, query.device)  # B x (1, H, L_b, L_b)
    pieces = list(zip(*(x.split(lengths, dim=2) for x in (query, key, value))))  # B x (1, H, L_b, D)
    groups: dict[int, list[int]] = {}  # length -> the sequences of that length
    for b, length in enumerate(lengths):
        groups.setdefault(length, []).append(b)
    contexts: list[torch.Tensor] = [query] * len(lengths)  # each replaced below
    for members in groups.values():
        q, k, v = (torch.cat([pieces[b][i] for b in members]) for i in range(3))  # G x (1, H, L, D) -> (G, H, L, D)
        mask = torch.cat([masks[b] for b in members])  # (G, H, L, L)
        context = (attention_scores(q, k).softmax(dim=-1) * mask) @ v  # (G, H, L, D)
        for b, piece in zip(members, context.split(1)):
            contexts[b] = piece  # (1, H, L, D)
    return torch.cat(contexts, dim=2)  # B x (1, H, L_b, D) -> (1, H, N, D)


class UnpaddedSelfAttention(BertSelfAttention):
    """BertSelfAttention that attends a packed row sequence by sequence (unpadded_attention).

    Its `attention_mask` is the (B,) lengths of the sequences laid end to end in the row (1, N), on the
    host. Given a padded batch's additive (B, 1, 1, T) mask instead (no padding, or probabilities asked
    for), it attends as BertSelfAttention does.
    """

    def __init__(self, config: BertConfig) -> None:
        super().__init__(config, "sdpa")

    def attend(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
               attention_mask: torch.Tensor,
               output_attentions: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        if attention_mask.dim() != 1:  # a padded batch's additive mask
            return super().attend(query, key, value, attention_mask, output_attentions)
        if output_attentions:
            raise ValueError("a packed row has no (T, T) attention probabilities: UnpaddedBertModel asked "
                             "for them runs the padded batch")
        return unpadded_attention(query, key, value, tuple(attention_mask.tolist()), self.dropout), None


class UnpaddedBertModel(BertModel):
    """BertModel on a padded batch's real tokens only: pack the inputs, embed and encode, pad back.

    About 2x faster forward and backward than "sdpa" on 2 CPU cores for batches half padding (docs/results.md,
    "The model"); its parameters and checkpoints are BertModel's. A batch without padding, or a call asking
    for the attention probabilities, takes BertModel's path unchanged.
    """

    def __init__(self, config: BertConfig, attn_implementation: str = "unpadded",
                 add_pooling_layer: bool = True) -> None:
        # The argument is there so that from_pretrained(..., attn_implementation=...) reads the same for
        # both classes; a packed row needs the attention that splits it by sequence, so no other is taken.
        if attn_implementation != "unpadded":
            raise ValueError(f"UnpaddedBertModel runs the 'unpadded' attention only, got "
                             f"{attn_implementation!r}; BertModel runs the others")
        super().__init__(config, "sdpa", add_pooling_layer)
        for layer in self.encoder.layer:
            # Built on the meta device, so no weights are drawn (UnpaddedBertModel(config) draws what
            # BertModel(config) does); the layer's own initialised ones move in.
            with torch.device("meta"):
                attention = UnpaddedSelfAttention(config)
            attention.load_state_dict(layer.attention.self.state_dict(), assign=True)
            layer.attention.self = attention
        self.attn_implementation = attn_implementation

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ) -> BertModelOutput:
        """BertModel.forward's arguments and outputs; the outputs are 0 at the padding positions (the
        padded path computes vectors there that mean nothing)."""
        packing = None  # a mask that is no (B, T) tensor is BertModel's to refuse
        if isinstance(attention_mask, torch.Tensor) and attention_mask.dim() == 2 and not output_attentions:
            packing = Packing.from_mask(attention_mask)
        if packing is None:  # nothing to pack: BertModel's path, which checks the arguments
            return super().forward(input_ids, attention_mask, token_type_ids, inputs_embeds,
                                   output_hidden_states, output_attentions)
        # The arguments checked once, as BertModel's are: a mask the checks refuse (one holding 2) may have
        # been read above, but goes no further.
        input_ids, attention_mask, token_type_ids, inputs_embeds = self.check_inputs(
            input_ids, attention_mask, token_type_ids, inputs_embeds,
            output_hidden_states=output_hidden_states, output_attentions=output_attentions)
        input_ids, token_type_ids, inputs_embeds = map(packing.unpad, (input_ids, token_type_ids,
                                                                       inputs_embeds))  # (1, N, ...)
        embedding_output = self.embeddings(input_ids, token_type_ids, inputs_embeds,
                                           position_ids=packing.positions)  # (1, N, C)
        # (1, N, C) through every layer; the lengths take the mask's place, for UnpaddedSelfAttention.
        lengths = torch.tensor(packing.lengths, device="cpu")  # (B,)
        encoded = self.encoder(embedding_output, lengths, output_hidden_states)
        last_hidden_state = packing.pad(encoded.last_hidden_state)  # (1, N, C) -> (B, T, C)
        hidden_states = tuple(map(packing.pad, encoded.hidden_states)) if output_hidden_states else None
        pooled = self.pooler(last_hidden_state) if self.pooler is not None else None
        return BertModelOutput(last_hidden_state, pooled, hidden_states, None)


def model_class(attn_implementation: str) -> type[BertModel]:
    """The class that runs a kernel: UnpaddedBertModel for "unpadded" (it packs the batch before the
    embeddings), BertModel for the others, as in model_class(kernel).from_pretrained(path,
    attn_implementation=kernel)."""
    return UnpaddedBertModel if attn_implementation == "unpadded" else BertModel
