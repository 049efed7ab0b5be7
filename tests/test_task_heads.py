"""Task heads and their losses against values computed by hand, and pooling against its definition."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from minbert.model import BertModelOutput
from minbert.pooling import attention_pool, max_pool, mean_pool, pool
from tasks.models.heads import (CosinePairHead, SentenceClassifier, SoftmaxPairHead, angle_loss,
                                angle_similarity, cosent_loss, cosine_embedding_loss, cosine_mse_loss,
                                cosine_similarity, multiple_negatives_ranking_loss, symmetric_kl)

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


def test_softmax_pair_head_reads_u_v_and_abs_difference():
    head = SoftmaxPairHead(hidden_size=2, num_classes=2)
    with torch.no_grad():
        head.classifier.weight.zero_()
        head.classifier.weight[1, 4:] = 1.0  # class 1 scores |u - v|
        head.classifier.bias.zero_()
    logits = head(torch.tensor([[1.0, 5.0]]), torch.tensor([[4.0, 1.0]]))
    torch.testing.assert_close(logits, torch.tensor([[0.0, 3.0 + 4.0]]))


def test_cosine_mse_loss_by_hand():
    cosine, score = torch.tensor([0.9, 0.2]), torch.tensor([5.0, 2.0])  # targets 1.0, 0.4
    assert cosine_mse_loss(cosine, score).item() == pytest.approx(((0.1) ** 2 + (0.2) ** 2) / 2)


def test_cosine_embedding_loss_by_hand():
    cosine, score = torch.tensor([0.9, 0.3, -0.2]), torch.tensor([4.0, 1.0, 0.5])
    # similar pair pays 1 - 0.9; dissimilar pays max(0, 0.3) and max(0, -0.2) = 0
    assert cosine_embedding_loss(cosine, score).item() == pytest.approx((0.1 + 0.3 + 0.0) / 3)
    reference = torch.nn.CosineEmbeddingLoss()
    u = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    v = torch.tensor([[0.6, 0.8], [0.0, 1.0]])
    ours = cosine_embedding_loss(cosine_similarity(u, v), torch.tensor([5.0, 0.0]))
    assert ours.item() == pytest.approx(reference(u, v, torch.tensor([1, -1])).item())


def test_cosent_loss_by_hand():
    cosine, score = torch.tensor([0.8, 0.5, 0.1]), torch.tensor([5.0, 3.0, 3.0])
    # pairs with score_i > score_j: (0, 1) and (0, 2); ties contribute nothing
    terms = [math.exp(20 * (0.5 - 0.8)), math.exp(20 * (0.1 - 0.8))]
    assert cosent_loss(cosine, score).item() == pytest.approx(math.log(1 + sum(terms)), rel=1e-4)  # float32
    assert cosent_loss(torch.tensor([0.1, 0.2]), torch.tensor([1.0, 1.0])).item() == pytest.approx(0.0)


def test_angle_similarity_against_complex_arithmetic():
    torch.manual_seed(0)
    u, v = torch.randn(5, 6, dtype=torch.float64), torch.randn(5, 6, dtype=torch.float64)
    # Read as 3 complex numbers each: u conj(v) / (|u| |v|) is the quotient u / v scaled by |v|^2 / (|u| |v|)
    # per element, as AnglE normalises it; the similarity is |sum of its real and imaginary parts|.
    zu, zv = torch.complex(u[:, :3], u[:, 3:]), torch.complex(v[:, :3], v[:, 3:])
    product = (zu * zv.conj()).sum(-1) / (u.norm(dim=-1) * v.norm(dim=-1))
    torch.testing.assert_close(angle_similarity(u, v), (product.real + product.imag).abs())
    # its real part alone is the cosine; u = v gives exactly 1 (no imaginary part)
    torch.testing.assert_close(product.real, cosine_similarity(u, v))
    torch.testing.assert_close(angle_similarity(u, u), torch.ones(5, dtype=torch.float64))


def test_angle_loss_is_cosent_on_the_cosine_plus_cosent_on_the_angle():
    torch.manual_seed(0)
    u, v, score = torch.randn(4, 6), torch.randn(4, 6), torch.tensor([5.0, 1.0, 3.0, 0.0])
    expected = cosent_loss(cosine_similarity(u, v), score) + cosent_loss(angle_similarity(u, v), score)
    assert angle_loss(u, v, score).item() == pytest.approx(expected.item())
    # pairs ranked as the scores are (identical sides for the best one) cost less than the reverse ranking
    good_v = torch.stack([u[0], u[1] + 2 * v[1], u[2] + 0.5 * v[2], -u[3]])
    assert angle_loss(u, good_v, score) < angle_loss(u, good_v, score.flip(0))


def test_symmetric_kl_by_hand():
    p_logits, q_logits = torch.tensor([[2.0, 0.0, -1.0], [0.0, 0.0, 0.0]]), torch.tensor([[0.0, 1.0, 0.0],
                                                                                           [1.0, -1.0, 0.5]])
    p, q = p_logits.softmax(-1), q_logits.softmax(-1)
    kl = lambda a, b: (a * (a / b).log()).sum(-1).mean()  # noqa: E731  KL(a || b), averaged over the rows
    expected = (kl(p, q) + kl(q, p)) / 2
    assert symmetric_kl(p_logits, q_logits).item() == pytest.approx(expected.item(), rel=1e-5)
    assert symmetric_kl(q_logits, p_logits).item() == pytest.approx(expected.item(), rel=1e-5)
    assert symmetric_kl(p_logits, p_logits + 3.0).item() == pytest.approx(0.0, abs=1e-6)  # same softmax


def test_multiple_negatives_ranking_loss_by_hand():
    torch.manual_seed(0)
    u, v = torch.randn(4, 3), torch.randn(4, 3)
    positive = torch.tensor([True, False, True, True])
    terms = []
    for i in (0, 2, 3):  # each duplicate pair: its own v_i against every v_j of the batch, as a softmax
        logits = [20 * F.cosine_similarity(u[i], v[j], dim=0).item() for j in range(4)]
        terms.append(-logits[i] + math.log(sum(math.exp(x) for x in logits)))
    ours = multiple_negatives_ranking_loss(u, v, positive)
    assert ours.item() == pytest.approx(sum(terms) / 3, rel=1e-5)
    # a perfect embedding (v_i = u_i, the others orthogonal) costs almost nothing
    eye = torch.eye(4)
    assert multiple_negatives_ranking_loss(eye, eye, positive).item() < 1e-6


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


def test_attention_pooled_classifier_learns_its_token_weights():
    torch.manual_seed(0)
    head = SentenceClassifier(hidden_size=2, num_classes=5, dropout=0.5, pooling="attention").eval()
    output = BertModelOutput(HIDDEN, None, None, None)
    scores = HIDDEN @ head.attention.weight[0] + head.attention.bias  # h_t . w + b: (B, T)
    weights = scores.masked_fill(MASK == 0, float("-inf")).softmax(-1)
    expected = head.classifier((weights[..., None] * HIDDEN).sum(1))
    torch.testing.assert_close(head(output, MASK), expected)
    head(output, MASK).sum().backward()
    assert head.attention.weight.grad.abs().sum() > 0  # the scores are trained with the classifier
    # a batch-mate's padding changes nothing: row 0 alone, unpadded, gets the same logits
    alone = head(BertModelOutput(HIDDEN[:1, :2], None, None, None), MASK[:1, :2])
    torch.testing.assert_close(alone, head(output, MASK)[:1])
    assert SentenceClassifier(2, 5, 0.1, pooling="mean").attention is None  # no weights it does not use
