"""Graded, hidden: uses_weight_decay on names from other models (RoBERTa, task heads, CRF)."""

from __future__ import annotations

import pytest
from graded_helpers import fail

from optim.param_groups import uses_weight_decay

pytestmark = [pytest.mark.component("no_decay"), pytest.mark.visibility("after_published")]


@pytest.mark.points(1)
def test_names_of_other_models():
    cases = {"roberta.encoder.layer.5.attention.output.LayerNorm.bias": False,
             "crf.transitions": True, "heads.0.classifier.bias": False, "span_scorer.weight": True,
             "model.layer_norm.bias": False, "debias.weight": True}
    for name, decays in cases.items():
        if uses_weight_decay(name) is not decays:
            fail(f"uses_weight_decay({name!r}) should be {decays}")
