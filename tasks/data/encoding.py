"""Sentences and sentence pairs to word-piece ids, unpadded: batches are padded later, each to its own longest
(batching.py).

Read next: batching.py.
"""

from __future__ import annotations

from typing import Sequence

from minbert.text.tokenizer import BertTokenizer


def encode_texts(tokenizer: BertTokenizer, texts: Sequence[str], max_length: int,
                 truncation: str = "head") -> list[list[int]]:
    """[CLS] text [SEP] ids for each text, unpadded (batches are padded later, to their own longest).

    truncation: what a text longer than max_length keeps (minbert.text.tokenizer.TRUNCATION_STRATEGIES).
    """
    encoded = tokenizer.batch_encode(list(texts), max_length=max_length, truncation=truncation,
                                     return_tensors=False)
    return [ids[:sum(mask)] for ids, mask in zip(encoded.input_ids, encoded.attention_mask)]


def encode_pairs(tokenizer: BertTokenizer, first: Sequence[str], second: Sequence[str], max_length: int,
                 truncation: str = "head") -> tuple[list[list[int]], list[list[int]]]:
    """[CLS] A [SEP] B [SEP] ids and segment ids per pair, unpadded (for a cross-encoder).

    Too long a pair loses pieces from its longer side first; each side keeps what `truncation` says.
    """
    encoded = tokenizer.batch_encode(list(first), list(second), max_length=max_length, truncation=truncation,
                                     return_tensors=False)
    lengths = [sum(mask) for mask in encoded.attention_mask]
    return ([ids[:n] for ids, n in zip(encoded.input_ids, lengths)],
            [seg[:n] for seg, n in zip(encoded.token_type_ids, lengths)])
