"""The main job's pair tasks, Quora paraphrase and STS similarity: batches of sentence pairs, their losses
and the course's predictions (0/1 duplicates, 0..5 similarity scores).

A pair batch stacks the B first sentences over the B second ones, (2B, T), so that one encoder call embeds
both sides (SBERT's bi-encoder).

Read next: ../multitask.py (the job that trains these with SST).
"""

from __future__ import annotations

from typing import Any, NamedTuple, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from minbert.text.tokenizer import BertTokenizer
from tasks.data.batching import TokenBatch, bucketed_batches, device_of, pad_batch, predict_in_order
from tasks.data.encoding import encode_texts
from tasks.evaluation.metrics import course_metrics
from tasks.models.heads import SIMILARITY_LOSSES, multiple_negatives_ranking_loss


class PairBatch(NamedTuple):
    """A training batch of B sentence pairs: the tokens, (2B, T) (the B first sentences on top of the B
    second ones), and the B labels."""

    tokens: TokenBatch
    labels: torch.Tensor  # (B,)

    def rows(self) -> int:
        return self.labels.size(0)

    def slice_rows(self, start: int, stop: int) -> "PairBatch":
        """Pairs start..stop-1 (data parallelism): both halves of the token rows."""
        b = self.labels.size(0)
        pick = torch.arange(start, stop)
        pick = torch.cat([pick, pick + b])
        return PairBatch(TokenBatch(*(t[pick] for t in self.tokens)), self.labels[start:stop])


class PairTask:
    """Paraphrase (kind "paraphrase", labels 0/1) or similarity (kind "similarity", scores 0..5)."""

    def __init__(self, name: str, kind: str, tokenizer: BertTokenizer, train: Sequence, dev: Sequence,
                 batch_size: int, seed: int, max_length: int, similarity_loss: str = "cosine-mse",
                 paraphrase_loss: str = "bce") -> None:
        self.name, self.kind = name, kind
        self.in_batch_negatives = paraphrase_loss == "bce+mnrl" and kind == "paraphrase"
        self.tokenizer, self.max_length = tokenizer, max_length
        self.batch_size, self.seed = batch_size, seed
        self.similarity_loss = SIMILARITY_LOSSES[similarity_loss]
        self.train_inputs = self.encode(train)
        self.train_labels = [e.label for e in train]
        self.dev = dev
        self.dev_inputs = self.encode(dev)

    def encode(self, examples: Sequence) -> list:
        """Per example: (ids of A, ids of B)."""
        first, second = [e.sentence1 for e in examples], [e.sentence2 for e in examples]
        return list(zip(encode_texts(self.tokenizer, first, self.max_length),
                        encode_texts(self.tokenizer, second, self.max_length)))

    def collate(self, inputs: Sequence) -> TokenBatch:
        # First sentences on top, second ones below, padded together: (2B, T).
        return pad_batch([a for a, _ in inputs] + [b for _, b in inputs], pad_id=self.tokenizer.pad_token_id)

    def lengths(self, inputs: Sequence) -> list[int]:
        return [max(len(a), len(b)) for a, b in inputs]

    def train_batches(self, epoch: int) -> list[Any]:
        groups = bucketed_batches(self.lengths(self.train_inputs), self.batch_size, self.seed, epoch)
        return [PairBatch(self.collate([self.train_inputs[i] for i in g]),
                          torch.tensor([self.train_labels[i] for i in g], dtype=torch.float)) for g in groups]

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
        scores = self.scores(model, tokens)
        if self.kind == "paraphrase":
            return F.binary_cross_entropy_with_logits(scores.float(), labels)
        return self.similarity_loss(scores.float(), labels)

    def to_prediction(self, scores: torch.Tensor) -> list:
        """Scores (B,) -> the course's predictions: 0/1 for paraphrase, 0..5 for similarity."""
        if self.kind == "paraphrase":
            return (scores > 0).long().tolist()  # the head's learned boundary: logit 0
        return [round(v, 4) for v in (5 * scores).clamp(0, 5).float().tolist()]

    def predict(self, model: nn.Module, inputs: Sequence) -> list:
        """The course's prediction per encoded pair, in the input's order."""
        def batch_predictions(group: list[int]) -> list:
            tokens = self.collate([inputs[i] for i in group]).to(device_of(model))
            return self.to_prediction(self.scores(model, tokens))
        return predict_in_order(self.lengths(inputs), batch_predictions)

    def evaluate(self, model: nn.Module) -> dict[str, float]:
        return course_metrics(self.name, self.predict(model, self.dev_inputs), [e.label for e in self.dev])

    @property
    def header(self) -> str:
        """The prediction column's name in the course's output files (and its spelling)."""
        return "Predicted_Is_Paraphrase" if self.kind == "paraphrase" else "Predicted_Similiary"

    def predict_examples(self, model: nn.Module, examples: Sequence) -> list:
        return self.predict(model, self.encode(examples))
