"""Graded, hidden: BertEmbeddings' gradients reaching the rows of all three tables that the input uses."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from graded_helpers import check_close, expectation, fail, randomize

from minbert.embeddings import BertEmbeddings

pytestmark = [pytest.mark.component("embeddings"), pytest.mark.visibility("after_published")]


@pytest.mark.points(2)
def test_gradients_reach_the_word_position_and_segment_tables(config):
    emb = randomize(BertEmbeddings(config)).eval()
    ids = torch.tensor([[5, 6, 7, 0]])
    segments = torch.tensor([[0, 1, 1, 0]])
    weights = torch.randn(1, 4, config.hidden_size)
    (emb(ids, segments) * weights).sum().backward()
    # The rows the input uses; the [PAD] row (id 0) is left out: whether it learns is the table's choice
    # (nn.Embedding's padding_idx), not the forward's.
    tables = (("word", "word_embeddings", [5, 6, 7]), ("position", "position_embeddings", list(range(8))),
              ("segment (token type)", "token_type_embeddings", [0, 1]))
    for name, table, rows in tables:
        grad = getattr(emb, table).weight.grad
        if grad is None:
            fail(f"no gradient reaches the {name} embeddings: each table's lookup must be part of the sum")
        check_close(grad[rows], table_gradient(emb, ids, segments, weights, table)[rows],
                    f"the gradient of the {name} table's rows {rows}", mistakes=[
                        (torch.zeros(len(rows), config.hidden_size), f"no gradient reaches the {name} "
                         "embedding rows the input uses: each table's lookup must be part of the sum")])


@expectation
def table_gradient(emb, ids, segments, weights, table: str) -> torch.Tensor:
    """The gradient a table gets from the same loss, through torch's own lookups and LayerNorm."""
    tables = {name: getattr(emb, name).weight.detach().clone().requires_grad_(True)
              for name in ("word_embeddings", "position_embeddings", "token_type_embeddings")}
    total = (tables["word_embeddings"][ids] + tables["position_embeddings"][:ids.size(1)]
             + tables["token_type_embeddings"][segments])
    ln = emb.LayerNorm
    (F.layer_norm(total, ln.normalized_shape, ln.weight, ln.bias, ln.eps) * weights).sum().backward()
    return tables[table].grad
