"""BERT's pre-training heads: masked-LM and next-sentence prediction, and BertForPreTraining.

BERT paper §3.1: the masked-LM head predicts the original token at masked positions (Task #1) and the
next-sentence head classifies whether sentence B followed sentence A (Task #2). The loss is the sum of
the two cross-entropies. The masked-LM decoder is tied to the word embeddings (as in the TF code and
Press & Wolf 2017): logits = transform(h) E^T + b, so it owns only the bias b.

Names mirror the checkpoint: bert.*, cls.predictions.transform.*, cls.predictions.bias,
cls.seq_relationship.*.

Shape legend: B batch, T tokens, C hidden size, V vocabulary size.

Read next: masking.py (what the masked-LM head is trained to predict).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from minbert.config import BertConfig
from minbert.loading.pretrained import BertPreTrainedModel, ModelOutput
from minbert.model import BertModel, init_bert_weights

IGNORE_INDEX = -100  # label of positions that are not predicted (PyTorch's cross_entropy default)


class BertPredictionHeadTransform(nn.Module):
    """Dense, GELU, LayerNorm: the masked-LM head's hidden layer."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.transform_act_fn = nn.GELU(approximate="none")  # the exact erf GELU, as in layer.py (HF's name)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.transform_act_fn(self.dense(hidden_states)))  # (..., C)


class BertLMPredictionHead(nn.Module):
    """transform(h) E^T + b, where E is the word embedding matrix (tied) and b the head's own bias."""

    def __init__(self, config: BertConfig, transform: nn.Module | None = None) -> None:
        super().__init__()
        # Another objective can decode through the same tied decoder from its own hidden layer (SpanBERT's
        # span-boundary head, pretrain.span_boundary); BERT's masked-LM head uses this one.
        self.transform = BertPredictionHeadTransform(config) if transform is None else transform
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, hidden_states: torch.Tensor, word_embeddings: torch.Tensor) -> torch.Tensor:
        """hidden_states: (..., C); word_embeddings: (V, C). Returns logits (..., V)."""
        # Hints: logits = transform(h) E^T + b: (..., C) @ (C, V) + (V,). The decoder has no matrix of its
        # own: it is the word embedding matrix E (tied); only the bias b is the head's. Do not skip the
        # transform (dense, GELU, LayerNorm): the checkpoint's decoder expects its output.
        # BEGIN SOLUTION
        return F.linear(self.transform(hidden_states), word_embeddings, self.bias)
        # END SOLUTION


def masked_lm_loss(prediction_logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """BERT's masked-LM loss: the mean cross-entropy over the predicted positions only (BERT §A.1).

    prediction_logits: (..., V), scores for every position: (B, T, V) from BertForPreTraining, or (N, V)
    from pre-training (pretrain.run decodes only the N masked positions); labels: the same positions
    without V, (B, T) or (N,): the original token id where a position is predicted and IGNORE_INDEX (-100)
    everywhere else. Returns a scalar; with no predicted position at all (every label IGNORE_INDEX, or
    N = 0) it is 0, still attached to the logits so that backward() runs and adds nothing, not the NaN
    of a mean over no positions (a batch with nothing masked must not spoil the pre-training loss).
    """
    # Hints: 1. L = -1/N sum over the N predicted positions of log softmax(z)[y]; positions labelled
    #           IGNORE_INDEX add nothing and do not count in N (averaging over every position makes the
    #           loss shrink with the masking rate).
    #        2. Do not unpack a fixed number of dimensions: the logits may come as (B, T, V) or (N, V).
    #           Selecting positions with a boolean mask of the labels' shape gives (N, V) and (N,) in
    #           both cases, the shapes cross-entropy takes.
    #        3. N = 0 (nothing predicted): return a zero that depends on the logits (a product with 0 of
    #           something computed from them), not a fresh constant, which has no gradient.
    # BEGIN SOLUTION
    predicted = labels != IGNORE_INDEX  # (B, T) or (N,)
    if not predicted.any():  # nothing to predict: 0, not the NaN of an empty mean
        return prediction_logits.sum() * 0.0
    return F.cross_entropy(prediction_logits[predicted], labels[predicted])  # over (N, V) and (N,)
    # END SOLUTION


def next_sentence_loss(seq_relationship_logits: torch.Tensor,
                       next_sentence_label: torch.Tensor) -> torch.Tensor:
    """BERT's next-sentence loss: the mean two-way cross-entropy (BERT §3.1, Task #2).

    seq_relationship_logits: (B, 2), read from the pooled [CLS] vector; next_sentence_label: (B,) or (B, 1),
    0 if sentence B is the actual next sentence (IsNext), 1 if it is a random one (NotNext). Returns a scalar.
    """
    # Hints: L = -1/B sum_b log softmax(z_b)[y_b]; class 0 is IsNext, the order of the TF checkpoint's
    # classifier (not "1 = true"). Labels may come as (B, 1).
    # BEGIN SOLUTION
    return F.cross_entropy(seq_relationship_logits, next_sentence_label.view(-1))
    # END SOLUTION


class BertPreTrainingHeads(nn.Module):
    """Both heads; the checkpoint calls this module `cls`."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.predictions = BertLMPredictionHead(config)
        self.seq_relationship = nn.Linear(config.hidden_size, 2)  # 0 = IsNext, 1 = NotNext (TF order)


@dataclass
class PreTrainingOutput(ModelOutput):
    """transformers' BertForPreTrainingOutput (its fields, in its order), then the two losses apart."""

    loss: torch.Tensor | None  # masked-LM loss + next-sentence loss (those whose labels were given)
    prediction_logits: torch.Tensor  # (B, T, V)
    seq_relationship_logits: torch.Tensor  # (B, 2)
    hidden_states: tuple[torch.Tensor, ...] | None = None  # the encoder's, when asked for
    attentions: tuple[torch.Tensor, ...] | None = None  # the encoder's, when asked for
    mlm_loss: torch.Tensor | None = None
    nsp_loss: torch.Tensor | None = None


class BertForPreTraining(BertPreTrainedModel):
    """BertModel plus the masked-LM and next-sentence heads, with BERT's pre-training loss.

    Its checkpoint keys are the encoder's under bert. (base_model_prefix) and the heads' under cls.
    """

    config_class = BertConfig

    def __init__(self, config: BertConfig, attn_implementation: str = "sdpa") -> None:
        super().__init__()
        self.config = config
        self.bert = BertModel(config, attn_implementation)  # with its pooler: the next-sentence head reads it
        self.cls = BertPreTrainingHeads(config)
        init_bert_weights(self.cls, config)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        next_sentence_label: torch.Tensor | None = None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ) -> PreTrainingOutput:
        """input_ids, attention_mask, token_type_ids: (B, T) as in BertModel.

        labels: (B, T) original token ids at the masked positions, IGNORE_INDEX (-100) elsewhere.
        next_sentence_label: (B,) 0 if sentence B is the actual next sentence, 1 if random.
        """
        self.check_labels(input_ids, labels, next_sentence_label, IGNORE_INDEX)  # before the forward pass
        encoded = self.bert(input_ids, attention_mask, token_type_ids,
                            output_hidden_states=output_hidden_states, output_attentions=output_attentions)
        word_embeddings = self.bert.embeddings.word_embeddings.weight  # the tied decoder, (V, C)
        prediction_logits = self.cls.predictions(encoded.last_hidden_state, word_embeddings)  # (B, T, V)
        nsp_logits = self.cls.seq_relationship(encoded.pooler_output)  # (B, 2)

        mlm_loss = nsp_loss = None
        if labels is not None:
            mlm_loss = masked_lm_loss(prediction_logits, labels)
        if next_sentence_label is not None:
            nsp_loss = next_sentence_loss(nsp_logits, next_sentence_label)
        losses = [x for x in (mlm_loss, nsp_loss) if x is not None]
        loss = sum(losses) if losses else None
        return PreTrainingOutput(loss, prediction_logits, nsp_logits, encoded.hidden_states,
                                 encoded.attentions, mlm_loss, nsp_loss)
