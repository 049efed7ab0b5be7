"""Task heads and their losses against values computed by hand, and pooling against its definition."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from minbert.model import BertModelOutput
from minbert.pooling import attention_pool, max_pool, mean_pool, pool
from minbert.task_heads import (CosinePairHead, SentenceClassifier, cosine_mse_loss, cosine_similarity,
                                symmetric_kl)

HIDDEN = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]],
                       [[-1.0, 0.0], [5.0, 6.0], [7.0, -8.0]]])  # (B=2, T=3, C=2)
MASK = torch.tensor([[1, 1, 0], [1, 1, 1]])


def test_mean_pool_ignores_padding():
    expected = torch.tensor([[2.0, 3.0], [11 / 3, -2 / 3]])  # row 0: mean of the first two tokens only
    torch.testing.assert_close(mean_pool(HIDDEN, MASK), expected)


def test_max_pool_ignores_padding():
    torch.testing.assert_close(max_pool(HIDDEN, MASK), torch.tensor([[3.0, 4.0], [7.0, 6.0]]))


def test_pool_choices():
    output = BertModelOutput(HIDDEN, torch.tensor([[0.5, 0.5], [0.1, 0.2]]), None, None)
    torch.testing.assert_close(pool(output, MASK, "cls"), HIDDEN[:, 0])
    torch.testing.assert_close(pool(output, MASK, "pooler"), output.pooler_output)
    with pytest.raises(ValueError, match="pooling must be one of"):
        pool(output, MASK, "median")


def test_cosine_similarity_by_hand():
    u = torch.tensor([[1.0, 0.0], [3.0, 4.0], [1.0, 1.0]])
    v = torch.tensor([[0.0, 2.0], [6.0, 8.0], [-1.0, -1.0]])
    torch.testing.assert_close(cosine_similarity(u, v), torch.tensor([0.0, 1.0, -1.0]))
    torch.testing.assert_close(cosine_similarity(u, v), F.cosine_similarity(u, v))


def test_cosine_pair_head_logit_is_scaled_cosine_plus_bias():
    head = CosinePairHead(learn_scale=True, scale=10.0, bias=-7.5)
    u, v = torch.tensor([[3.0, 4.0]]), torch.tensor([[4.0, 3.0]])  # cos = 24/25 = 0.96
    torch.testing.assert_close(head(u, v), torch.tensor([10 * 0.96 - 7.5]))
    assert CosinePairHead(learn_scale=False)(u, v).item() == pytest.approx(0.96)


def test_paraphrase_bce_loss_by_hand():
    head = CosinePairHead(scale=10.0, bias=-7.5)
    u, v = torch.tensor([[3.0, 4.0], [1.0, 0.0]]), torch.tensor([[4.0, 3.0], [0.0, 1.0]])  # cos 0.96, 0
    logits = head(u, v)  # 2.1, -7.5
    loss = F.binary_cross_entropy_with_logits(logits, torch.tensor([1.0, 0.0]))
    by_hand = (math.log(1 + math.exp(-2.1)) + math.log(1 + math.exp(-7.5))) / 2
    assert loss.item() == pytest.approx(by_hand, rel=1e-5)  # float32 arithmetic


def test_cosine_mse_loss_by_hand():
    cosine, score = torch.tensor([0.9, 0.2]), torch.tensor([5.0, 2.0])  # targets 1.0, 0.4
    assert cosine_mse_loss(cosine, score).item() == pytest.approx(((0.1) ** 2 + (0.2) ** 2) / 2)


def test_symmetric_kl_by_hand():
    p_logits, q_logits = torch.tensor([[2.0, 0.0, -1.0], [0.0, 0.0, 0.0]]), torch.tensor([[0.0, 1.0, 0.0],
                                                                                           [1.0, -1.0, 0.5]])
    p, q = p_logits.softmax(-1), q_logits.softmax(-1)
    kl = lambda a, b: (a * (a / b).log()).sum(-1).mean()  # noqa: E731  KL(a || b), averaged over the rows
    expected = (kl(p, q) + kl(q, p)) / 2
    assert symmetric_kl(p_logits, q_logits).item() == pytest.approx(expected.item(), rel=1e-5)
    assert symmetric_kl(q_logits, p_logits).item() == pytest.approx(expected.item(), rel=1e-5)
    assert symmetric_kl(p_logits, p_logits + 3.0).item() == pytest.approx(0.0, abs=1e-6)  # same softmax


def test_sentence_classifier_shapes_and_dropout_only_in_training():
    head = SentenceClassifier(hidden_size=2, num_classes=5, dropout=0.5, pooling="mean")
    output = BertModelOutput(HIDDEN, None, None, None)
    head.eval()
    logits = head(output, MASK)
    assert logits.shape == (2, 5)
    torch.testing.assert_close(logits, head.classifier(mean_pool(HIDDEN, MASK)))
    with pytest.raises(ValueError, match="pooling must be one of"):
        SentenceClassifier(2, 5, 0.1, pooling="first")


def test_attention_pool_by_hand():
    scores = torch.tensor([[0.0, math.log(3.0), 50.0], [0.0, 0.0, 0.0]])  # row 0's padding scores highest
    expected = torch.tensor([[(1.0 + 3 * 3.0) / 4, (2.0 + 3 * 4.0) / 4],  # weights 1/4, 3/4 on the real two
                             [11 / 3, -2 / 3]])  # equal scores: the mean of the real tokens
    torch.testing.assert_close(attention_pool(HIDDEN, MASK, scores), expected)
    torch.testing.assert_close(attention_pool(HIDDEN, MASK, torch.zeros(2, 3)), mean_pool(HIDDEN, MASK))
