"""Graded, hidden: the masked-LM loss against cross-entropy on the gathered positions (float64), and the
next-sentence loss's gradient."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from graded_helpers import check_close, check_value

from minbert.heads import IGNORE_INDEX, masked_lm_loss, next_sentence_loss

pytestmark = [pytest.mark.component("pretraining_heads"), pytest.mark.visibility("after_published")]


@pytest.mark.points(1)
@pytest.mark.todo("masked_lm_loss")
def test_masked_lm_loss_on_a_random_batch():
    logits = torch.randn(4, 9, 13, dtype=torch.float64)
    labels = torch.randint(0, 13, (4, 9))
    labels[torch.rand(4, 9) > 0.15] = IGNORE_INDEX
    labels[0, 0] = 3  # at least one predicted position
    kept = labels != IGNORE_INDEX
    check_value(masked_lm_loss(logits, labels), -torch.log_softmax(logits[kept], dim=-1).gather(
        1, labels[kept][:, None]).mean().item(), "the masked-LM loss of a random batch", tolerance=1e-9)


@pytest.mark.points(1)
@pytest.mark.todo("next_sentence_loss")
def test_next_sentence_gradient_is_softmax_minus_one_hot():
    logits = torch.randn(6, 2, requires_grad=True)
    labels = torch.tensor([0, 1, 1, 0, 0, 1])
    next_sentence_loss(logits, labels).backward()
    check_close(logits.grad, (logits.detach().softmax(-1) - F.one_hot(labels, 2)) / 6,
                "the gradient of the next-sentence loss")
