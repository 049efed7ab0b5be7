"""Graded: the pre-training heads and losses (BERT §3.1): the tied masked-LM decoder, the masked-LM loss
over the predicted positions only, and the next-sentence loss."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from graded_helpers import check_close, check_that, check_value, expectation, fail, randomize
from safetensors.torch import load_file

from minbert.heads import IGNORE_INDEX, BertLMPredictionHead, masked_lm_loss, next_sentence_loss

pytestmark = pytest.mark.component("pretraining_heads")

V = 11  # a toy vocabulary
AXES = dict(C=32, V=V)  # the tiny model's hidden size; batch and length vary by test (the crashes module)
STORED = Path(__file__).resolve().parent / "reference" / "pretraining_heads_lm_head.safetensors"


@pytest.mark.points(2)
@pytest.mark.todo("BertLMPredictionHead.forward")
def test_lm_head_is_transform_times_the_tied_embeddings_plus_bias(config):
    t = load_file(str(STORED))  # made by a staff script
    head = BertLMPredictionHead(config).eval()
    head.load_state_dict({name: t[name] for name in head.state_dict()})
    check_close(head(t["hidden"], t["word_embeddings"]), t["logits"], "the logits (B, T, V) "
                                                                      "(stored weights)", [
        (t["logits_without_transform"], "the transform (dense, GELU, LayerNorm) was skipped: "
         "logits = transform(h) E^T + b"),
        (lambda: t["logits"] - head.bias, "the head's bias b is missing: logits = transform(h) E^T + b"),
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
    # d(sum of logits) / dE[v] = sum over positions of transform(h), for every word v
    check_close(embeddings.grad,
                head.transform(hidden).detach().sum(dim=(0, 1)).expand(config.vocab_size, -1),
                "the gradient of the summed logits with respect to the embeddings "
                "(each row: the sum of transform(h) over the positions)")


@pytest.mark.points(2)
@pytest.mark.todo("masked_lm_loss")
def test_masked_lm_loss_averages_over_the_predicted_positions_only():
    logits = torch.randn(2, 5, V)
    labels = torch.full((2, 5), IGNORE_INDEX)
    labels[0, 1], labels[0, 3], labels[1, 4] = 7, 2, 9  # 3 of the 10 positions are predicted
    loss = masked_lm_loss(logits, labels)
    check_value(loss, three_predicted(logits), "the loss with 3 of 10 positions predicted", [
        (three_predicted(logits) * 3 / 10, "it was divided by all B*T = 10 positions: divide by the number "
         "of predicted positions (3)"),
        (three_predicted(logits) * 3, "it is the sum over the predicted positions: take their mean"),
    ], tolerance=1e-5)


@expectation
def three_predicted(logits) -> float:
    """torch's cross-entropy of the three predicted rows, picked by hand."""
    picked = torch.stack([logits[0, 1], logits[0, 3], logits[1, 4]])
    return torch.nn.CrossEntropyLoss()(picked, torch.tensor([7, 2, 9])).item()


@pytest.mark.points(1)
@pytest.mark.todo("masked_lm_loss")
def test_masked_lm_loss_ignores_the_scores_of_unpredicted_positions():
    logits = torch.randn(3, 4, V, requires_grad=True)
    labels = torch.tensor([[IGNORE_INDEX, 5, IGNORE_INDEX, IGNORE_INDEX], [IGNORE_INDEX] * 4,
                           [1, IGNORE_INDEX, IGNORE_INDEX, 10]])
    masked_lm_loss(logits, labels).backward()
    ignored = (labels == IGNORE_INDEX)
    check_that(logits.grad[ignored].abs().max() == 0, "positions labelled IGNORE_INDEX (-100) received a "
               "gradient: they must add nothing to the loss")
    check_close(logits.grad, torch_gradient(logits.detach(), labels), "the gradient of the loss with respect "
                "to the logits (softmax minus one-hot over the 3 predicted positions, 0 elsewhere)")


@expectation
def torch_gradient(logits, labels):
    leaf = logits.clone().requires_grad_(True)
    torch.nn.functional.cross_entropy(leaf.view(-1, leaf.size(-1)), labels.view(-1)).backward()
    return leaf.grad


def loss_or_failure(logits: torch.Tensor, labels: torch.Tensor, shapes: str, advice: str) -> torch.Tensor:
    """masked_lm_loss(logits, labels), or a failure naming the shapes it crashed on (a stub's
    NotImplementedError passes through)."""
    try:
        return masked_lm_loss(logits, labels)
    except NotImplementedError:
        raise
    except (ValueError, RuntimeError, IndexError, TypeError) as error:
        fail(f"masked_lm_loss crashed on {shapes} ({type(error).__name__}: {error}): {advice}")


@pytest.mark.points(1)
@pytest.mark.todo("masked_lm_loss")
def test_masked_lm_loss_takes_the_n_by_v_scores_pretraining_passes():
    # pretrain.run decodes only the N masked positions: (N, V) scores and (N,) labels, all predicted.
    logits = torch.randn(4, V, dtype=torch.float64)
    labels = torch.tensor([3, 0, 10, 3])
    loss = loss_or_failure(logits, labels, "(N, V) scores and (N,) labels, the shapes pre-training passes",
                           "do not unpack a fixed number of dimensions (B, T, V = logits.shape): select the "
                           "predicted positions with a boolean mask of the labels' shape, which works for "
                           "(B, T, V) and (N, V) alike")
    check_value(loss, -torch.log_softmax(logits, dim=-1).gather(1, labels[:, None]).mean().item(),
                "the loss of 4 predicted positions given as (N, V) and (N,)", tolerance=1e-9)


@pytest.mark.points(1)
@pytest.mark.todo("masked_lm_loss")
@pytest.mark.parametrize("shape", [(2, 3), (0,)], ids=["no-label-predicted", "no-position-at-all"])
def test_masked_lm_loss_with_nothing_predicted_is_zero_and_backpropagates(shape):
    # A batch with nothing masked must add 0 to the pre-training loss: NaN (the mean over no positions,
    # as cross_entropy gives it) would spoil every weight at the next step.
    logits = torch.randn(*shape, V, requires_grad=True)
    labels = torch.full(shape, IGNORE_INDEX)
    loss = loss_or_failure(logits, labels, f"logits {tuple(logits.shape)} with no predicted position",
                           "the scores may come as (N, V), here with N = 0 (do not unpack B, T, V = "
                           "logits.shape), and with nothing predicted the loss is 0")
    if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
        fail(f"with no predicted position the loss should be a scalar tensor (0), got {loss!r}")
    if torch.isnan(loss):
        fail("with no predicted position the loss is NaN (the mean over no positions, which cross-entropy "
             "gives): return 0, so that a batch with nothing masked does not spoil pre-training")
    check_value(loss, 0.0, "the loss with no predicted position")
    check_that(loss.requires_grad, "with no predicted position the loss is a constant that does not depend "
               "on the logits, so backward() fails in training: return a zero computed "
               "from the logits (times 0)")
    loss.backward()
    check_that(logits.grad is not None and not bool((logits.grad != 0).any()), "with no predicted position "
               "the logits got a nonzero gradient (or none): the loss must add nothing")


@pytest.mark.points(2)
@pytest.mark.todo("next_sentence_loss")
def test_next_sentence_loss_by_hand_label_zero_is_is_next():
    logits = torch.tensor([[2.0, -1.0], [0.5, 1.5], [-0.3, 0.2]])
    labels = torch.tensor([0, 1, 0])  # 0 = IsNext, 1 = NotNext
    # With two classes, -log softmax(z)[y] = log(1 + exp(z_other - z_y)): rows 0.0486, 0.3133, 0.9741.
    # The swapped labels; and a sigmoid on the NotNext logit alone (binary cross-entropy), ignoring the
    # IsNext one: rows log(1 + e^-1), log(1 + e^-1.5), log(1 + e^0.2).
    check_value(next_sentence_loss(logits, labels), nsp_by_hand(), "the loss of three sentence pairs", [
        ((math.log1p(math.exp(3.0)) + math.log1p(math.exp(1.0)) + math.log1p(math.exp(-0.5))) / 3,
         "it is the loss of the swapped labels: label 0 means IsNext (sentence B "
         "follows A), the first logit"),
        ((math.log1p(math.exp(-1.0)) + math.log1p(math.exp(-1.5)) + math.log1p(math.exp(0.2))) / 3,
         "it is a sigmoid (binary) cross-entropy of the second logit alone: the head gives two scores, so "
         "the loss is a two-way softmax cross-entropy over both"),
    ], tolerance=1e-5)
    try:
        loss = next_sentence_loss(logits, labels.view(3, 1))
    except NotImplementedError:
        raise
    except (ValueError, RuntimeError, IndexError, TypeError) as error:
        fail(f"next_sentence_loss crashed on labels of shape (B, 1) ({type(error).__name__}: {error}): "
             "labels may come as (B, 1); flatten them to (B,)")
    check_value(loss, nsp_by_hand(), "the loss with labels given as (B, 1)", tolerance=1e-5)


@expectation
def nsp_by_hand() -> float:
    return (math.log1p(math.exp(-3.0)) + math.log1p(math.exp(-1.0)) + math.log1p(math.exp(0.5))) / 3


@pytest.mark.points(1)
@pytest.mark.todo("next_sentence_loss")
@pytest.mark.parametrize("label_shape", [(1,), (1, 1)], ids=["labels-(1,)", "labels-(1,1)"])
def test_next_sentence_loss_on_a_batch_of_one(label_shape):
    # Logits (0, ln 3): softmax (1/4, 3/4); label 1 (NotNext) costs -ln(3/4).
    logits = torch.tensor([[0.0, math.log(3.0)]])
    check_value(next_sentence_loss(logits, torch.ones(label_shape, dtype=torch.long)), -math.log(0.75),
                f"the loss of a batch of one pair, labels of shape {label_shape}", [
                    (-math.log(0.25), "label 0 means IsNext and 1 NotNext: the label was read the other "
                     "way")],
                tolerance=1e-6)
