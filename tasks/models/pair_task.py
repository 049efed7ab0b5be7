"""The main job's pair tasks, Quora paraphrase and STS similarity: batches of sentence pairs, their losses,
the course's predictions (0/1 duplicates, 0..5 similarity scores) and the paraphrase decision threshold.

A bi-encoder pair batch stacks the B first sentences over the B second ones, (2B, T), so that one encoder
call embeds both sides; a cross-encoder batch is B joined inputs [CLS] A [SEP] B [SEP], (B, T).

Read next: ../multitask.py (the job that trains these with SST).
"""

from __future__ import annotations

from typing import Any, NamedTuple, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from minbert.tokenizer import BertTokenizer
from tasks.data.batching import TokenBatch, bucketed_batches, device_of, pad_batch, sorted_batches
from tasks.data.encoding import encode_pairs, encode_texts
from tasks.evaluation.metrics import course_metrics
from tasks.models.heads import (EMBEDDING_SIMILARITY_LOSSES, SIMILARITY_LOSSES, classification_loss,
                                multiple_negatives_ranking_loss)

EVAL_BATCH_SIZE = 128
# Training pairs the threshold is fitted on: a fixed random sample, so that a refit costs about as much as the
# dev evaluation (all 16,226 Quora pairs would take 2-4 minutes per evaluation on 2 cores).
THRESHOLD_PAIRS = 4000


class PairBatch(NamedTuple):
    """A training batch of B sentence pairs: the tokens, (B, T) for a cross-encoder or (2B, T) for the
    bi-encoder (the B first sentences on top of the B second ones), and the B labels."""

    tokens: TokenBatch
    labels: torch.Tensor  # (B,)

    def rows(self) -> int:
        return self.labels.size(0)

    def slice_rows(self, start: int, stop: int) -> "PairBatch":
        """Pairs start..stop-1 (data parallelism): for the bi-encoder, both halves of the token rows."""
        b = self.labels.size(0)
        pick = torch.arange(start, stop)
        if self.tokens.input_ids.size(0) == 2 * b:
            pick = torch.cat([pick, pick + b])
        return PairBatch(TokenBatch(*(t[pick] for t in self.tokens)), self.labels[start:stop])


class PairTask:
    """Paraphrase (kind "paraphrase", labels 0/1) or similarity (kind "similarity", scores 0..5)."""

    def __init__(self, name: str, kind: str, tokenizer: BertTokenizer, train: Sequence, dev: Sequence,
                 batch_size: int, seed: int, max_length: int, cross: bool,
                 similarity_loss: str = "cosine-mse", softmax: bool = False,
                 paraphrase_loss: str = "bce") -> None:
        self.name, self.kind, self.cross, self.softmax = name, kind, cross, softmax
        # In-batch negatives need the two sides' embeddings: the cosine paraphrase head only.
        self.in_batch_negatives = (paraphrase_loss == "bce+mnrl" and kind == "paraphrase"
                                   and not (cross or softmax))
        self.tokenizer, self.max_length = tokenizer, max_length
        self.batch_size, self.seed = batch_size, seed
        # AnglE needs u and v, the others only cos(u, v).
        self.embedding_loss = EMBEDDING_SIMILARITY_LOSSES.get(similarity_loss if kind == "similarity" else "")
        self.similarity_loss = SIMILARITY_LOSSES.get(similarity_loss)
        self.train_inputs = self.encode(train)
        self.train_labels = [e.label for e in train]
        self.dev = dev
        self.dev_inputs = self.encode(dev)

    def encode(self, examples: Sequence) -> list:
        """Per example: (ids, segments) of [CLS] A [SEP] B [SEP] (cross), or (ids of A, ids of B)."""
        first, second = [e.sentence1 for e in examples], [e.sentence2 for e in examples]
        if self.cross:
            return list(zip(*encode_pairs(self.tokenizer, first, second, self.max_length)))
        return list(zip(encode_texts(self.tokenizer, first, self.max_length),
                        encode_texts(self.tokenizer, second, self.max_length)))

    def collate(self, inputs: Sequence) -> TokenBatch:
        if self.cross:
            return pad_batch([ids for ids, _ in inputs], [seg for _, seg in inputs], self.tokenizer.pad_id)
        # First sentences on top, second ones below, padded together: (2B, T).
        return pad_batch([a for a, _ in inputs] + [b for _, b in inputs], pad_id=self.tokenizer.pad_id)

    def lengths(self, inputs: Sequence) -> list[int]:
        return [len(a) if self.cross else max(len(a), len(b)) for a, b in inputs]

    def train_batches(self, epoch: int) -> list[Any]:
        groups = bucketed_batches(self.lengths(self.train_inputs), self.batch_size, self.seed, epoch)
        dtype = torch.long if self.softmax else torch.float
        return [PairBatch(self.collate([self.train_inputs[i] for i in g]),
                          torch.tensor([self.train_labels[i] for i in g], dtype=dtype)) for g in groups]

    def scores(self, model: nn.Module, tokens: TokenBatch) -> torch.Tensor:
        if self.kind == "paraphrase":
            return model.predict_paraphrase(tokens)
        return model.predict_similarity(tokens)

    def loss(self, model: nn.Module, batch: Any) -> torch.Tensor:
        tokens, labels = batch
        device = device_of(model)
        tokens, labels = tokens.to(device), labels.to(device)
        if self.in_batch_negatives:  # binary cross-entropy on s cos(u, v) + b, plus MNRL on the duplicates
            u, v = model.embed_pair(tokens)
            loss = F.binary_cross_entropy_with_logits(model.paraphrase(u, v).float(), labels)
            duplicates = labels > 0.5
            return loss + multiple_negatives_ranking_loss(u, v, duplicates) if duplicates.any() else loss
        if self.embedding_loss is not None and not self.cross:
            u, v = model.embed_pair(tokens)
            return self.embedding_loss(u.float(), v.float(), labels)
        scores = self.scores(model, tokens)
        if self.kind == "paraphrase":
            if self.softmax:
                return classification_loss(scores, labels)  # SBERT's softmax head: 2 classes
            return F.binary_cross_entropy_with_logits(scores.float(), labels)
        if self.cross:  # SBERT's CrossEncoder: BCE against the score rescaled to [0, 1]
            return F.binary_cross_entropy_with_logits(scores.float(), labels / 5.0)
        return self.similarity_loss(scores.float(), labels)

    def to_prediction(self, model: nn.Module, scores: torch.Tensor) -> list:
        """Scores -> the course's predictions: 0/1 for paraphrase, 0..5 for similarity."""
        if self.kind == "paraphrase":
            return model.paraphrase_decision(scores).tolist()
        values = 5 * torch.sigmoid(scores) if self.cross else (5 * scores).clamp(0, 5)
        return [round(v, 4) for v in values.float().tolist()]

    def raw_scores(self, model: nn.Module, inputs: Sequence) -> torch.Tensor:
        """The model's scores for encoded pairs, in their order: (N,), or (N, 2) for the softmax head.
        Batches are sorted by length (least padding), then put back in order."""
        groups = sorted_batches(self.lengths(inputs), EVAL_BATCH_SIZE)
        if not groups:  # a file with no rows: no predictions
            return torch.empty(0)
        device = device_of(model)
        scores = torch.cat([self.scores(model, self.collate([inputs[i] for i in g]).to(device))
                            for g in groups])
        order = torch.tensor([i for g in groups for i in g], device=scores.device)
        return scores[torch.argsort(order)]

    def predict(self, model: nn.Module, inputs: Sequence) -> list:
        return self.to_prediction(model, self.raw_scores(model, inputs))

    def fit_threshold(self, model: nn.Module) -> float:
        """The logit threshold that classifies this task's training pairs best (a fixed random sample of
        THRESHOLD_PAIRS of them), in eval mode.

        The head's bias is trained by cross-entropy on dropout-noised scores, which places the boundary
        where the log-loss is lowest, not where the fewest pairs fall on the wrong side. Sorting the N
        training logits, every threshold between two neighbours is tried at once: predicting "duplicate"
        from position k on gets (non-duplicates before k) + (duplicates from k on) right. Dev never sees it.
        """
        generator = torch.Generator().manual_seed(self.seed)
        sample = torch.randperm(len(self.train_inputs), generator=generator)[:THRESHOLD_PAIRS].tolist()
        logits = self.raw_scores(model, [self.train_inputs[i] for i in sample]).float().cpu()  # (N,)
        labels = torch.tensor([self.train_labels[i] for i in sample], dtype=torch.float)
        logits, order = torch.sort(logits, stable=True)
        labels = labels[order]
        # right[k]: pairs right with the threshold just below logits[k] (k = N: every pair "not duplicate")
        zero = torch.zeros(1)
        negatives_before = torch.cat([zero, (1 - labels).cumsum(0)])  # (N + 1,)
        positives_from = labels.sum() - torch.cat([zero, labels.cumsum(0)])
        right = negatives_before + positives_from
        k = int(torch.argmax(right))
        below = logits[k - 1] if k > 0 else logits[0] - 1
        above = logits[k] if k < len(logits) else logits[-1] + 1
        return float((below + above) / 2)

    def evaluate(self, model: nn.Module) -> dict[str, float]:
        if self.kind == "paraphrase" and hasattr(model, "paraphrase_threshold"):
            model.paraphrase_threshold.fill_(self.fit_threshold(model))
        return course_metrics(self.name, self.predict(model, self.dev_inputs), [e.label for e in self.dev])

    @property
    def header(self) -> str:
        """The prediction column's name in the course's output files (and its spelling)."""
        return "Predicted_Is_Paraphrase" if self.kind == "paraphrase" else "Predicted_Similiary"

    def predict_examples(self, model: nn.Module, examples: Sequence) -> list:
        return self.predict(model, self.encode(examples))
