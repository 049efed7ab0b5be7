"""Word-level tags meet WordPiece: the alignment between words and their pieces, both ways.

Each word is encoded on its own, remembering which word each piece came from (`word_ids`, None for [CLS]
and [SEP]). Training (`piece_labels`): every piece carries its word's tag, or (`all_pieces=False`) only the
first, the others IGNORE (-100). Decoding (`word_predictions`): a word takes its first piece's tag, or
(`how="mean"`) the argmax of its pieces' averaged distributions; `word_vectors` does the same for the
vectors a CRF or a span model reads.

A word that gives no piece (a lone control character) becomes [UNK], so every word gets a prediction.
Words beyond the window get no piece; `word_predictions` gives them "O".

Read next: ../evaluation/entities.py.
"""

from __future__ import annotations

from typing import Sequence

import torch

from minbert.heads import IGNORE_INDEX
from minbert.text.tokenizer import BertTokenizer

IGNORE = IGNORE_INDEX  # -100, cross-entropy's ignore_index: the masked-LM loss skips these positions


def encode_words(tokenizer: BertTokenizer, words: Sequence[str],
                 max_length: int) -> tuple[list[int], list[int | None]]:
    """[CLS] pieces of every word [SEP], and per piece the index of its word (None for [CLS] and [SEP]).

    Words that do not fit in max_length - 2 pieces are left out (whole words only).
    """
    ids, word_ids = [tokenizer.cls_token_id], [None]
    for index, word in enumerate(words):
        pieces = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(word)) or [tokenizer.unk_token_id]
        if len(ids) + len(pieces) > max_length - 1:
            break
        ids.extend(pieces)
        word_ids.extend([index] * len(pieces))
    return ids + [tokenizer.sep_token_id], word_ids + [None]


def piece_labels(word_tags: Sequence[int], word_ids: Sequence[int | None],
                 all_pieces: bool = True) -> list[int]:
    """One training label per piece: the word's tag on its pieces (or on its first piece only), IGNORE
    elsewhere."""
    labels = []
    previous = None
    for word in word_ids:
        if word is None:  # [CLS], [SEP]
            labels.append(IGNORE)
        elif word != previous or all_pieces:
            labels.append(word_tags[word])
        else:  # a later piece of the same word
            labels.append(IGNORE)
        previous = word
    return labels


def word_index(word_ids: Sequence[int | None], length: int) -> list[int]:
    """word_ids as integers for a tensor: -1 for [CLS], [SEP] and padding up to `length` pieces."""
    return [-1 if w is None else w for w in word_ids] + [-1] * (length - len(word_ids))


def word_predictions(piece_scores: torch.Tensor, word_ids: Sequence[int | None], num_words: int,
                     how: str = "first") -> list[int]:
    """One predicted tag per word from per-piece scores (T, K): the first piece's argmax, or the argmax of the
    mean of the pieces' softmax distributions (how="mean"). Words without pieces (cut by the window) get 0
    (O)."""
    index = torch.tensor([word_index(word_ids, piece_scores.size(0))])
    vectors, present = word_vectors(piece_scores.softmax(-1)[None], index, num_words, how)
    predictions = vectors[0].argmax(-1).tolist()
    return [p if ok else 0 for p, ok in zip(predictions, present[0].tolist())]


def word_vectors(pieces: torch.Tensor, index: torch.Tensor, num_words: int,
                 how: str = "first") -> tuple[torch.Tensor, torch.Tensor]:
    """Per-piece vectors (B, T, X) -> per-word vectors (B, W, X), W = num_words, by the word's first piece or
    the mean of its pieces; and a (B, W) bool mask of the words that have pieces.

    index: (B, T) the word of each piece, -1 for [CLS], [SEP] and padding (see `word_index`). Both ways are
    one matrix product with an assignment matrix A (B, W, T): A[b, w, t] is 1 for the first piece of word w
    (how="first"), or 1 / (its number of pieces) for each of its pieces (how="mean").
    """
    if how not in ("first", "mean"):
        raise ValueError(f"how must be 'first' or 'mean', got {how!r}")
    words = torch.arange(num_words, device=index.device)
    assign = (index[:, None, :] == words[None, :, None]).to(pieces.dtype)  # (B, W, T): piece t is in word w
    if how == "first":
        assign = assign * (assign.cumsum(dim=-1) == 1)  # keep the first piece of each word
    counts = assign.sum(dim=-1)  # (B, W): 0 for a word cut by the window
    assign = assign / counts.clamp(min=1)[..., None]
    return assign @ pieces, counts > 0
