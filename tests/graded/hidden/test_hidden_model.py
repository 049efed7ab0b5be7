"""Graded, hidden: the whole model on other sentences (one empty, a pair first) against all-MiniLM-L6-v2."""

from __future__ import annotations

from pathlib import Path

import pytest
from whole_model import check_against_reference, load_student_model

pytestmark = [pytest.mark.component("model"), pytest.mark.checkpoint,
              pytest.mark.visibility("after_published")]

REFERENCE = Path(__file__).resolve().parent / "reference_model_hidden.safetensors"


@pytest.fixture(scope="module")
def minilm(embedded_model_dir):
    return load_student_model(embedded_model_dir)


@pytest.mark.points(3)
def test_every_layer_matches_all_minilm_on_other_sentences(minilm):
    check_against_reference(minilm, REFERENCE, pooler=False)


@pytest.mark.points(1)
def test_pooler_output_matches_all_minilm_on_other_sentences(minilm):
    check_against_reference(minilm, REFERENCE, pooler=True)
