"""The sentiment task of the main job and of tasks.sentiment: sentence batches, the loss, predictions.

Every sentence is one [CLS] A [SEP] input; the model's `predict_sentiment` turns a batch into logits (B, K).
The loss is the cross-entropy (heads.py's `classification_loss`), optionally with R-Drop (Liang et al.
2021): every sentence twice through the whole network, so two dropout masks, plus alpha times the
symmetric KL divergence between the two predictions (the main job's default: alpha 1).

Shape legend: B batch, T tokens, K classes.

Read next: pair_task.py (the main job's sentence-pair tasks).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import torch
from torch import nn

from minbert.text.tokenizer import BertTokenizer
from tasks.data.batching import TokenBatch, bucketed_batches, device_of, pad_batch, predict_in_order
from tasks.data.course import write_predictions
from tasks.data.encoding import encode_texts
from tasks.evaluation import metrics
from tasks.models.heads import classification_loss, symmetric_kl


class SentimentTask:
    """Sentence classification: cross-entropy training (with R-Drop when r_drop > 0), accuracy on dev."""

    header = "Predicted_Sentiment"  # the prediction column's name in the course's output files

    def __init__(self, name: str, tokenizer: BertTokenizer, train: Sequence, dev: Sequence, batch_size: int,
                 seed: int, max_length: int, r_drop: float = 0.0) -> None:
        self.name = name
        self.tokenizer, self.pad_id, self.max_length = tokenizer, tokenizer.pad_token_id, max_length
        self.batch_size, self.seed = batch_size, seed
        self.r_drop = r_drop
        self.train_ids = encode_texts(tokenizer, [e.sentence for e in train], max_length)
        self.train_labels = [e.label for e in train]
        self.dev = dev
        self.dev_ids = encode_texts(tokenizer, [e.sentence for e in dev], max_length)

    def train_batches(self, epoch: int) -> list[Any]:
        groups = bucketed_batches([len(ids) for ids in self.train_ids], self.batch_size, self.seed, epoch)
        return [(pad_batch([self.train_ids[i] for i in g], pad_id=self.pad_id),
                 torch.tensor([self.train_labels[i] for i in g])) for g in groups]

    def loss(self, model: nn.Module, batch: Any) -> torch.Tensor:
        """The loss of one batch, (tokens (B, T), labels (B,)): the mean cross-entropy of the logits, plus
        R-Drop's term when r_drop > 0."""
        tokens, labels = batch
        device = device_of(model)
        tokens, labels = tokens.to(device), labels.to(device)
        if not self.r_drop:
            return classification_loss(model.predict_sentiment(tokens), labels)
        twice = TokenBatch(*(t.repeat(2, 1) for t in tokens))  # (2B, T): a dropout mask for each copy
        logits = model.predict_sentiment(twice).float()  # (2B, K)
        first, second = logits.chunk(2)  # (B, K) each: the two passes
        return classification_loss(logits, labels.repeat(2)) + self.r_drop * symmetric_kl(first, second)

    def predict(self, model: nn.Module, encoded: Sequence[Sequence[int]]) -> list[int]:
        """Predicted class per sentence, in the input's order."""
        def batch_classes(group: list[int]) -> list[int]:
            tokens = pad_batch([encoded[i] for i in group], pad_id=self.pad_id).to(device_of(model))
            return model.predict_sentiment(tokens).argmax(-1).tolist()
        return predict_in_order([len(ids) for ids in encoded], batch_classes)

    def evaluate(self, model: nn.Module) -> dict[str, float]:
        predictions = self.predict(model, self.dev_ids)
        return {"accuracy": metrics.accuracy(predictions, [e.label for e in self.dev])}

    def predict_examples(self, model: nn.Module, examples: Sequence) -> list[int]:
        encoded = encode_texts(self.tokenizer, [e.sentence for e in examples], self.max_length)
        return self.predict(model, encoded)

    def write_outputs(self, model: nn.Module, test: Sequence | None, directory: Path) -> None:
        """Dev and (when given) test predictions in the course's format."""
        write_predictions(directory / f"{self.name}-dev-output.csv", self.header,
                          [e.id for e in self.dev], self.predict(model, self.dev_ids))
        if test is not None:
            write_predictions(directory / f"{self.name}-test-output.csv", self.header,
                              [e.id for e in test], self.predict_examples(model, test))
