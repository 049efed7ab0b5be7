"""Graded, hidden: uses_weight_decay on names from other models (RoBERTa, task heads, CRF)."""

from __future__ import annotations

import pytest
from graded_helpers import check_equal, expectation

from optim.param_groups import uses_weight_decay

pytestmark = [pytest.mark.component("no_decay"), pytest.mark.visibility("after_published")]


@pytest.mark.points(1)
def test_names_of_other_models():
    for name in ("roberta.encoder.layer.5.attention.output.LayerNorm.bias", "crf.transitions",
                 "heads.0.classifier.bias", "span_scorer.weight", "model.layer_norm.bias", "debias.weight"):
        check_equal(uses_weight_decay(name), decays(name), f"uses_weight_decay({name!r})")


@expectation
def decays(name: str) -> bool:
    return {"roberta.encoder.layer.5.attention.output.LayerNorm.bias": False, "crf.transitions": True,
            "heads.0.classifier.bias": False, "span_scorer.weight": True, "model.layer_norm.bias": False,
            "debias.weight": True}[name]
