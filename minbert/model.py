"""BertModel: embeddings, a stack of transformer layers, and the pooler (BERT paper §3, Figure 1).

The model knows nothing about tasks: it maps token ids to one contextual vector per token
(`last_hidden_state`) and one vector per sequence (`pooler_output`, tanh(W h_[CLS] + b), the input of
BERT's next-sentence head). Pre-training heads live in heads.py, fine-tuning heads in task_heads.py.

Loading and saving (`BertModel.from_pretrained`, `save_pretrained`) and the rest of what a `transformers`
user asks of a model (`dtype`, `num_parameters()`, ...) come from the base class of minbert.loading.pretrained;
the output reads as an attribute (`out.last_hidden_state`), a key (`out["last_hidden_state"]`) or an index
(`out[0]`), as in `transformers`.

Shape legend: B batch, T tokens, C hidden size, H heads, L layers.

Read next: heads.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from minbert.attention import check_kernel_name
from minbert.config import BertConfig
from minbert.embeddings import BertEmbeddings
from minbert.encoder import BertEncoder
from minbert.loading.pretrained import BertPreTrainedModel, ModelOutput


@dataclass
class BertModelOutput(ModelOutput):
    last_hidden_state: torch.Tensor  # (B, T, C)
    pooler_output: torch.Tensor | None = None  # (B, C); None without the pooling layer
    hidden_states: tuple[torch.Tensor, ...] | None = None  # L + 1 tensors (B, T, C), when asked for
    attentions: tuple[torch.Tensor, ...] | None = None  # L tensors (B, H, T, T), when asked for


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


class BertModel(BertPreTrainedModel):
    """The BERT encoder: BertEmbeddings -> BertEncoder (L x BertLayer) -> BertPooler.

    attn_implementation: "sdpa" (the default) or "eager" (the kernel students write). The fast path for
    padded batches, which runs on their real tokens only, is a subclass: minbert.fast.unpadded's
    UnpaddedBertModel.
    add_pooling_layer=False leaves the pooler out (pooler_output is then None), as in transformers.
    """

    config_class = BertConfig  # what from_pretrained reads config.json into

    def __init__(self, config: BertConfig, attn_implementation: str = "sdpa",
                 add_pooling_layer: bool = True) -> None:
        super().__init__()
        self.config = config
        self.attn_implementation = check_kernel_name(attn_implementation)
        self.embeddings = BertEmbeddings(config)
        self.encoder = BertEncoder(config, attn_implementation)
        self.pooler = BertPooler(config) if add_pooling_layer else None
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
        """
        # Every argument's type, shape, dtype and range, checked once (by the base class).
        input_ids, attention_mask, token_type_ids, inputs_embeds = self.check_inputs(
            input_ids, attention_mask, token_type_ids, inputs_embeds,
            output_hidden_states=output_hidden_states, output_attentions=output_attentions)
        embedding_output = self.embeddings(input_ids, token_type_ids, inputs_embeds)  # (B, T, C)
        B, T, _ = embedding_output.shape
        if attention_mask is None:
            attention_mask = torch.ones(B, T, dtype=torch.long, device=embedding_output.device)
        additive_mask = extended_attention_mask(attention_mask, embedding_output.dtype)  # (B, 1, 1, T)
        encoded = self.encoder(embedding_output, additive_mask, output_hidden_states, output_attentions)
        pooled = self.pooler(encoded.last_hidden_state) if self.pooler is not None else None
        return BertModelOutput(encoded.last_hidden_state, pooled, encoded.hidden_states, encoded.attentions)


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
