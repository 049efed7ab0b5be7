"""Graded: the whole model. all-MiniLM-L6-v2 loaded into your BertModel gives the real checkpoint's outputs.

Every model TODO of yours runs here, with no stand-in (as in CS224N's sanity_check.py): pass the graded
tests of the embeddings, the attention, the layer, the encoder and the pooler first; a failure names the
first output that differs (the embeddings, which layer, or the pooler). The expected outputs are those of
`transformers`' BertModel on the same weights and sentences (tests/graded/reference/model.safetensors).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from whole_model import check_against_reference, load_student_model

pytestmark = [pytest.mark.component("model"), pytest.mark.checkpoint]

REFERENCE = Path(__file__).resolve().parent / "reference" / "model.safetensors"


@pytest.fixture(scope="module")
def minilm(embedded_model_dir):
    return load_student_model(embedded_model_dir)


@pytest.mark.points(3)
def test_every_layer_matches_all_minilm_on_a_padded_batch_with_a_pair(minilm):
    """The embeddings, each of the 6 layers' outputs and last_hidden_state, at every real token."""
    check_against_reference(minilm, REFERENCE, pooler=False)


@pytest.mark.points(1)
def test_pooler_output_matches_all_minilm(minilm):
    """The pooler output, after every hidden state."""
    check_against_reference(minilm, REFERENCE, pooler=True)
