"""A course task as one row: its data, head, loss, metric and output file; the model with a head per row.

A `CourseTask` names everything that differs between SST, Quora and STS (or a task of your own); a job's
tasks are a table of such rows (tasks/multitask.py), `TaskData` puts one row's examples to work in the
loop, and `MultitaskBERT` is the encoder with one head per row. A row's loss calls the model bound to the
row, `model(name, tokens)` (as a sentence-transformers loss calls its model). A pair batch stacks the B
first sentences over the B second ones, (2B, T), so one encoder call embeds both sides (SBERT's
bi-encoder).

Losses (heads.py holds the formulas): cross-entropy, optionally with R-Drop (Liang et al. 2021); binary
cross-entropy on the paraphrase logit s cos(u, v) + b; SBERT's CosineSimilarityLoss against score / 5.

Shape legend: B batch, T tokens, C hidden size, K classes.

Read next: ../multitask.py (the main job's table of three rows).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, NamedTuple, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from minbert.model import BertModel
from minbert.pooling import POOLINGS, pool
from minbert.text.tokenizer import BertTokenizer
from tasks.data.batching import (TokenBatch, bucketed_batches, device_of, encode_texts, pad_batch,
                                 predict_in_order)
from tasks.data.course import task_spec
from minbert import metrics
from minbert.task_heads import (CosinePairHead, SentenceClassifier, classification_loss, cosine_mse_loss,
                                symmetric_kl)

Forward = Callable[[TokenBatch], torch.Tensor]  # the model bound to a row: tokens -> its head's scores

# ----- inputs: one sentence or a pair per example -----------------------------------------------------


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


class Sentences:
    """One sentence per example: ids per example, (B, T) batches, integer class labels."""

    def encode(self, tokenizer: BertTokenizer, examples: Sequence, max_length: int) -> list:
        return encode_texts(tokenizer, [e.sentence for e in examples], max_length)

    def lengths(self, inputs: Sequence) -> list[int]:
        return [len(ids) for ids in inputs]

    def collate(self, inputs: Sequence, pad_id: int) -> TokenBatch:
        return pad_batch(list(inputs), pad_id=pad_id)

    def batch(self, tokens: TokenBatch, labels: Sequence) -> Any:
        return tokens, torch.tensor(labels)


class Pairs:
    """Two sentences per example: (ids of A, ids of B) per example, (2B, T) batches, float labels."""

    def encode(self, tokenizer: BertTokenizer, examples: Sequence, max_length: int) -> list:
        first, second = [e.sentence1 for e in examples], [e.sentence2 for e in examples]
        return list(zip(encode_texts(tokenizer, first, max_length),
                        encode_texts(tokenizer, second, max_length)))

    def lengths(self, inputs: Sequence) -> list[int]:
        return [max(len(a), len(b)) for a, b in inputs]

    def collate(self, inputs: Sequence, pad_id: int) -> TokenBatch:
        # First sentences on top, second ones below, padded together: (2B, T).
        return pad_batch([a for a, _ in inputs] + [b for _, b in inputs], pad_id=pad_id)

    def batch(self, tokens: TokenBatch, labels: Sequence) -> Any:
        return PairBatch(tokens, torch.tensor(labels, dtype=torch.float))


# ----- heads -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Classifier:
    """One sentence -> K logits: the pooled vector, dropout, a linear layer (heads.py)."""

    classes: int
    pooling: str = "cls"
    inputs = Sentences()

    def __post_init__(self) -> None:
        if self.pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {self.pooling!r}")

    def build(self, hidden_size: int, dropout: float) -> nn.Module:
        """(BERT's output, the (B, T) mask) -> logits (B, K)."""
        return SentenceClassifier(hidden_size, self.classes, dropout, self.pooling)


@dataclass(frozen=True)
class Cosine:
    """A pair -> cos(u, v) of the mean-pooled sentence vectors (SBERT), as a logit s cos(u, v) + b where
    `learn_scale`."""

    learn_scale: bool
    inputs = Pairs()

    def build(self, hidden_size: int, dropout: float) -> nn.Module:
        """u, v (B, C) each -> (B,): the logit, or the bare cosine."""
        return CosinePairHead(learn_scale=self.learn_scale)


# ----- losses: (forward, tokens, labels) -> a scalar, where forward is the model bound to the row ------


def cross_entropy(forward: Forward, tokens: TokenBatch, labels: torch.Tensor) -> torch.Tensor:
    return classification_loss(forward(tokens), labels)


@dataclass(frozen=True)
class RDrop:
    """Cross-entropy of each sentence sent twice (two dropout masks), plus alpha times the symmetric KL
    between the two predictions (alpha 0: the plain cross-entropy)."""

    alpha: float

    def __call__(self, forward: Forward, tokens: TokenBatch, labels: torch.Tensor) -> torch.Tensor:
        if not self.alpha:
            return cross_entropy(forward, tokens, labels)
        twice = TokenBatch(*(t.repeat(2, 1) for t in tokens))  # (2B, T): a dropout mask for each copy
        logits = forward(twice).float()  # (2B, K)
        first, second = logits.chunk(2)  # (B, K) each: the two passes
        return classification_loss(logits, labels.repeat(2)) + self.alpha * symmetric_kl(first, second)


def binary_cross_entropy(forward: Forward, tokens: TokenBatch, labels: torch.Tensor) -> torch.Tensor:
    return F.binary_cross_entropy_with_logits(forward(tokens).float(), labels)


def cosine_mse(forward: Forward, tokens: TokenBatch, labels: torch.Tensor) -> torch.Tensor:
    """SBERT's CosineSimilarityLoss: cos(u, v) against score / 5."""
    return cosine_mse_loss(forward(tokens).float(), labels)


# ----- the head's scores -> the course's predictions --------------------------------------------------


def argmax(scores: torch.Tensor) -> list[int]:
    """Logits (B, K) -> the class of each."""
    return scores.argmax(-1).tolist()


def above_zero(scores: torch.Tensor) -> list[int]:
    """Logits (B,) -> 1 where above 0 (the head's learned boundary), else 0."""
    return (scores > 0).long().tolist()


def on_0_to_5(scores: torch.Tensor) -> list[float]:
    """cos(u, v) (B,) -> 5 cos, clamped to the course's 0..5, rounded to 4 decimals."""
    return [round(v, 4) for v in (5 * scores).clamp(0, 5).float().tolist()]


# ----- metrics: the dev figures, and the part of the overall score ------------------------------------


class Accuracy:
    def __call__(self, predictions: Sequence, gold: Sequence) -> dict[str, float]:
        return {"accuracy": metrics.accuracy(predictions, gold)}

    def score(self, dev: dict[str, float]) -> float:
        return dev["accuracy"]


class Correlation:
    def __call__(self, predictions: Sequence, gold: Sequence) -> dict[str, float]:
        return {"pearson": metrics.pearson(predictions, gold),
                "spearman": metrics.spearman(predictions, gold)}

    def score(self, dev: dict[str, float]) -> float:
        """Pearson's r on the 0..1 scale of an accuracy: (r + 1) / 2."""
        return (dev["pearson"] + 1) / 2


# ----- the row ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CourseTask:
    """One task of a job's table. Flags --{name}_train ... and outputs {name}-{split}-output.csv."""

    name: str  # the course's prefix: "sst", "para", "sts"
    dataset: str  # tasks/data/course.py's reader and file names: "sst", "quora", "sts", "cfimdb"
    head_name: str  # the model's attribute for the head, so the checkpoint key: sentiment.classifier.weight
    head: Classifier | Cosine
    loss: Callable[[Forward, TokenBatch, torch.Tensor], torch.Tensor]
    predict: Callable[[torch.Tensor], list]  # the head's scores -> the course's predictions
    metric: Accuracy | Correlation
    header: str  # the prediction column's name in the course's output files (and its spelling)
    weight: float = 1.0  # the loss counts this many times in the gradient (--task-weights)

    def __post_init__(self) -> None:
        pairs = len(task_spec(self.dataset).text_columns) == 2
        if pairs != isinstance(self.head.inputs, Pairs):
            raise ValueError(f"task {self.name}: {self.dataset}'s examples are "
                             f"{'pairs' if pairs else 'sentences'}, but its head reads "
                             f"{'pairs' if not pairs else 'one sentence'}")
        if not self.weight > 0:
            raise ValueError(f"--task-weights: {self.name}'s weight must be positive, got {self.weight}")


class MultitaskBERT(nn.Module):
    """One encoder and a head per task, each at its row's `head_name` (sentiment, paraphrase, similarity)."""

    def __init__(self, bert: BertModel, tasks: Sequence[CourseTask], dropout: float = 0.1) -> None:
        super().__init__()
        self.bert = bert
        self.tasks = {t.name: t for t in tasks}  # plain rows, no parameters
        for task in tasks:
            self.add_module(task.head_name, task.head.build(bert.config.hidden_size, dropout))

    def forward(self, name: str, tokens: TokenBatch) -> torch.Tensor:
        """Task `name`'s head scores (the course's predict_sentiment, predict_paraphrase, ...): one encoder
        call, then the row's head. A pair batch, (2B, T), is mean-pooled (SBERT's, as all-MiniLM-L6-v2 was
        trained) into u, v: (B, C) each for the cosine head.
        """
        task = self.tasks[name]
        head = getattr(self, task.head_name)
        output = self.bert(tokens.input_ids, tokens.attention_mask, tokens.token_type_ids)
        if isinstance(task.head.inputs, Pairs):
            u, v = pool(output, tokens.attention_mask, "mean").chunk(2)  # (2B, C) -> (B, C) each
            return head(u, v)
        return head(output, tokens.attention_mask)

    def predict(self, name: str, tokens: TokenBatch) -> torch.Tensor:
        """The course's name for model(name, tokens)."""
        return self(name, tokens)


class TaskData:
    """One row's train and dev examples, encoded: what the training loop trains and evaluates."""

    def __init__(self, task: CourseTask, tokenizer: BertTokenizer, train: Sequence, dev: Sequence,
                 batch_size: int, seed: int, max_length: int) -> None:
        self.task, self.name, self.header, self.weight = task, task.name, task.header, task.weight
        self.inputs = task.head.inputs
        self.tokenizer, self.pad_id, self.max_length = tokenizer, tokenizer.pad_token_id, max_length
        self.batch_size, self.seed = batch_size, seed
        self.train_inputs = self.inputs.encode(tokenizer, train, max_length)
        self.train_labels = [e.label for e in train]
        self.dev = dev
        self.dev_inputs = self.inputs.encode(tokenizer, dev, max_length)

    def train_batches(self, epoch: int) -> list[Any]:
        groups = bucketed_batches(self.inputs.lengths(self.train_inputs), self.batch_size, self.seed, epoch)
        return [self.inputs.batch(self.inputs.collate([self.train_inputs[i] for i in g], self.pad_id),
                                  [self.train_labels[i] for i in g]) for g in groups]

    def loss(self, model: nn.Module, batch: Any) -> torch.Tensor:
        """The row's loss of one batch, (tokens, labels): the loss calls the model, bound to this row."""
        tokens, labels = batch
        device = device_of(model)
        return self.task.loss(partial(model, self.name), tokens.to(device), labels.to(device))

    def predictions(self, model: nn.Module, inputs: Sequence) -> list:
        """The course's prediction per encoded example, in the input's order."""
        def batch_predictions(group: list[int]) -> list:
            tokens = self.inputs.collate([inputs[i] for i in group], self.pad_id).to(device_of(model))
            return self.task.predict(model(self.name, tokens))
        return predict_in_order(self.inputs.lengths(inputs), batch_predictions)

    def evaluate(self, model: nn.Module) -> dict[str, float]:
        return self.task.metric(self.predictions(model, self.dev_inputs), [e.label for e in self.dev])

    def predict_examples(self, model: nn.Module, examples: Sequence) -> list:
        return self.predictions(model, self.inputs.encode(self.tokenizer, examples, self.max_length))
