"""Graded tests: small, fast, one file per component, each test independent of the other TODOs.

Every test declares its component (module-level `pytestmark`) and points (`@pytest.mark.points`); the
grader (python -m grading.grade) reads them; where a component has several TODOs, a test also names the
one it checks (`@pytest.mark.todo`). A test of one component never runs another component's TODO: where
it needs one (the layer needs attention, the head split and the FFN), it uses `graded_helpers.use_stand_ins`
or a stand-in of its own, so a bug in one TODO costs points in that component only. Failures say what is
wrong through `graded_helpers.check_close` / `check_value` / `fail`. Files in hidden/ are not in the
handout.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from minbert.config import BertConfig

sys.path.insert(0, str(Path(__file__).resolve().parent))  # graded_helpers, for hidden/ too


@pytest.fixture
def config() -> BertConfig:
    """The tiny model (hidden 32, 4 heads, intermediate 37), dropout off."""
    return BertConfig.tiny(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


@pytest.fixture
def padding_mask() -> torch.Tensor:
    """(B=3, T=7): one full row, two padded."""
    return torch.tensor([[1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 0, 0], [1, 1, 1, 0, 0, 0, 0]])
