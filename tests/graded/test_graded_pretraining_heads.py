"""Graded: the pre-training heads and losses (BERT §3.1): the tied masked-LM decoder, the masked-LM loss
over the predicted positions only, and the next-sentence loss."""

from __future__ import annotations

import pytest
import torch
from graded_helpers import check_close, check_value, fail, randomize

from minbert.heads import IGNORE_INDEX, BertLMPredictionHead, masked_lm_loss, next_sentence_loss

pytestmark = pytest.mark.component("pretraining_heads")

V = 11  # a toy vocabulary


def by_hand_nll(logits: torch.Tensor, targets: list[int]) -> torch.Tensor:
    """-log softmax(z)[y] per row, written out with logsumexp."""
    return torch.stack([torch.logsumexp(z, dim=-1) - z[y] for z, y in zip(logits, targets)])


@pytest.mark.points(2)
@pytest.mark.todo("BertLMPredictionHead.forward")
def test_lm_head_is_transform_times_the_tied_embeddings_plus_bias(config):
    head = randomize(BertLMPredictionHead(config)).eval()
    hidden = torch.randn(2, 5, config.hidden_size)
    embeddings = torch.randn(config.vocab_size, config.hidden_size)
    transformed = head.transform(hidden)  # dense, GELU, LayerNorm (given)
    check_close(head(hidden, embeddings), transformed @ embeddings.T + head.bias, "the logits (B, T, V)", [
        (lambda: hidden @ embeddings.T + head.bias, "the transform (dense, GELU, LayerNorm) was skipped: "
         "logits = transform(h) E^T + b"),
        (lambda: transformed @ embeddings.T, "the head's bias b is missing: logits = transform(h) E^T + b"),
    ])


@pytest.mark.points(1)
@pytest.mark.todo("BertLMPredictionHead.forward")
def test_lm_head_decodes_with_the_embeddings_it_is_given(config):
    head = randomize(BertLMPredictionHead(config)).eval()
    hidden = torch.randn(2, 3, config.hidden_size)
    embeddings = torch.randn(config.vocab_size, config.hidden_size, requires_grad=True)
    head(hidden, embeddings).sum().backward()
    if embeddings.grad is None or embeddings.grad.abs().max() == 0:
        fail("no gradient reached the word embeddings passed in: the decoder is that (tied) matrix, (V, C), "
             "not a layer of the head's own")


@pytest.mark.points(2)
@pytest.mark.todo("masked_lm_loss")
def test_masked_lm_loss_averages_over_the_predicted_positions_only():
    logits = torch.randn(2, 5, V)
    labels = torch.full((2, 5), IGNORE_INDEX)
    labels[0, 1], labels[0, 3], labels[1, 4] = 7, 2, 9  # 3 of the 10 positions are predicted
    expected = by_hand_nll(torch.stack([logits[0, 1], logits[0, 3], logits[1, 4]]), [7, 2, 9]).mean()
    loss = masked_lm_loss(logits, labels)
    check_value(loss, expected.item(), "the loss with 3 of 10 positions predicted", [
        (expected.item() * 3 / 10, "it was divided by all B*T = 10 positions: divide by the number of "
         "predicted positions (3)"),
        (expected.item() * 3, "it is the sum over the predicted positions: take their mean"),
    ], tolerance=1e-5)


@pytest.mark.points(1)
@pytest.mark.todo("masked_lm_loss")
def test_masked_lm_loss_ignores_the_scores_of_unpredicted_positions():
    logits = torch.randn(3, 4, V, requires_grad=True)
    labels = torch.tensor([[IGNORE_INDEX, 5, IGNORE_INDEX, IGNORE_INDEX], [IGNORE_INDEX] * 4,
                           [1, IGNORE_INDEX, IGNORE_INDEX, 10]])
    masked_lm_loss(logits, labels).backward()
    ignored = (labels == IGNORE_INDEX)
    if logits.grad[ignored].abs().max() > 0:
        fail("positions labelled IGNORE_INDEX (-100) received a gradient: they must add nothing to the loss")


@pytest.mark.points(2)
@pytest.mark.todo("next_sentence_loss")
def test_next_sentence_loss_by_hand_label_zero_is_is_next():
    logits = torch.tensor([[2.0, -1.0], [0.5, 1.5], [-0.3, 0.2]])
    labels = torch.tensor([0, 1, 0])  # 0 = IsNext, 1 = NotNext
    expected = by_hand_nll(logits, [0, 1, 0]).mean().item()
    check_value(next_sentence_loss(logits, labels), expected, "the loss of three sentence pairs", [
        (by_hand_nll(logits, [1, 0, 1]).mean().item(), "it is the loss of the swapped labels: label 0 means "
         "IsNext (sentence B follows A), the first logit"),
    ], tolerance=1e-5)
    check_value(next_sentence_loss(logits, labels.view(3, 1)), expected,
                "the loss with labels given as (B, 1)", tolerance=1e-5)
