"""Graded: BertPooler.forward, tanh(W h_[CLS] + b), the sequence summary the next-sentence head reads."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from graded_helpers import check_close, fail, randomize

from minbert.model import BertPooler

pytestmark = pytest.mark.component("pooler")

CLS_ONLY = "the pooler reads only the [CLS] vector, position 0"


@pytest.mark.points(2)
def test_pooler_is_tanh_of_a_dense_layer_on_cls(config):
    pooler = randomize(BertPooler(config)).eval()
    hidden = torch.randn(3, 7, config.hidden_size)

    def dense(x):
        return F.linear(x, pooler.dense.weight, pooler.dense.bias)

    check_close(pooler(hidden), torch.tanh(dense(hidden[:, 0])), "the pooled output (B, C)", [
        (lambda: torch.tanh(dense(hidden.mean(dim=1))), f"it pooled the mean of all tokens; {CLS_ONLY}"),
        (lambda: torch.tanh(dense(hidden[:, -1])), f"it pooled the last token; {CLS_ONLY}"),
        (lambda: dense(hidden[:, 0]), "the tanh is missing: tanh(W h_[CLS] + b)"),
        (lambda: F.gelu(dense(hidden[:, 0])), "the activation is tanh (BERT's TF code), not GELU"),
    ])


@pytest.mark.points(1)
def test_only_the_cls_position_matters(config):
    pooler = randomize(BertPooler(config)).eval()
    hidden = torch.randn(2, 5, config.hidden_size)
    changed = hidden.clone()
    changed[:, 1:] = torch.randn(2, 4, config.hidden_size) * 10
    moved = (pooler(changed) - pooler(hidden)).abs().max().item()
    if moved > 1e-6:
        fail(f"changing the tokens after [CLS] moved the pooled output by up to {moved:.3g}: {CLS_ONLY}")
