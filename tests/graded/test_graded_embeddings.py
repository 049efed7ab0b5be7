"""Graded: BertEmbeddings.forward, the sum of word, position and segment embeddings, LayerNorm, dropout."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from graded_helpers import TOL, randomize

from minbert.embeddings import BertEmbeddings

pytestmark = pytest.mark.component("embeddings")


def expected(emb: BertEmbeddings, ids: torch.Tensor, segments: torch.Tensor) -> torch.Tensor:
    """The definition (BERT paper §3, Figure 2), through F.embedding and F.layer_norm."""
    T = ids.size(1)
    summed = (F.embedding(ids, emb.word_embeddings.weight)
              + F.embedding(torch.arange(T), emb.position_embeddings.weight)
              + F.embedding(segments, emb.token_type_embeddings.weight))
    ln = emb.LayerNorm
    return F.layer_norm(summed, ln.normalized_shape, ln.weight, ln.bias, ln.eps)


@pytest.mark.points(3)
def test_embeddings_are_layernorm_of_word_plus_position_plus_segment(config):
    emb = randomize(BertEmbeddings(config)).eval()
    ids = torch.randint(1, config.vocab_size, (2, 9))
    segments = torch.tensor([[0] * 5 + [1] * 4, [0] * 3 + [1] * 6])
    torch.testing.assert_close(emb(ids, segments), expected(emb, ids, segments), **TOL)


@pytest.mark.points(1)
def test_embeddings_default_segments_are_zero(config):
    emb = randomize(BertEmbeddings(config)).eval()
    ids = torch.randint(1, config.vocab_size, (2, 6))
    torch.testing.assert_close(emb(ids), expected(emb, ids, torch.zeros_like(ids)), **TOL)


@pytest.mark.points(1)
def test_embeddings_accept_word_vectors_directly(config):
    emb = randomize(BertEmbeddings(config)).eval()
    ids = torch.randint(1, config.vocab_size, (2, 6))
    segments = torch.randint(0, 2, (2, 6))
    words = emb.word_embeddings(ids)
    torch.testing.assert_close(emb(inputs_embeds=words, token_type_ids=segments),
                               expected(emb, ids, segments), **TOL)


@pytest.mark.points(1)
def test_embeddings_apply_dropout_in_training_only(config):
    emb = randomize(BertEmbeddings(config.replace(hidden_dropout_prob=0.5)))
    ids = torch.randint(1, config.vocab_size, (2, 6))
    emb.train()
    assert (emb(ids) == 0).float().mean() > 0.2, "no dropout in training mode"
    emb.eval()
    torch.testing.assert_close(emb(ids), expected(emb, ids, torch.zeros_like(ids)), **TOL)
