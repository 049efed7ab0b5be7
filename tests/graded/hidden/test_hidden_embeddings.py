"""Graded, hidden: BertEmbeddings with padding ids and gradients reaching all three tables."""

from __future__ import annotations

import pytest
import torch
from graded_helpers import fail, randomize

from minbert.embeddings import BertEmbeddings

pytestmark = [pytest.mark.component("embeddings"), pytest.mark.visibility("after_published")]


@pytest.mark.points(2)
def test_gradients_reach_the_word_position_and_segment_tables(config):
    emb = randomize(BertEmbeddings(config)).eval()
    ids = torch.tensor([[5, 6, 7, 0]])
    segments = torch.tensor([[0, 1, 1, 0]])
    (emb(ids, segments) * torch.randn(1, 4, config.hidden_size)).sum().backward()
    tables = (("word", emb.word_embeddings.weight.grad, [5, 6, 7]),
              ("position", emb.position_embeddings.weight.grad, [0, 1, 2, 3]),
              ("segment (token type)", emb.token_type_embeddings.weight.grad, [0, 1]))
    for name, grad, rows in tables:
        if grad is None or grad[rows].abs().sum(-1).min() == 0:
            fail(f"no gradient reaches the {name} embedding rows the input uses: each table's lookup must "
                 "be part of the sum")
    if emb.word_embeddings.weight.grad[0].abs().sum() != 0:
        fail("the [PAD] word embedding (id 0) received a gradient: look the ids up in word_embeddings, "
             "whose padding row stays fixed")
    if emb.position_embeddings.weight.grad[4:].abs().sum() != 0:
        fail("positions beyond the sequence length (4) received a gradient: use positions 0..T-1 only")
