"""Tests for tests/model_references.py: the stored outputs of the whole-model graded tests are what
transformers computes for the listed sentences, and its --check notices when they are not."""

from __future__ import annotations

import json

import pytest
from safetensors import safe_open
from safetensors.torch import load_file

import model_references
from model_references import SENTENCE_SETS, STAFF_ROOT, check_stored


@pytest.mark.parametrize("relative", SENTENCE_SETS)
def test_stored_files_hold_the_listed_sentences(relative):
    with safe_open(str(STAFF_ROOT / relative), "pt") as stored:
        assert json.loads(stored.metadata()["sentences"]) == [list(pair) for pair in SENTENCE_SETS[relative]]


@pytest.mark.slow
@pytest.mark.checkpoint
def test_stored_files_are_transformers_outputs_of_the_listed_sentences(embedded_model_dir, capsys):
    """About 3 s once transformers is imported (10 s with the import): MiniLM on both sentence sets."""
    pytest.importorskip("transformers")
    assert model_references.main(["--check"]) == 0, capsys.readouterr().out
    assert capsys.readouterr().out.count("largest difference per hidden state") == len(SENTENCE_SETS)


@pytest.mark.parametrize("change", ["output", "sentences"])
def test_check_fails_on_a_changed_output_or_batch(change, capsys):
    relative = next(iter(SENTENCE_SETS))
    tensors = load_file(STAFF_ROOT / relative)
    assert check_stored(relative, tensors)
    if change == "output":
        tensors["hidden_states"][3, 5, 7] += 1e-4
    else:
        tensors["input_ids"] = tensors["input_ids"][:, :-1]
    assert not check_stored(relative, tensors)
    assert ("the sentences changed" in capsys.readouterr().out) == (change == "sentences")
