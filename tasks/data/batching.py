"""Sentences and pairs to unpadded word-piece ids, and length-bucketed batches with dynamic padding: most of
the speed of a CPU training loop.

Each text is encoded once, unpadded (`encode_texts`, `encode_pairs`: the tokenizer's padding=False).
Padding every batch to 128 tokens makes the model compute on padding (SST sentences average about 25
pieces). Instead the examples are shuffled (from the seed and the epoch), cut into large buckets each
sorted by length, cut into batches of neighbours, the batches shuffled, and each batch padded only to its
own longest. Every example appears once per epoch, in a random but repeatable order. `predict_in_order`
runs batches sorted by length and puts the predictions back in order.

Shape legend: B batch, T tokens (the longest sequence in the batch).

Read next: ../training/loop.py (where the batches are used).
"""

from __future__ import annotations

import random
from typing import Callable, Iterable, NamedTuple, Sequence, TypeVar

import torch

from minbert.text.tokenizer import BertTokenizer

# Examples per batch when predicting: no activations are kept for a backward pass, so it can be larger than
# a training batch.
EVAL_BATCH_SIZE = 128
Prediction = TypeVar("Prediction")


def encode_texts(tokenizer: BertTokenizer, texts: Sequence[str], max_length: int,
                 truncation: str = "head") -> list[list[int]]:
    """[CLS] text [SEP] ids for each text, unpadded (the tokenizer's padding=False).

    truncation: what a text longer than max_length keeps (minbert/text/truncation.py's ALL_STRATEGIES).
    """
    return tokenizer(list(texts), padding=False, truncation=truncation, max_length=max_length,
                     return_tensors=None, return_attention_mask=False)["input_ids"]


def encode_pairs(tokenizer: BertTokenizer, first: Sequence[str], second: Sequence[str], max_length: int,
                 truncation: str = "head") -> tuple[list[list[int]], list[list[int]]]:
    """[CLS] A [SEP] B [SEP] ids and segment ids per pair, unpadded (for a cross-encoder).

    Too long a pair loses pieces from its longer side first; each side keeps what `truncation` says.
    """
    encoded = tokenizer(list(first), list(second), padding=False, truncation=truncation,
                        max_length=max_length, return_tensors=None, return_attention_mask=False)
    return encoded["input_ids"], encoded["token_type_ids"]


class TokenBatch(NamedTuple):
    input_ids: torch.Tensor  # (B, T)
    attention_mask: torch.Tensor  # (B, T), 1 = token, 0 = padding
    token_type_ids: torch.Tensor  # (B, T)

    def to(self, device: torch.device | str) -> "TokenBatch":
        return TokenBatch(*(t.to(device) for t in self))


def pad_batch(sequences: Sequence[Sequence[int]], segments: Sequence[Sequence[int]] | None = None,
              pad_id: int = 0) -> TokenBatch:
    """Pad id lists to the longest one: (B, T) ids, mask and segment ids."""
    if not sequences:
        raise ValueError("cannot pad an empty batch")
    longest = max(len(s) for s in sequences)
    input_ids = torch.full((len(sequences), longest), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((len(sequences), longest), dtype=torch.long)
    token_type_ids = torch.zeros((len(sequences), longest), dtype=torch.long)
    for row, ids in enumerate(sequences):
        input_ids[row, :len(ids)] = torch.as_tensor(ids, dtype=torch.long)
        attention_mask[row, :len(ids)] = 1
        if segments is not None:
            token_type_ids[row, :len(ids)] = torch.as_tensor(segments[row], dtype=torch.long)
    return TokenBatch(input_ids, attention_mask, token_type_ids)


def bucketed_batches(lengths: Sequence[int], batch_size: int, seed: int, epoch: int,
                     bucket_batches: int = 50) -> list[list[int]]:
    """Indices of the examples, grouped into batches of similar length, in a random but fixed order.

    lengths: one per example (for a pair encoded separately, the longer side).
    bucket_batches: how many batches one sorted bucket spans; larger means less padding but less
    randomness in who shares a batch.
    """
    if batch_size <= 0:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    rng = random.Random(f"{seed}-{epoch}")  # a string seed hashes stably across runs and platforms
    order = list(range(len(lengths)))
    rng.shuffle(order)
    bucket_size = batch_size * bucket_batches
    batches = []
    for start in range(0, len(order), bucket_size):
        bucket = sorted(order[start:start + bucket_size], key=lambda i: lengths[i])
        batches.extend(bucket[i:i + batch_size] for i in range(0, len(bucket), batch_size))
    rng.shuffle(batches)
    return batches


def sorted_batches(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """For evaluation: batches sorted by length (least padding); callers put predictions back in order."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


def predict_in_order(lengths: Sequence[int], predict: Callable[[list[int]], Iterable[Prediction]],
                     batch_size: int = EVAL_BATCH_SIZE) -> list[Prediction]:
    """One prediction per example, in the order of `lengths`.

    predict: the indices of one batch -> one prediction per index; it is called on `sorted_batches`, so
    that each batch holds examples of similar length and pads little.
    """
    predictions: list = [None] * len(lengths)
    for group in sorted_batches(lengths, batch_size):
        for i, prediction in zip(group, predict(group), strict=True):
            predictions[i] = prediction
    return predictions


def device_of(model: torch.nn.Module) -> torch.device:
    """Where a model's batches must go: the device of its first parameter."""
    return next(model.parameters()).device
