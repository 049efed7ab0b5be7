"""BertModel: embeddings, a stack of transformer layers, and the pooler (BERT paper §3, Figure 1).

The model knows nothing about tasks: it maps token ids to one contextual vector per token
(`last_hidden_state`) and one vector per sequence (`pooler_output`, tanh(W h_[CLS] + b), the input of
BERT's next-sentence head). Task heads live in tasks/, pre-training heads in heads.py.

Shape legend: B batch, T tokens, C hidden size, H heads, L layers, N real tokens of a padded batch.

Read next: unpadded.py (how a padded batch runs without its padding), then heads.py.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

import torch
from torch import nn

from minbert.attention import BertSelfAttention, check_kernel_name
from minbert.config import BertConfig
from minbert.embeddings import BertEmbeddings
from minbert.layer import BertLayer
from minbert.unpadded import Packing


class EncoderOutput(NamedTuple):
    last_hidden_state: torch.Tensor  # (B, T, C)
    hidden_states: tuple[torch.Tensor, ...] | None  # L + 1 tensors (B, T, C): embeddings, then each layer
    attentions: tuple[torch.Tensor, ...] | None  # L tensors (B, H, T, T)


class BertModelOutput(NamedTuple):
    last_hidden_state: torch.Tensor  # (B, T, C)
    pooler_output: torch.Tensor  # (B, C)
    hidden_states: tuple[torch.Tensor, ...] | None
    attentions: tuple[torch.Tensor, ...] | None


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


class BertPooler(nn.Module):
    """tanh(W h_[CLS] + b): the sequence summary that BERT's next-sentence head reads (§3.1, Figure 1)."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """(B, T, C) -> (B, C): tanh(W h_[CLS] + b)."""
        # Hint: only the first position, [CLS], is read; the activation is tanh (BERT's TF code), not GELU.
        # BEGIN SOLUTION
        return torch.tanh(self.dense(hidden_states[:, 0]))  # (B, T, C) -> (B, C): the [CLS] position
        # END SOLUTION


def extended_attention_mask(attention_mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """(B, T) mask with 1 = token, 0 = padding -> additive (B, 1, 1, T) mask, built once per batch.

    0 where a key is a real token and the most negative finite number where it is padding, so that
    after the softmax padding gets exactly zero weight (exp underflows) and no NaN appears (-inf would
    make a row of all padding NaN). It broadcasts over heads (dim 1) and queries (dim 2).
    """
    if attention_mask.dim() != 2:
        raise ValueError(f"attention_mask must have shape (B, T), got {tuple(attention_mask.shape)}")
    # Hints: 1. m'[b, 0, 0, t] = (1 - m[b, t]) * min(dtype): the keys are the last axis, and the two axes
    #           of size 1 broadcast over the H heads and the T queries of the scores (B, H, T, T)
    #        2. in `dtype`, whose own most negative finite number it is (float16's is -65504)
    # BEGIN SOLUTION
    keep = attention_mask[:, None, None, :].to(dtype)  # (B, 1, 1, T)
    return (1.0 - keep) * torch.finfo(dtype).min
    # END SOLUTION


class BertModel(nn.Module):
    """The BERT encoder: BertEmbeddings -> BertEncoder (L x BertLayer) -> BertPooler.

    attn_implementation: "sdpa" (the default, as from_pretrained's), "unpadded" (a padded batch runs on its
    real tokens only, see unpadded.py; on 2 CPU cores, batches of 32 with half their positions padding ran
    forward and backward about 2x faster than with "sdpa", MiniLM and bert-base sizes, bench/model_speed.py;
    a batch without padding takes the padded path; its padding positions come back as 0), or "eager" (the
    kernel students write).
    """

    def __init__(self, config: BertConfig, attn_implementation: str = "sdpa",
                 add_pooling_layer: bool = True) -> None:
        super().__init__()
        self.config = config
        self.attn_implementation = check_kernel_name(attn_implementation)
        self.embeddings = BertEmbeddings(config)
        self.encoder = BertEncoder(config, attn_implementation)
        self.pooler = BertPooler(config) if add_pooling_layer else None
        self.load_report = None  # from_pretrained's checkpoint.LoadReport: what loading did
        init_bert_weights(self, config)

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ) -> BertModelOutput:
        """Encode a batch.

        input_ids: (B, T) token ids (or inputs_embeds: (B, T, C) word vectors given directly).
        attention_mask: (B, T), 1 = token, 0 = padding; default all tokens.
        token_type_ids: (B, T) segment ids; default all 0.
        output_hidden_states: also return the embeddings and every layer's output (L + 1 tensors).
        output_attentions: also return every layer's attention probabilities (uses the eager kernel).

        With attn_implementation "unpadded", a batch with padding runs on its real tokens only
        (unpadded.py) and its outputs come back padded, with 0 at the padding positions (the padded
        path computes vectors there that mean nothing). Asking for the attention probabilities takes
        the padded path.
        """
        for argument, value in (("input_ids", input_ids), ("attention_mask", attention_mask),
                                ("token_type_ids", token_type_ids), ("inputs_embeds", inputs_embeds)):
            if value is not None and not isinstance(value, torch.Tensor):
                raise TypeError(f"{argument} must be a torch.Tensor, got {type(value).__name__}; the "
                                "tokenizer makes them: model(**tokenizer(texts, padding=True))")
        packing = None
        if self.attn_implementation == "unpadded" and attention_mask is not None and not output_attentions:
            packing = Packing.from_mask(attention_mask)  # None if nothing is padded
        embedding_output = self.embeddings(input_ids, token_type_ids, inputs_embeds,
                                           packing)  # (B, T, C), or (1, N, C) packed
        if packing is not None:
            encoded = self.encoder(embedding_output, packing, output_hidden_states)  # (1, N, C) throughout
            encoded = EncoderOutput(packing.pad(encoded.last_hidden_state),  # (1, N, C) -> (B, T, C)
                                    tuple(map(packing.pad, encoded.hidden_states or ())) or None, None)
        else:
            B, T, _ = embedding_output.shape
            if attention_mask is None:
                attention_mask = torch.ones(B, T, dtype=torch.long, device=embedding_output.device)
            elif attention_mask.shape != (B, T):
                raise ValueError(f"attention_mask has shape {tuple(attention_mask.shape)}, but the input "
                                 f"has shape {(B, T)}")
            additive_mask = extended_attention_mask(attention_mask, embedding_output.dtype)
            encoded = self.encoder(embedding_output, additive_mask, output_hidden_states, output_attentions)
        pooled = self.pooler(encoded.last_hidden_state) if self.pooler is not None else None
        return BertModelOutput(encoded.last_hidden_state, pooled, encoded.hidden_states, encoded.attentions)

    def set_attn_implementation(self, name: str) -> "BertModel":
        """Switch every layer's attention kernel ("eager", "sdpa", "unpadded"); the weights are unchanged."""
        self.attn_implementation = check_kernel_name(name)
        for module in self.modules():
            if isinstance(module, BertSelfAttention):
                module.attn_implementation = name
        return self

    @classmethod
    def from_pretrained(cls, name_or_path: str | os.PathLike | None = None, *, revision: str = "main",
                        attn_implementation: str = "sdpa", return_report: bool = False):
        """Load a Hugging Face-format checkpoint, in eval mode: `transformers`' name for hub.load_pretrained.

        name_or_path: a directory (config.json and the weights), a name in the local Hugging Face cache
        (at `revision`), or None for the embedded all-MiniLM-L6-v2; hub.py says where it looks (it never
        downloads). What loading did (fix-ups, fresh heads, ignored keys) is the LoadReport kept at
        `model.load_report`; return_report=True returns (model, report) instead. Freshly initialised
        weights are warned about, and anything else that does not fit is a CheckpointError naming the key.
        """
        from minbert.hub import load_pretrained  # imported late: hub.py imports this module

        model, report = load_pretrained(name_or_path, cls, attn_implementation, revision)
        return (model, report) if return_report else model

    def save_pretrained(self, directory: str | os.PathLike, *, tokenizer: object | None = None) -> Path:
        """Write config.json and model.safetensors (and the tokenizer's files, if given) into `directory`,
        in the format from_pretrained and `transformers` read (checkpoint.save_model)."""
        from minbert.checkpoint import save_model  # imported late: checkpoint.py imports this module

        return save_model(self, directory, tokenizer=tokenizer)


def init_bert_weights(module: nn.Module, config: BertConfig) -> None:
    """BERT's initialisation (TF code: truncated normal, here normal as in Hugging Face), called once.

    Linear and embedding weights ~ N(0, initializer_range^2), biases 0, the padding embedding 0,
    LayerNorm scale 1 and shift 0.
    """
    for m in module.modules():
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, mean=0.0, std=config.initializer_range)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, mean=0.0, std=config.initializer_range)
            if m.padding_idx is not None:
                with torch.no_grad():
                    m.weight[m.padding_idx].zero_()
        elif isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
