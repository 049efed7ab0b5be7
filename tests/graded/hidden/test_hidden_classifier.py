"""Graded, hidden: the classifier head in training mode, and the classification loss on five classes."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from graded_helpers import check_close, check_that, check_value

import minbert.task_heads
from minbert.model import BertModelOutput
from minbert.task_heads import SentenceClassifier, classification_loss

pytestmark = [pytest.mark.component("classifier"), pytest.mark.visibility("after_published")]


@pytest.mark.points(1)
@pytest.mark.todo("SentenceClassifier.forward")
def test_head_drops_out_in_training_and_not_in_eval(monkeypatch):
    pooled = torch.randn(6, 16)
    monkeypatch.setattr(minbert.task_heads, "pool", lambda output, mask, how: pooled)
    head = SentenceClassifier(16, 3, dropout=0.5, pooling="mean")
    out = BertModelOutput(torch.randn(6, 4, 16), None, None, None)
    mask = torch.ones(6, 4, dtype=torch.long)
    head.train()
    check_that(not torch.allclose(head(out, mask), head(out, mask)), "in training mode, with dropout 0.5, "
               "the head gave the same logits twice: apply self.dropout")
    head.eval()
    check_close(head(out, mask), F.linear(pooled, head.classifier.weight, head.classifier.bias),
                "the logits in eval mode (no dropout)")


@pytest.mark.points(1)
@pytest.mark.todo("classification_loss")
def test_classification_loss_five_classes_by_hand():
    logits = torch.tensor([[0.0, 0.0, 0.0, 0.0, math.log(6.0)]])  # probabilities 1/10, ..., 6/10
    loss = classification_loss(logits, torch.tensor([4]))
    check_value(loss, -math.log(0.6), "the loss of one sentence whose gold class has probability 0.6",
                tolerance=1e-6)
