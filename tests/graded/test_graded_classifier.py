"""Graded: SentenceClassifier.forward (pooled vector, dropout, linear) and the classification loss
(classification_loss: sentiment's, and every job's that classifies sentences).

Pooling is a stand-in here (it returns a known vector per pooling name), so these tests do not depend on
the pooling TODOs.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from graded_helpers import check_close, check_that, check_value, expectation, fail, randomize

import minbert.task_heads
from minbert.model import BertModelOutput
from minbert.task_heads import SentenceClassifier, classification_loss

pytestmark = pytest.mark.component("classifier")

B, T, C, K = 3, 5, 8, 4
AXES = dict(B=B, T=T, C=C, K=K)  # a crash names its shapes in these letters (the crashes module)
POOLED = {how: torch.randn(B, C, generator=torch.Generator().manual_seed(n))
          for n, how in enumerate(("cls", "mean", "max", "pooler"))}


@pytest.fixture
def pooled(monkeypatch):
    """Stand-in pooling: records how it was asked to pool and returns that pooling's known vectors."""
    calls = []

    def stand_in(output, attention_mask, how):
        calls.append(how)
        return POOLED[how]

    monkeypatch.setattr(minbert.task_heads, "pool", stand_in)
    return calls


def output() -> BertModelOutput:
    return BertModelOutput(torch.randn(B, T, C), torch.randn(B, C), None, None)


@pytest.mark.points(2)
@pytest.mark.todo("SentenceClassifier.forward")
@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_head_pools_the_way_it_was_built_then_applies_the_linear_layer(pooled, pooling):
    head = randomize(SentenceClassifier(C, K, dropout=0.1, pooling=pooling)).eval()
    out = output()
    logits = head(out, torch.ones(B, T, dtype=torch.long))
    check_close(logits, linear(head, POOLED[pooling]),
                "the logits (B, K) of a head with "
                f"pooling={pooling!r} in eval mode", pooling_mistakes(head, out, pooling))


@expectation
def linear(head: SentenceClassifier, x: torch.Tensor) -> torch.Tensor:
    """torch's linear layer with the head's weights."""
    return F.linear(x, head.classifier.weight, head.classifier.bias)


@expectation
def pooling_mistakes(head, out, pooling):
    return [(linear(head, out.pooler_output), "the logits come from the pooler output, but this head was "
             f"built with pooling={pooling!r}: pool the way it was built (self.sentence_vector(output, "
             "attention_mask))"),
            (linear(head, out.last_hidden_state[:, 0]), "the logits come from the [CLS] vector read "
             "directly: pool through self.sentence_vector(output, attention_mask), "
             "which knows every pooling")] + [
        (linear(head, POOLED[how]), f"the head pooled with {how!r}, but it was built "
                                    f"with pooling={pooling!r}")
        for how in POOLED if how != pooling]


@pytest.mark.points(1)
@pytest.mark.todo("SentenceClassifier.forward")
def test_dropout_sits_between_the_pooled_vector_and_the_linear_layer(monkeypatch):
    # In training mode, dropout(p = 0.5) keeps each element of the pooled vector, times 2, or zeroes it.
    # The linear layer W has no bias and is invertible (I plus ones above the diagonal), so W^-1 logits is
    # what reached it: each element of the pooled vector, 0 or doubled. Any dropout with the head's rate
    # does this (self.dropout, or F.dropout with self.dropout.p); dropout on the logits does not.
    pooled = torch.rand(200, 8) + 0.5  # no element near 0: a kept one is far from a dropped one
    monkeypatch.setattr(minbert.task_heads, "pool", lambda output, attention_mask, how: pooled)
    head = SentenceClassifier(8, 8, dropout=0.5, pooling="mean").train()
    mixing = torch.eye(8) + torch.triu(torch.ones(8, 8), diagonal=1)
    with torch.no_grad():
        head.classifier.weight.copy_(mixing)
        head.classifier.bias.zero_()
    logits = head(BertModelOutput(torch.randn(200, 3, 8), None, None, None),
                  torch.ones(200, 3, dtype=torch.long))
    ratio = (torch.linalg.solve(mixing, logits.detach().T).T / pooled)
    if torch.allclose(ratio, torch.ones_like(ratio)):
        fail("in training mode with dropout 0.5 the linear layer received the pooled vector unchanged: "
             "self.dropout was not applied to the pooled vector")
    kept = (ratio - 2).abs() < 1e-4
    check_that(bool((kept | (ratio.abs() < 1e-4)).all()), "in training mode with dropout 0.5, not every "
               "element of the pooled vector was either dropped (0) or kept and scaled by 1 / (1 - p) = 2: "
               "dropout belongs on the pooled vector, before the linear layer, with the head's rate")
    check_value(kept.float().mean(), 0.5, "the share of the pooled vector's elements kept in training mode "
                "(dropout 0.5; 1,600 elements)", tolerance=0.05)
    head.eval()
    check_close(head(BertModelOutput(torch.randn(200, 3, 8), None, None, None),
                     torch.ones(200, 3, dtype=torch.long)), pooled @ mixing.T, "the logits in eval "
                                                                               "mode (no dropout)")


@pytest.mark.points(1)
@pytest.mark.todo("SentenceClassifier.forward")
def test_head_reads_its_sentence_vector_through_self_sentence_vector(pooled):
    given = torch.randn(B, C, generator=torch.Generator().manual_seed(7))

    class GivenVector(SentenceClassifier):  # as the classify job's head does (tasks.models.classifier)
        def sentence_vector(self, output, attention_mask):
            return given

    head = randomize(GivenVector(C, K, dropout=0.1, pooling="mean")).eval()
    logits = head(output(), torch.ones(B, T, dtype=torch.long))
    check_close(logits, F.linear(given, head.classifier.weight, head.classifier.bias),
                "the logits of a head whose sentence_vector is overridden (eval mode)", [
        (F.linear(POOLED["mean"], head.classifier.weight, head.classifier.bias),
         "the head pooled by itself instead of calling self.sentence_vector(output, attention_mask): a "
         "subclass that changes the sentence vector (the classify job's head) would be ignored")])


@pytest.mark.points(1)
@pytest.mark.todo("SentenceClassifier.forward")
def test_the_mask_reaches_the_pooling_and_the_gradient_reaches_the_encoder(monkeypatch):
    # Fine-tuning trains BERT through this head: the loss's gradient must flow back through the pooled
    # vector into the encoder's output, and the pooling must see which tokens are padding.
    seen = []

    def masked_sum(output, attention_mask, how):  # a pooling that uses both, as the real ones do
        seen.append(attention_mask)
        return (output.last_hidden_state * attention_mask[..., None]).sum(dim=1)

    monkeypatch.setattr(minbert.task_heads, "pool", masked_sum)
    head = randomize(SentenceClassifier(C, K, dropout=0.1, pooling="mean")).eval()
    out = output()
    out.last_hidden_state.requires_grad_(True)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]])
    logits = head(out, mask)
    if not seen or not torch.equal(seen[0], mask):
        fail("the pooling did not get the attention_mask given to the head: attention_mask was not passed to "
             "self.sentence_vector(output, attention_mask), so padding would be pooled like real tokens")
    if not isinstance(logits, torch.Tensor) or not logits.requires_grad:
        fail("the logits do not require a gradient although the encoder's output does: no gradient reached "
             "the encoder's output (a .detach(), .data or torch.no_grad() on the pooled vector), so "
             "fine-tuning would train the linear layer only and never BERT")
    logits.sum().backward()
    grad = out.last_hidden_state.grad
    if grad is None or grad.abs().sum() == 0:
        fail("no gradient reached the encoder's output through the pooled vector: fine-tuning would train "
             "the linear layer only and never BERT")
    check_close(grad, (head.classifier.weight.sum(dim=0) * mask[..., None]).expand(B, T, C).detach(),
                "the gradient of the summed logits with respect to the token vectors")


def loss_and_leaf(logits: torch.Tensor, labels: torch.Tensor):
    """The loss of these logits, and the leaf tensor holding them (for its gradient)."""
    leaf = logits.clone().requires_grad_(True)
    return classification_loss(leaf, labels), leaf


@pytest.mark.points(2)
@pytest.mark.todo("classification_loss")
@pytest.mark.axes(B=4, K=3)
def test_classification_loss_is_the_mean_cross_entropy_of_the_raw_logits():
    logits = torch.tensor([[2.0, 0.0, -1.0], [0.1, 0.2, 0.3], [-2.0, 3.0, 0.5], [1.0, 1.0, 1.0]])
    labels = torch.tensor([0, 2, 1, 1])
    # Worked once, per sentence: -log softmax(z)[y] = log(1 + e^-2 + e^-3), ..., log 3 (0.16984602,
    # 1.001942848, 0.085097246, 1.098612289); and the same of the softmax probabilities p instead of z (the
    # softmax applied twice).
    loss, _ = loss_and_leaf(logits, labels)
    check_value(loss, (0.16984602 + 1.001942848 + 0.085097246 + 1.098612289) / 4,
                "the loss of four sentences with 3 classes", [
        ((0.657846267 + 1.065149838 + 0.605423724 + 1.098612289) / 4, "it is the cross-entropy of softmax "
         "probabilities: the loss applies the softmax itself, so give it the raw logits"),
        (-logits[torch.arange(4), labels].mean().item(), "it is -z[y] of the raw logits: the log-softmax is "
         "missing"),
        (0.16984602 + 1.001942848 + 0.085097246 + 1.098612289, "it is the sum over the batch: take the mean"),
    ], tolerance=1e-5)


@pytest.mark.points(1)
@pytest.mark.todo("classification_loss")
@pytest.mark.axes(B=5, K=2)
def test_classification_loss_gradient_is_softmax_minus_one_hot_over_the_batch():
    logits = torch.randn(5, 2)
    labels = torch.tensor([1, 0, 0, 1, 1])
    loss, leaf = loss_and_leaf(logits, labels)
    if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
        fail(f"the loss should be a scalar tensor, got {loss!r}")
    loss.backward()
    check_close(leaf.grad, (logits.softmax(-1) - F.one_hot(labels, 2)) / 5,
                "the gradient of the loss with respect to the logits")
