"""Graded: BertEmbeddings.forward, the sum of word, position and segment embeddings, LayerNorm, dropout."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from graded_helpers import check_close, fail, randomize

from minbert.embeddings import BertEmbeddings

pytestmark = pytest.mark.component("embeddings")


def expected(emb: BertEmbeddings, ids: torch.Tensor, segments: torch.Tensor) -> torch.Tensor:
    """The definition (BERT paper §3, Figure 2), through F.embedding and F.layer_norm."""
    return _norm(emb, _sum(emb, ids, segments))


def _sum(emb, ids, segments, words=True, positions=True, types=True):
    T = ids.size(1)
    total = torch.zeros(*ids.shape, emb.word_embeddings.embedding_dim)
    if words:
        total = total + F.embedding(ids, emb.word_embeddings.weight)
    if positions:
        total = total + F.embedding(torch.arange(T), emb.position_embeddings.weight)
    if types:
        total = total + F.embedding(segments, emb.token_type_embeddings.weight)
    return total


def _norm(emb, x):
    ln = emb.LayerNorm
    return F.layer_norm(x, ln.normalized_shape, ln.weight, ln.bias, ln.eps)


def mistakes(emb, ids, segments):
    return [(lambda: _norm(emb, _sum(emb, ids, segments, types=False)),
             "the segment (token type) embeddings are missing from the sum"),
            (lambda: _norm(emb, _sum(emb, ids, segments, positions=False)),
             "the position embeddings are missing from the sum"),
            (lambda: _sum(emb, ids, segments), "the LayerNorm over the sum is missing"),
            (lambda: _norm(emb, _sum(emb, ids, torch.zeros_like(segments))),
             "every token got segment 0: use the token_type_ids given")]


@pytest.mark.points(3)
def test_embeddings_are_layernorm_of_word_plus_position_plus_segment(config):
    emb = randomize(BertEmbeddings(config)).eval()
    ids = torch.randint(1, config.vocab_size, (2, 9))
    segments = torch.tensor([[0] * 5 + [1] * 4, [0] * 3 + [1] * 6])
    check_close(emb(ids, segments), expected(emb, ids, segments), "the embeddings",
                mistakes(emb, ids, segments))


@pytest.mark.points(1)
def test_embeddings_default_segments_are_zero(config):
    emb = randomize(BertEmbeddings(config)).eval()
    ids = torch.randint(1, config.vocab_size, (2, 6))
    check_close(emb(ids), expected(emb, ids, torch.zeros_like(ids)),
                "the embeddings without token_type_ids (every token in segment 0)",
                mistakes(emb, ids, torch.zeros_like(ids)))


@pytest.mark.points(1)
def test_embeddings_accept_word_vectors_directly(config):
    emb = randomize(BertEmbeddings(config)).eval()
    ids = torch.randint(1, config.vocab_size, (2, 6))
    segments = torch.randint(0, 2, (2, 6))
    words = emb.word_embeddings(ids)
    check_close(emb(inputs_embeds=words, token_type_ids=segments), expected(emb, ids, segments),
                "the embeddings given inputs_embeds (word vectors instead of ids)",
                mistakes(emb, ids, segments))


@pytest.mark.points(1)
def test_embeddings_apply_dropout_in_training_only(config):
    emb = randomize(BertEmbeddings(config.replace(hidden_dropout_prob=0.5)))
    ids = torch.randint(1, config.vocab_size, (2, 6))
    emb.train()
    zeros = (emb(ids) == 0).float().mean().item()
    if zeros < 0.2:
        fail(f"in training mode with hidden_dropout_prob=0.5 only {zeros:.0%} of the outputs are 0: apply "
             "dropout after the LayerNorm")
    emb.eval()
    check_close(emb(ids), expected(emb, ids, torch.zeros_like(ids)),
                "the embeddings in eval mode (no dropout)")
