"""The model of tasks.classify: a BERT encoder and a sentence classifier, optionally with label embeddings.

What the classifier reads: the last layer pooled (--pooling), or other layers' [CLS] vectors combined
(--layer-features, features.py); a long text encoded window by window and pooled per text (--chunks);
with --label-embedding, one learned vector per class read by the [CLS] row of chosen layers' attention
(Wang et al. 2020; minbert/label_attention.py).

Shape legend: B batch, N chunks per text, T tokens, C hidden size, D classifier input, M classes.

Read next: ../classify.py (the job that trains it).
"""


from __future__ import annotations

from typing import NamedTuple, Sequence

import torch
from torch import nn

from minbert.label_attention import add_label_attention, parse_label_layers
from minbert.model import BertModel, BertModelOutput
from tasks.data.batching import TokenBatch
from tasks.models.features import ChunkPooling, feature_size, layer_features, select_layers
from minbert.task_heads import SentenceClassifier


class ChunkBatch(NamedTuple):
    """B texts cut into N chunks each (shorter texts padded with empty chunks), each chunk [CLS] ... [SEP]."""

    input_ids: torch.Tensor  # (B, N, T)
    attention_mask: torch.Tensor  # (B, N, T)
    chunk_mask: torch.Tensor  # (B, N): True for real chunks

    def to(self, device) -> "ChunkBatch":
        return ChunkBatch(*(t.to(device) for t in self))


class FeatureClassifier(SentenceClassifier):
    """The classify job's SentenceClassifier: its forward (dropout, then the linear layer) is the parent's;
    only the sentence vector s differs: the last layer pooled, or the chosen layers' [CLS] vectors combined
    (--layer-features, features.py), or one computed already (a text's chunks pooled, --chunks)."""

    def __init__(self, size: int, num_classes: int, dropout: float, pooling: str,
                 feature_layers: tuple[int, ...] | None, layer_combine: str) -> None:
        super().__init__(size, num_classes, dropout, pooling)
        self.feature_layers, self.layer_combine = feature_layers, layer_combine

    def sentence_vector(self, output: BertModelOutput | torch.Tensor,
                        attention_mask: torch.Tensor | None) -> torch.Tensor:
        """output: BertModel's (with its hidden states when layers are combined), or a (B, D) vector
        computed already, taken as it is. Returns s, (B, D)."""
        if isinstance(output, torch.Tensor):
            return output
        if self.feature_layers is None:
            return super().sentence_vector(output, attention_mask)  # the last layer, pooled
        return layer_features(output.hidden_states, self.feature_layers, self.layer_combine)


class ClassifyModel(nn.Module):
    """BERT encoder + sentence classifier, optionally with label-embedding attention in `label_layers`.

    The encoder stays at `self.bert` (saved in Hugging Face format, optimised at the encoder's rate);
    the label embeddings (M x C) sit beside it and, like the classifier, count as a head.
    """

    def __init__(self, bert: BertModel, num_classes: int, dropout: float, pooling: str = "cls",
                 label_layers: str | Sequence[int] | None = None, layer_features: str = "last",
                 layer_combine: str = "concat", chunk_pooling: str | None = None) -> None:
        super().__init__()
        self.bert = bert
        hidden = bert.config.hidden_size
        # None: the last layer, pooled by `pooling`; else [CLS] vectors of these layers
        # (tasks/models/features.py)
        self.feature_layers = (None if layer_features == "last"
                               else select_layers(layer_features, bert.config.num_hidden_layers))
        self.layer_combine = layer_combine
        size = feature_size(hidden, self.feature_layers, layer_combine) if self.feature_layers else hidden
        self.head = FeatureClassifier(size, num_classes, dropout, pooling, self.feature_layers, layer_combine)
        self.chunk_pooling = ChunkPooling(size, chunk_pooling) if chunk_pooling else None
        if label_layers is None:
            self.label_layers: tuple[int, ...] = ()
            self.register_parameter("label_embeddings", None)
        else:
            self.label_layers = parse_label_layers(label_layers, bert.config.num_hidden_layers)
            self.label_embeddings = nn.Parameter(torch.empty(num_classes, bert.config.hidden_size))
            nn.init.normal_(self.label_embeddings, std=bert.config.initializer_range)
            add_label_attention(bert, self.label_embeddings, self.label_layers)

    def encode(self, tokens: TokenBatch, output_attentions: bool = False,
               output_hidden_states: bool = False) -> BertModelOutput:
        return self.bert(tokens.input_ids, tokens.attention_mask, tokens.token_type_ids,
                         output_hidden_states=output_hidden_states, output_attentions=output_attentions)

    def features(self, tokens: TokenBatch) -> torch.Tensor:
        """The classifier's input (B, D): the last layer pooled, or the chosen layers' [CLS] vectors
        combined."""
        output = self.encode(tokens, output_hidden_states=self.feature_layers is not None)
        return self.head.sentence_vector(output, tokens.attention_mask)

    def forward(self, batch: TokenBatch | ChunkBatch) -> torch.Tensor:
        """A (B, T) batch, or a (B, N, T) batch of chunked texts. Returns logits (B, M)."""
        if isinstance(batch, ChunkBatch):
            return self.head(self.chunk_features(batch), None)  # (B, M): dropout, then the linear layer
        output = self.encode(batch, output_hidden_states=self.feature_layers is not None)
        return self.head(output, batch.attention_mask)

    def chunk_features(self, batch: ChunkBatch) -> torch.Tensor:
        """Encode the real chunks only (padding chunks would cost a full forward each), then pool per text."""
        size, chunks, length = batch.input_ids.shape
        real = batch.chunk_mask.reshape(-1).bool()  # (B N,)
        ids = batch.input_ids.reshape(-1, length)[real]
        mask = batch.attention_mask.reshape(-1, length)[real]
        encoded = self.features(TokenBatch(ids, mask, torch.zeros_like(ids)))  # (R, D)
        vectors = encoded.new_zeros(size * chunks, encoded.size(-1))
        vectors[real] = encoded
        return self.chunk_pooling(vectors.reshape(size, chunks, -1), batch.chunk_mask)  # (B, D)
