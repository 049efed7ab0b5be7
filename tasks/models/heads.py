"""Task heads on top of BertModel: a sentence classifier and SBERT-style pair heads.

- Sentence classification (sentiment): pool the token vectors into one vector (minbert/pooling.py, or
  weights over the tokens that the head learns), dropout, linear layer.
- Sentence pairs, bi-encoder (Reimers & Gurevych 2019, "Sentence-BERT"): encode each sentence alone,
  mean-pool to u and v, and compare them: cosine similarity (with a learned scale and bias for the
  binary paraphrase decision), or SBERT's classifier over (u, v, |u - v|).
- Sentence pairs, cross-encoder: one `[CLS] A [SEP] B [SEP]` input, a linear layer on the pooled vector.

Every head returns raw scores; the losses at the bottom turn scores and labels into a scalar.

Shape legend: B batch, T tokens, C hidden size, K classes.

Read next: ../training/loop.py (where the losses are minimised).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from minbert.dropout import Dropout
from minbert.model import BertModelOutput
from minbert.pooling import POOLINGS, attention_pool, pool

# The sentence classifier's poolings: minbert's, and "attention", whose token scores it learns itself.
SENTENCE_POOLINGS = (*POOLINGS, "attention")


def cosine_similarity(u: torch.Tensor, v: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """cos(u, v) = u.v / (|u| |v|) per row. (B, C), (B, C) -> (B,)."""
    # BEGIN SOLUTION
    return (u * v).sum(dim=-1) / (u.norm(dim=-1) * v.norm(dim=-1)).clamp(min=eps)
    # END SOLUTION


class SentenceClassifier(nn.Module):
    """pooled vector -> dropout -> linear over K classes (BERT paper §4.1: one new matrix W, K x C)."""

    def __init__(self, hidden_size: int, num_classes: int, dropout: float, pooling: str = "cls") -> None:
        super().__init__()
        if pooling not in SENTENCE_POOLINGS:
            raise ValueError(f"pooling must be one of {SENTENCE_POOLINGS}, got {pooling!r}")
        self.pooling = pooling
        # "attention": one learned score per token, h_t . w + b (only this pooling has weights of its own)
        self.attention = nn.Linear(hidden_size, 1) if pooling == "attention" else None
        self.dropout = Dropout(dropout)
        self.classifier = nn.Linear(hidden_size, num_classes)

    def forward(self, output: BertModelOutput, attention_mask: torch.Tensor) -> torch.Tensor:
        """output: BertModel's, (B, T, C) token vectors; attention_mask: (B, T). Returns logits (B, K)."""
        # Hint: z = W dropout(s) + b, where s = self.sentence_vector(output, attention_mask) is the pooled
        # vector this head was built to read; dropout between the pooled vector and the linear layer.
        # BEGIN SOLUTION
        return self.classifier(self.dropout(self.sentence_vector(output, attention_mask)))
        # END SOLUTION

    def sentence_vector(self, output: BertModelOutput, attention_mask: torch.Tensor) -> torch.Tensor:
        """The pooled vector s (B, C): `pool` by this head's pooling name, or learned attention weights."""
        if self.attention is None:
            return pool(output, attention_mask, self.pooling)
        tokens = output.last_hidden_state  # (B, T, C)
        return attention_pool(tokens, attention_mask, self.attention(tokens).squeeze(-1))


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


class SoftmaxPairHead(nn.Module):
    """SBERT's classification objective (Reimers & Gurevych 2019, eq. 1): softmax(W [u; v; |u - v|])."""

    def __init__(self, hidden_size: int, num_classes: int = 2) -> None:
        super().__init__()
        self.classifier = nn.Linear(3 * hidden_size, num_classes)

    def forward(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.cat([u, v, (u - v).abs()], dim=-1))  # (B, 3C) -> (B, K)


# ----- losses -----------------------------------------------------------------------------------------


def classification_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The mean cross-entropy of raw class scores against the gold classes. (B, K), (B,) -> scalar.

    Every job that classifies sentences trains with it: sentiment (tasks/sentiment.py, the main job's SST)
    and the small classification sets (tasks/classify.py).
    """
    # Hint: L = -1/B sum_b log softmax(z_b)[y_b] from the raw logits z; the loss applies the softmax
    # itself, so a softmax (or log-softmax) of your own before it is one too many.
    # BEGIN SOLUTION
    return F.cross_entropy(logits, labels)
    # END SOLUTION


def cosine_mse_loss(cosine: torch.Tensor, score: torch.Tensor, max_score: float = 5.0) -> torch.Tensor:
    """SBERT's CosineSimilarityLoss: MSE between cos(u, v) and the gold score rescaled to [0, 1]."""
    return F.mse_loss(cosine, score / max_score)


def cosine_embedding_loss(cosine: torch.Tensor, score: torch.Tensor, max_score: float = 5.0,
                          margin: float = 0.0) -> torch.Tensor:
    """PyTorch's CosineEmbeddingLoss on graded scores: a pair scored at least max/2 counts as similar.

    Similar pairs pay 1 - cos; dissimilar pairs pay max(0, cos - margin). Cruder than the MSE loss
    (it throws the grades away), kept for comparison.
    """
    similar = score >= max_score / 2
    return torch.where(similar, 1 - cosine, (cosine - margin).clamp(min=0)).mean()


def cosent_loss(cosine: torch.Tensor, score: torch.Tensor, scale: float = 20.0) -> torch.Tensor:
    """CoSENT (Su 2022): log(1 + sum over pairs (i, j) with score_i > score_j of e^{scale (cos_j - cos_i)}).

    It asks only that the cosines be ranked as the gold scores are, which is what Spearman measures.
    """
    differences = scale * (cosine[None, :] - cosine[:, None])  # (B, B): entry (i, j) = s (cos_j - cos_i)
    ranked = score[:, None] > score[None, :]  # (B, B): True where pair i should score above pair j
    differences = differences.masked_fill(~ranked, float("-inf"))
    zero = torch.zeros(1, dtype=cosine.dtype, device=cosine.device)  # the "1 +" inside the log
    return torch.logsumexp(torch.cat([zero, differences.flatten()]), dim=0)


def multiple_negatives_ranking_loss(u: torch.Tensor, v: torch.Tensor, positive: torch.Tensor,
                                    scale: float = 20.0) -> torch.Tensor:
    """In-batch negatives (Henderson et al. 2017; SBERT's MultipleNegativesRankingLoss, as SBERT trains
    on Quora's duplicates): for every duplicate pair (u_i, v_i), v_i must be the closest to u_i of all the
    batch's second sentences v_j, by cross-entropy over scale * cos(u_i, v_j).

    u, v: (B, C) embeddings of the pairs' two sides; positive: (B,) bool, the duplicate pairs. The other
    pairs' second sentences serve as negatives too (a non-duplicate v_j is often a hard one).
    """
    cosines = F.normalize(u, dim=-1) @ F.normalize(v, dim=-1).T  # (B, B): cos(u_i, v_j)
    rows = positive.nonzero().squeeze(1)  # (P,) the duplicate pairs
    return F.cross_entropy(scale * cosines[rows].float(), rows)  # pair i's own v_i is class i


def angle_similarity(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """AnglE's similarity (Li & Li 2024, "AnglE-optimized text embeddings"): each vector read as C/2 complex
    numbers (first half real, second half imaginary parts), u / v divided element-wise and normalised by
    |u| / |v|; the sum of the quotient's real and imaginary parts, taken absolutely. It is 1 for u = v.

    Unlike the cosine it does not flatten out near +-1, where cosine losses have vanishing gradients.
    (B, C), (B, C) -> (B,), as the authors' `angle_loss` computes it.
    """
    a, b = u.chunk(2, dim=-1)  # u = a + ib, (B, C/2) each
    c, d = v.chunk(2, dim=-1)  # v = c + id
    v_norm_sq = (c * c + d * d).sum(dim=-1, keepdim=True)  # (B, 1)
    real = (a * c + b * d) / v_norm_sq  # (a + ib) / (c + id), element-wise, over |v|^2
    imaginary = (b * c - a * d) / v_norm_sq
    norm_ratio = (a * a + b * b).sum(dim=-1, keepdim=True).sqrt() / v_norm_sq.sqrt()  # |u| / |v|, (B, 1)
    return ((real + imaginary) / norm_ratio).sum(dim=-1).abs()


def angle_loss(u: torch.Tensor, v: torch.Tensor, score: torch.Tensor, scale: float = 20.0) -> torch.Tensor:
    """AnglE's objective on graded pairs: CoSENT's ranking on the cosine plus the same ranking on the angle
    similarity above (the paper's cosine and angle terms, weights 1 and 1; its in-batch-negative term needs
    pairs labelled as duplicates and is left out). u, v: (B, C); score: (B,) gold scores."""
    cosine_term = cosent_loss(cosine_similarity(u, v), score, scale)
    return cosine_term + cosent_loss(angle_similarity(u, v), score, scale)


def symmetric_kl(logits_p: torch.Tensor, logits_q: torch.Tensor) -> torch.Tensor:
    """R-Drop's consistency term (Liang et al. 2021): (KL(p || q) + KL(q || p)) / 2 for the softmax
    distributions of two sets of logits, (B, K) each, summed over classes and averaged over the batch."""
    log_p, log_q = F.log_softmax(logits_p, dim=-1), F.log_softmax(logits_q, dim=-1)
    kl_pq = F.kl_div(log_q, log_p, log_target=True, reduction="batchmean")  # KL(p || q)
    kl_qp = F.kl_div(log_p, log_q, log_target=True, reduction="batchmean")  # KL(q || p)
    return (kl_pq + kl_qp) / 2


PARAPHRASE_LOSSES = ("bce", "bce+mnrl")
SIMILARITY_LOSSES = {"cosine-mse": cosine_mse_loss, "cosine-embedding": cosine_embedding_loss,
                     "cosent": cosent_loss}
# Losses that need the embeddings u, v themselves, not only cos(u, v).
EMBEDDING_SIMILARITY_LOSSES = {"angle": angle_loss}
