"""Sentences and sentence pairs to word-piece ids, unpadded: each batch is padded once, to its own longest,
when it is collated (batching.py).

Read next: batching.py.
"""

from __future__ import annotations

from typing import Sequence

from minbert.text.tokenizer import BertTokenizer


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
