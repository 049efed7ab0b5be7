"""Graded, hidden: BertEmbeddings with padding ids and gradients reaching all three tables."""

from __future__ import annotations

import pytest
import torch
from graded_helpers import randomize

from minbert.embeddings import BertEmbeddings

pytestmark = [pytest.mark.component("embeddings"), pytest.mark.visibility("after_published")]


@pytest.mark.points(2)
def test_gradients_reach_the_word_position_and_segment_tables(config):
    emb = randomize(BertEmbeddings(config)).eval()
    ids = torch.tensor([[5, 6, 7, 0]])
    segments = torch.tensor([[0, 1, 1, 0]])
    (emb(ids, segments) * torch.randn(1, 4, config.hidden_size)).sum().backward()
    assert emb.word_embeddings.weight.grad[[5, 6, 7]].abs().sum(-1).min() > 0
    assert emb.word_embeddings.weight.grad[0].abs().sum() == 0  # the padding row stays fixed
    assert emb.position_embeddings.weight.grad[:4].abs().sum(-1).min() > 0
    assert emb.position_embeddings.weight.grad[4:].abs().sum() == 0
    assert emb.token_type_embeddings.weight.grad.abs().sum(-1).min() > 0
