"""The batches bench/model_speed.py times: uniform lengths, or lengths drawn from the course's training data.

`course_lengths` tokenises the SST, Quora and STS training sentences with the embedded model's vocabulary
(pairs as one sequence), so the "data" batches have the lengths users meet; `matmul_flops` counts what a
batch costs with and without its padding.

Read next: model_speed.py.
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from pathlib import Path

import torch

from minbert.config import BertConfig
from minbert.text.tokenizer import BertTokenizer

# The course's training files and the text columns of each (pairs are encoded as one sequence).
COURSE_FILES = {"ids-sst-train.csv": ("sentence",), "quora-train.csv": ("sentence1", "sentence2"),
                "sts-train.csv": ("sentence1", "sentence2")}


@dataclass
class Batch:
    input_ids: torch.Tensor  # (B, T), padding id 0 after each sequence's end
    attention_mask: torch.Tensor  # (B, T), 1 = token, 0 = padding
    target: torch.Tensor  # (B, T, C) fixed random weights: loss = sum(last_hidden_state * target) on tokens

    @property
    def real_tokens(self) -> int:
        return int(self.attention_mask.sum())


# ----- batches ---------------------------------------------------------------------------------------


def default_data_dir() -> Path:
    """$MINBERT_DATA/cs224n, else ../shared/data/cs224n beside the checkout (as the tasks look)."""
    shared = os.environ.get("MINBERT_DATA")
    if shared:
        return Path(shared) / "cs224n"
    return Path(__file__).resolve().parents[2] / "shared" / "data" / "cs224n"


def course_lengths(data_dir: Path, max_len: int) -> list[int]:
    """Encoded lengths, cut at max_len, of every training example of SST, Quora and STS."""
    tokenizer = BertTokenizer.from_pretrained()  # the embedded checkpoint's vocabulary (bert-base-uncased)
    lengths: list[int] = []
    for name, columns in COURSE_FILES.items():
        path = data_dir / name
        if not path.is_file():
            raise FileNotFoundError(f"{path} is missing: set MINBERT_DATA to the shared datasets folder, "
                                    "or give --data-dir the folder holding the course's CSV files")
        with open(path, encoding="utf-8", newline="") as handle:
            rows = [row for row in csv.DictReader(handle, delimiter="\t")
                    if all(isinstance(row.get(c), str) and row[c].strip() for c in columns)]
        texts = [[row[c].strip() for row in rows] for c in columns]
        encoded = tokenizer.batch_encode(*texts, max_length=max_len, return_tensors=False)
        lengths += [sum(mask) for mask in encoded.attention_mask]
    return lengths


def make_batch(config: BertConfig, batch_size: int, max_len: int, seed: int = 0,
               pool: list[int] | None = None) -> Batch:
    """Lengths uniform in [2, max_len] (at least [CLS] and [SEP]), or drawn from `pool`; padded."""
    g = torch.Generator().manual_seed(seed)
    if pool is None:
        lengths = torch.randint(2, max_len + 1, (batch_size,), generator=g)
    else:
        lengths = torch.tensor(pool)[torch.randint(len(pool), (batch_size,), generator=g)]
    T = int(lengths.max())
    mask = (torch.arange(T)[None, :] < lengths[:, None]).long()  # (B, T)
    ids = torch.randint(1, config.vocab_size, (batch_size, T), generator=g) * mask
    target = torch.randn(batch_size, T, config.hidden_size, generator=g) * mask[..., None]
    return Batch(ids, mask, target)


def describe(lengths: torch.Tensor) -> str:
    B, T = len(lengths), int(lengths.max())
    return (f"lengths mean {lengths.float().mean():.1f}, median {lengths.median():.0f}, max {T}; "
            f"{100 * (1 - lengths.sum() / (B * T)):.0f}% of the padded batch is padding")


# ----- FLOPs and peak --------------------------------------------------------------------------------


def matmul_flops(config: BertConfig, lengths: list[int], unpadded: bool) -> int:
    """Forward matmul FLOPs: 2 m n k per linear and per attention product, for the positions computed."""
    C, I, L = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    B, T = len(lengths), max(lengths)
    tokens = sum(lengths) if unpadded else B * T
    squares = sum(n * n for n in lengths) if unpadded else B * T * T  # query-key pairs
    linears = 2 * tokens * (4 * C * C + 2 * C * I)  # query, key, value, attention output; FFN in and out
    attention = 2 * 2 * squares * C  # Q K^T and probs V, summed over the heads
    return L * (linears + attention) + 2 * B * C * C  # + the pooler
