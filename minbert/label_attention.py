"""Label-embedding attention (Wang et al. 2020): [CLS] also attends through learned class embeddings.

The method (paper eq. 5-10). M classes get one learned embedding each, X_l (M x C), shared by all
layers. In a layer that uses the method, every head h projects them with that layer's own query
projection, Q_l = X_l W_Q^h (the query Linear, bias included, split into heads like the tokens'
queries), and scores them against the keys of the tokens:

    A_l = Q_l K^T / sqrt(D)                                       (M x T per head)

The [CLS] query row of the ordinary scores S = Q K^T / sqrt(D) is then replaced, for every key except
[CLS] itself, by the column-wise maximum over [S_cls; A_l]: [CLS] attends to a token as strongly as the
best-matching class says it should, or as its own query says, whichever is larger. The [CLS] -> [CLS]
score and every other query row stay as they were. The padding mask is added afterwards, so padding is
never attended. A classifier C on the final [CLS] vector gives L_c; C also classifies each label
embedding as its own class, L_label = -sum_m log softmax(C(x_m))_m, and L_final = L_c + lambda L_label
with lambda = 3.

Paper versus the authors' released code. We implement the paper; the differences:

1. The code does not divide the label scores by sqrt(d). We do (eq. 6), so label and token scores are
   on one scale and the max compares like with like.
2. The code subtracts the padding mask from the label scores instead of adding it, so padding keys get
   a huge label score, win the max, and [CLS] attends to [PAD]. We add it: padding never changes any
   output (the repository's tests check this).
3. The code uses the method in the last two of twelve layers only. Here the layers are a choice:
   all layers by default (the paper), or `label_layers="last:k"` for the last k.
4. The code averages L_label over the classes (`label_loss_reduction="mean"`) and passes the label
   embeddings through the pretrained pooler before the classifier (`label_loss_path="pooler"`). The paper
   sums over classes and feeds them to the classifier directly: our defaults ("sum", "direct").
5. The code has no learning-rate warm-up; our jobs use the shared loop's warm-up.

Label embeddings are new parameters; the rest loads from any BERT checkpoint. They can start random
(N(0, 0.02^2), BERT's initialisation), from keyword embeddings (the mean word embedding of a few words
per class), or from the class-averaged [CLS] vector of the pretrained model on training examples.

How it is built: on the model's own parts, so that what attention.py and layer.py teach is written once.
LabelSelfAttention is BertSelfAttention with another `attend`: label_attention adds the label scores to
the eager kernel's input as one more additive term on the [CLS] row. `add_label_attention` puts it in the
chosen layers of a BertModel, in place and with their weights; the model's forward, encoder loop and
layers run unchanged. The label table belongs to the model that owns it (LabelAttentionBert, or
tasks.classify's model), beside the encoder, so the encoder still saves as a plain BERT checkpoint.

Shape legend: B batch, T tokens, C hidden size, H heads, D head size, M classes.

Read next: metrics.py (how the jobs score what the heads predict).
"""

from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from minbert.attention import BertSelfAttention, attention_scores, eager_attention
from minbert.config import BertConfig
from minbert.model import BertModel, BertModelOutput

LABEL_LOSS_PATHS = ("direct", "pooler")
LABEL_LOSS_REDUCTIONS = ("sum", "mean")
LABEL_LOSS_WEIGHT = 3.0  # lambda, paper §4.2


def merge_label_scores(scores: torch.Tensor, label_scores: torch.Tensor) -> torch.Tensor:
    """Replace the [CLS] row's scores to the other tokens by the column-wise max over [S_cls; A_l].

    scores: (B, H, T, T) token scores S, before the mask; label_scores: (B, H, M, T) A_l.
    Returns (B, H, T, T): S with row 0, columns 1..T-1, replaced; [CLS] -> [CLS] unchanged (eq. 7-8).
    """
    # Hints: 1. for every key j >= 1, the new [CLS] score is max(S[0, j], A_l[1, j], ..., A_l[M, j]): a
    # maximum over M + 1 candidate rows, (B, H, M + 1, T - 1) -> (B, H, 1, T - 1); 2. key 0 ([CLS] itself)
    # keeps S[0, 0]; 3. rows 1..T-1 are unchanged. Pitfall: return a new tensor; writing into `scores` in
    # place would change the caller's S and break autograd's record of it.
    # BEGIN SOLUTION
    cls_row = scores[:, :, :1, 1:]  # (B, H, 1, T-1)
    best = torch.cat([cls_row, label_scores[..., 1:]],
                     dim=2).max(dim=2, keepdim=True).values  # (B, H, 1, T-1)
    new_cls_row = torch.cat([scores[:, :, :1, :1], best], dim=-1)  # (B, H, 1, T)
    return torch.cat([new_cls_row, scores[:, :, 1:]], dim=2)
    # END SOLUTION


def label_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, label_query: torch.Tensor,
                    attention_mask: torch.Tensor, dropout: nn.Module | None = None,
                    return_probs: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Scaled dot-product attention (attention.py's eager kernel) whose [CLS] row also reads the labels.

    query, key, value: (B, H, T, D); label_query: (1, H, M, D); attention_mask: additive (B, 1, 1, T).
    Returns the context (B, H, T, D) and, if asked, the probabilities (B, H, T, T).

    The label scores reach the eager kernel as one more additive term, zero except on the [CLS] row,
    where it is merge_label_scores(S, A_l) - S: the kernel's S + term is then eq. 7-8's merged row, and
    the padding mask is still added after the max, so padding stays unattended.
    """
    T = query.size(2)
    cls_scores = attention_scores(query[:, :, :1], key)  # (B, H, 1, T): S's [CLS] row
    cls_row_only = F.pad(cls_scores, (0, 0, 0, T - 1))  # (B, H, T, T): that row, zeros below it
    # A_l = Q_l K^T / sqrt(D): label_query (1, H, M, D) against the keys, (B, H, M, T)
    label_term = merge_label_scores(cls_row_only, attention_scores(label_query, key)) - cls_row_only
    return eager_attention(query, key, value, attention_mask + label_term, dropout, return_probs)


class LabelSelfAttention(BertSelfAttention):
    """BertSelfAttention whose [CLS] query row also reads the label embeddings (eq. 5-8).

    The label embeddings X_l (M, C) are one table for every chosen layer, owned by the model beside the
    encoder: this module holds a reference to it, not a parameter of its own, so the encoder's state
    dict keeps BERT's keys and the table is saved once.
    """

    def __init__(self, config: BertConfig, label_embeddings: torch.Tensor) -> None:
        super().__init__(config, "eager")
        # Set past nn.Module.__setattr__, which would register the table as this module's parameter.
        object.__setattr__(self, "label_embeddings", label_embeddings)

    def attend(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
               attention_mask: torch.Tensor,
               output_attentions: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        # The label embeddings go through this layer's own query projection: (M, C) -> (1, H, M, D).
        label_query = self.split_heads(self.query(self.label_embeddings)[None])
        return label_attention(query, key, value, label_query, attention_mask, self.dropout,
                               output_attentions)


def add_label_attention(bert: BertModel, label_embeddings: torch.Tensor, label_layers: Sequence[int]) -> None:
    """Put LabelSelfAttention in the layers `label_layers` (0-based) of `bert`, in place, each with the
    query, key and value weights of the attention it replaces."""
    if type(bert) is not BertModel:  # UnpaddedBertModel (minbert.fast.unpadded) packs the batch
        raise ValueError("label attention reads the [CLS] row of every padded sequence: build the "
                         "encoder as a BertModel with attn_implementation 'sdpa' or 'eager', not an "
                         f"{type(bert).__name__}")
    for i in label_layers:
        attention = bert.encoder.layer[i].attention
        replacement = LabelSelfAttention(bert.config, label_embeddings)
        replacement.load_state_dict(attention.self.state_dict())
        attention.self = replacement.to(attention.self.query.weight).train(attention.self.training)


def parse_label_layers(spec: str | Sequence[int] | None, num_layers: int) -> tuple[int, ...]:
    """Which layers use the method (0-based): None or "all"; "last:k"; or explicit indices."""
    if spec is None or spec == "all":
        return tuple(range(num_layers))
    if isinstance(spec, str):
        if not spec.startswith("last:") or not spec[5:].isdigit() or not 1 <= int(spec[5:]) <= num_layers:
            raise ValueError(f"label layers must be 'all', 'last:k' with 1 <= k <= {num_layers}, or a "
                             f"list of layer indices; got {spec!r}")
        return tuple(range(num_layers - int(spec[5:]), num_layers))
    layers = tuple(sorted(set(spec)))
    if not layers or layers[0] < 0 or layers[-1] >= num_layers:
        raise ValueError(f"label layers must be indices in 0..{num_layers - 1}, got {list(spec)}")
    return layers


class LabelAttentionBert(nn.Module):
    """Our BertModel (its weights untouched) plus label embeddings used by the chosen layers."""

    def __init__(self, bert: BertModel, num_labels: int,
                 label_layers: str | Sequence[int] | None = "all") -> None:
        super().__init__()
        self.bert = bert
        self.config = bert.config
        self.label_layers = parse_label_layers(label_layers, bert.config.num_hidden_layers)
        self.label_embeddings = nn.Parameter(torch.empty(num_labels, bert.config.hidden_size))
        nn.init.normal_(self.label_embeddings, std=bert.config.initializer_range)
        add_label_attention(bert, self.label_embeddings, self.label_layers)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, output_hidden_states: bool = False,
                output_attentions: bool = False) -> BertModelOutput:
        """As BertModel.forward: (B, T) ids, mask and segments."""
        return self.bert(input_ids, attention_mask, token_type_ids, output_hidden_states=output_hidden_states,
                         output_attentions=output_attentions)


def label_loss(classifier: nn.Module, label_embeddings: torch.Tensor, path: str = "direct",
               reduction: str = "sum", pooler: nn.Module | None = None) -> torch.Tensor:
    """L_label: the classifier must put label embedding m in class m (paper eq. 9).

    path "direct" feeds X_l to the classifier (the paper); "pooler" first applies the pretrained pooler's
    tanh(W x + b) (the released code). reduction "sum" over classes (the paper) or "mean" (the code).
    """
    if path not in LABEL_LOSS_PATHS:
        raise ValueError(f"label loss path must be one of {LABEL_LOSS_PATHS}, got {path!r}")
    if reduction not in LABEL_LOSS_REDUCTIONS:
        raise ValueError(f"label loss reduction must be one of {LABEL_LOSS_REDUCTIONS}, got {reduction!r}")
    inputs = label_embeddings  # (M, C)
    if path == "pooler":
        if pooler is None:
            raise ValueError("label loss path 'pooler' needs the model's pooler")
        inputs = torch.tanh(pooler.dense(inputs))
    logits = classifier(inputs)  # (M, M)
    targets = torch.arange(label_embeddings.size(0), device=label_embeddings.device)
    return F.cross_entropy(logits, targets, reduction=reduction)


# ----- initialisations ---------------------------------------------------------------------------


@torch.no_grad()
def init_from_keywords(model: nn.Module, tokenizer, keywords: Sequence[Sequence[str]]) -> None:
    """Label m <- the mean word embedding of the pieces of its keywords (e.g. ["positive", "great"]).

    model: anything with `.bert` and `.label_embeddings` (LabelAttentionBert, tasks.classify's model).
    """
    if len(keywords) != model.label_embeddings.size(0):
        raise ValueError(f"{len(keywords)} keyword lists for {model.label_embeddings.size(0)} labels")
    table = model.bert.embeddings.word_embeddings.weight
    for m, words in enumerate(keywords):
        ids = [i for word in words for i in tokenizer.convert_tokens_to_ids(tokenizer.tokenize(word))]
        if not ids:
            raise ValueError(f"label {m}: the keywords {list(words)} give no word pieces")
        model.label_embeddings[m] = table[ids].mean(dim=0)


@torch.no_grad()
def init_from_class_means(model: nn.Module, batches, num_labels: int) -> None:
    """Label m <- the mean final-layer [CLS] vector of the pretrained encoder over class m's examples.

    batches: iterable of (input_ids, attention_mask, token_type_ids, labels). The vectors are plain
    BERT's: `model.bert` already attends through the label embeddings being computed, so a BertModel
    without label attention runs on a copy of its weights.
    """
    plain = BertModel(model.bert.config, add_pooling_layer=model.bert.pooler is not None)
    plain.load_state_dict(model.bert.state_dict())  # the same keys: label attention adds no parameter
    plain.to(model.label_embeddings.device).eval()
    sums = torch.zeros_like(model.label_embeddings)
    counts = torch.zeros(num_labels, device=sums.device)
    for input_ids, attention_mask, token_type_ids, labels in batches:
        cls = plain(input_ids, attention_mask, token_type_ids).last_hidden_state[:, 0]  # (B, C)
        sums.index_add_(0, labels, cls)
        counts.index_add_(0, labels, torch.ones_like(labels, dtype=counts.dtype))
    if (counts == 0).any():
        missing = (counts == 0).nonzero().flatten().tolist()
        raise ValueError(f"no training examples for label(s) {missing}: cannot average their [CLS] vectors")
    model.label_embeddings.copy_(sums / counts[:, None])
