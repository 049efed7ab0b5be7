"""Task heads on top of BertModel: a sentence classifier and SBERT-style pair heads.

- Sentence classification (sentiment): pool the token vectors into one vector (minbert/pooling.py),
  dropout, linear layer.
- Sentence pairs, bi-encoder (Reimers & Gurevych 2019, "Sentence-BERT"): encode each sentence alone,
  mean-pool to u and v, and compare them by their cosine similarity (with a learned scale and bias for
  the binary paraphrase decision).

Every head returns raw scores; the losses at the bottom turn scores and labels into a scalar.

Shape legend: B batch, T tokens, C hidden size, K classes.

Read next: label_attention.py (a variant of attention that also reads learned class embeddings).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from minbert.model import BertModelOutput
from minbert.pooling import POOLINGS, pool


def cosine_similarity(u: torch.Tensor, v: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """cos(u, v) = u.v / (|u| |v|) per row, eps keeping the denominator away from 0. (B, C), (B, C) -> (B,).

    A row where u or v is the zero vector gets a cosine of 0, not 0 / 0 = NaN; rows whose lengths are well
    above eps get the exact cosine.
    """
    # Hints: 1. u.v per row is a sum over the last axis of the elementwise product; |u| is its norm
    #           over the same axis.
    #        2. keep the denominator at eps or above (as the docstring says), not eps added to it, so
    #           that the cosine of rows of any length is exact.
    # BEGIN SOLUTION
    return (u * v).sum(dim=-1) / (u.norm(dim=-1) * v.norm(dim=-1)).clamp(min=eps)
    # END SOLUTION


class SentenceClassifier(nn.Module):
    """pooled vector -> dropout -> linear over K classes (BERT paper §4.1: one new matrix W, K x C)."""

    def __init__(self, hidden_size: int, num_classes: int, dropout: float, pooling: str = "cls") -> None:
        super().__init__()
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
        self.pooling = pooling
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(hidden_size, num_classes)

    def forward(self, output: BertModelOutput, attention_mask: torch.Tensor) -> torch.Tensor:
        """output: BertModel's, (B, T, C) token vectors; attention_mask: (B, T). Returns logits (B, K).

        The pooled vector s is read through self.sentence_vector(output, attention_mask), always: a
        subclass changes the vector there and keeps this forward (tasks.classify's FeatureClassifier
        combines other layers' [CLS] vectors, or takes a text's pooled chunks).
        """
        # Hint: z = W dropout(s) + b, where s = self.sentence_vector(output, attention_mask) is the pooled
        # vector this head was built to read; dropout between the pooled vector and the linear layer.
        # BEGIN SOLUTION
        return self.classifier(self.dropout(self.sentence_vector(output, attention_mask)))
        # END SOLUTION

    def sentence_vector(self, output: BertModelOutput, attention_mask: torch.Tensor) -> torch.Tensor:
        """The pooled vector s (B, C): `pool` by this head's pooling name."""
        return pool(output, attention_mask, self.pooling)


class CosinePairHead(nn.Module):
    """cos(u, v), optionally mapped to a logit by a learned scale and bias: s * cos(u, v) + b.

    For paraphrase detection the logit feeds a binary cross-entropy; the scale lets the sigmoid be
    sharp even though the cosine lives in [-1, 1], and the bias is the learned decision threshold
    (-b / s). They start at s = 10, b = -7.5, i.e. threshold 0.75, a typical cosine threshold for
    sentence-embedding models, so the first steps do not fight a badly placed boundary.
    """

    def __init__(self, learn_scale: bool = True, scale: float = 10.0, bias: float = -7.5) -> None:
        super().__init__()
        self.learn_scale = learn_scale
        if learn_scale:
            self.scale = nn.Parameter(torch.tensor(float(scale)))
            self.bias = nn.Parameter(torch.tensor(float(bias)))

    def forward(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """u, v: (B, C) sentence embeddings. Returns (B,): the logit, or the bare cosine."""
        cosine = cosine_similarity(u, v)
        return self.scale * cosine + self.bias if self.learn_scale else cosine


# ----- losses -----------------------------------------------------------------------------------------


def classification_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The mean cross-entropy of raw class scores against the gold classes. (B, K), (B,) -> scalar.

    Every job that classifies sentences trains with it: sentiment (python -m tasks.sentiment, the main job's
    SST) and the small classification sets (python -m tasks.classify).
    """
    # Hint: L = -1/B sum_b log softmax(z_b)[y_b] from the raw logits z; the loss applies the softmax
    # itself, so a softmax (or log-softmax) of your own before it is one too many.
    # BEGIN SOLUTION
    return F.cross_entropy(logits, labels)
    # END SOLUTION


def cosine_mse_loss(cosine: torch.Tensor, score: torch.Tensor, max_score: float = 5.0) -> torch.Tensor:
    """SBERT's CosineSimilarityLoss: MSE between cos(u, v) and the gold score rescaled to [0, 1]."""
    return F.mse_loss(cosine, score / max_score)


def symmetric_kl(logits_p: torch.Tensor, logits_q: torch.Tensor) -> torch.Tensor:
    """R-Drop's consistency term (Liang et al. 2021): (KL(p || q) + KL(q || p)) / 2 for the softmax
    distributions of two sets of logits, (B, K) each, summed over classes and averaged over the batch."""
    log_p, log_q = F.log_softmax(logits_p, dim=-1), F.log_softmax(logits_q, dim=-1)
    kl_pq = F.kl_div(log_q, log_p, log_target=True, reduction="batchmean")  # KL(p || q)
    kl_qp = F.kl_div(log_p, log_q, log_target=True, reduction="batchmean")  # KL(q || p)
    return (kl_pq + kl_qp) / 2

