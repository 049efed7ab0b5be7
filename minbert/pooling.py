"""Sentence pooling: one vector per sequence from BertModel's token vectors.

BERT itself summarises a sequence with its [CLS] vector (and the pooler's tanh layer on top of it, which
the next-sentence head reads). Sentence-BERT (Reimers & Gurevych 2019, §3) found that averaging the real
tokens' vectors makes better sentence embeddings; max pooling is the third option it compares. A head with
weights of its own can also learn how much each token counts (`attention_pool`). Padding must never count:
a sentence's vector may not depend on how long its batch-mates are.

Shape legend: B batch, T tokens, C hidden size.

Read next: task_heads.py (the heads fine-tuning puts on a pooled vector).
"""

from __future__ import annotations

import torch

from minbert.model import BertModelOutput

POOLINGS = ("cls", "mean", "max", "pooler")


def mean_pool(hidden_states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Average of the real tokens' vectors (SBERT's default pooling). (B, T, C), (B, T) -> (B, C).

    attention_mask: 1 = token, 0 = padding (any numeric or bool dtype). A row with no real token at all
    (all padding: an empty chunk, say) gives the zero vector, with no division by zero (no NaN, no inf).
    """
    # Hints: 1. padding must not count, neither in the sum nor in the number of tokens.
    #        2. a row with no real token has a count of 0, and 0 / 0 is NaN: its mean must come out as
    #           the zero vector.
    # BEGIN SOLUTION
    mask = attention_mask.unsqueeze(-1).to(hidden_states.dtype)  # (B, T, 1)
    return (hidden_states * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
    # END SOLUTION


def max_pool(hidden_states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Element-wise maximum over the real tokens. (B, T, C), (B, T) -> (B, C)."""
    # Hint: out[b, c] = max over the real tokens t of h[b, t, c]. Padding must never win, even in a
    # feature where every real value is negative (a padding value of 0 would).
    # BEGIN SOLUTION
    padding = (attention_mask == 0).unsqueeze(-1)  # (B, T, 1)
    return hidden_states.masked_fill(padding, torch.finfo(hidden_states.dtype).min).amax(dim=1)
    # END SOLUTION


def attention_pool(hidden_states: torch.Tensor, attention_mask: torch.Tensor,
                   scores: torch.Tensor) -> torch.Tensor:
    """Weighted average of the real tokens' vectors, the weights softmax(scores) over them.
    (B, T, C), (B, T), (B, T) -> (B, C).

    With scores = h_t . w for a learned w this is self-attentive pooling (Lin et al. 2017, one hop): the
    classifier learns which tokens to read, where mean pooling reads every token alike.
    """
    scores = scores.masked_fill(attention_mask == 0, float("-inf"))  # padding gets weight 0
    weights = scores.softmax(dim=-1)  # (B, T), summing to 1 over the real tokens
    # sum_t w_t h_t is the mean over the n real tokens of n w_t h_t: mean_pool keeps the masked average.
    real = attention_mask.sum(dim=-1, keepdim=True).to(weights.dtype)  # (B, 1), n
    return mean_pool(hidden_states * (weights * real).unsqueeze(-1), attention_mask)


def pool(output: BertModelOutput, attention_mask: torch.Tensor, how: str) -> torch.Tensor:
    """One vector per sequence: "cls" (the [CLS] token), "mean", "max", or "pooler" (tanh layer)."""
    if how == "cls":
        # Hint: h_[CLS], the vector of the first token of every sequence (BERT paper §3, Figure 1): (B, C).
        # BEGIN SOLUTION
        return output.last_hidden_state[:, 0]
        # END SOLUTION
    if how == "mean":
        return mean_pool(output.last_hidden_state, attention_mask)
    if how == "max":
        return max_pool(output.last_hidden_state, attention_mask)
    if how == "pooler":
        if output.pooler_output is None:
            raise ValueError("pooling 'pooler' needs a model built with its pooling layer")
        return output.pooler_output
    raise ValueError(f"pooling must be one of {POOLINGS}, got {how!r}")
