"""Graded: BertPooler.forward, tanh(W h_[CLS] + b), the sequence summary the next-sentence head reads."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from graded_helpers import check_close, check_that, fail, randomize
from safetensors.torch import load_file

from minbert.model import BertPooler

pytestmark = pytest.mark.component("pooler")

CLS_ONLY = "the pooler reads only the [CLS] vector, position 0"
STORED = Path(__file__).resolve().parent / "reference" / "pooler.safetensors"


@pytest.mark.points(2)
def test_pooler_is_tanh_of_a_dense_layer_on_cls(config):
    t = load_file(str(STORED))  # made by a staff script
    pooler = BertPooler(config).eval()
    pooler.load_state_dict({name: t[name] for name in pooler.state_dict()})
    check_close(pooler(t["hidden"]), t["output"], "the pooled output (B, C) (stored weights)", [
        (t["mean_of_tokens"], f"it pooled the mean of all tokens; {CLS_ONLY}"),
        (t["last_token"], f"it pooled the last token; {CLS_ONLY}"),
        (t["no_tanh"], "the tanh is missing: tanh(W h_[CLS] + b)"),
        (t["gelu"], "the activation is tanh (BERT's TF code), not GELU"),
    ])


@pytest.mark.points(1)
def test_only_the_cls_position_matters(config):
    t = load_file(str(STORED))
    pooler = BertPooler(config).eval()
    pooler.load_state_dict({name: t[name] for name in pooler.state_dict()})
    hidden = t["hidden"]
    changed = hidden.clone()
    changed[:, 1:] = torch.randn(*hidden[:, 1:].shape) * 10
    check_close(pooler(changed), t["output"], "the pooled output of the stored vectors with every token "
                f"after [CLS] changed (it must not change: {CLS_ONLY})", [
        (t["mean_of_tokens"], f"it pooled the mean of all tokens; {CLS_ONLY}")])
    pooled = pooler(hidden)
    if not isinstance(pooled, torch.Tensor) or pooled.shape != (len(hidden), config.hidden_size):
        fail(f"the pooled output should be a (B, C) = ({len(hidden)}, {config.hidden_size}) tensor, got "
             f"{tuple(pooled.shape) if isinstance(pooled, torch.Tensor) else type(pooled).__name__}")
    moved = (pooler(changed) - pooled).abs().max().item()
    check_that(moved <= 1e-6, "changing the tokens after [CLS] moved the pooled output by up "
               f"to {moved:.3g}: {CLS_ONLY}")
    changed[:, 0] += 1.0
    check_that(not torch.allclose(pooler(changed), pooled), "changing the [CLS] vector did not move the "
               f"pooled output: {CLS_ONLY}")
