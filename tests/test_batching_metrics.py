"""Batching invariants (every example once per epoch, minimal padding, determinism) and the metrics."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from tasks.data.batching import bucketed_batches, pad_batch, predict_in_order, sorted_batches
from minbert import metrics
from tasks.training.loop import interleave


@pytest.mark.parametrize("n, batch_size", [(1, 4), (10, 3), (257, 32), (1000, 7)])
def test_every_example_exactly_once_per_epoch(n, batch_size):
    lengths = [random.Random(i).randint(3, 60) for i in range(n)]
    for epoch in range(3):
        batches = bucketed_batches(lengths, batch_size, seed=1, epoch=epoch)
        flat = [i for b in batches for i in b]
        assert sorted(flat) == list(range(n))
        assert all(1 <= len(b) <= batch_size for b in batches)
        # one short batch per bucket
        assert sum(len(b) < batch_size for b in batches) <= -(-n // (batch_size * 50))


def test_batches_are_deterministic_and_change_with_epoch_and_seed():
    lengths = list(range(500))
    a = bucketed_batches(lengths, 16, seed=3, epoch=0)
    assert a == bucketed_batches(lengths, 16, seed=3, epoch=0)
    assert a != bucketed_batches(lengths, 16, seed=3, epoch=1)
    assert a != bucketed_batches(lengths, 16, seed=4, epoch=0)


def test_bucketing_pads_far_less_than_random_batches():
    rng = random.Random(0)
    lengths = [rng.randint(5, 120) for _ in range(3200)]

    def padding(batches):
        return sum(max(lengths[i] for i in b) * len(b) - sum(lengths[i] for i in b) for b in batches)

    bucketed = padding(bucketed_batches(lengths, 32, seed=0, epoch=0))
    order = list(range(len(lengths)))
    rng.shuffle(order)
    unbucketed = padding([order[i:i + 32] for i in range(0, len(order), 32)])
    assert bucketed < 0.1 * unbucketed


def test_pad_batch_pads_to_the_longest_only():
    batch = pad_batch([[101, 7, 102], [101, 102]], [[0, 0, 0], [0, 0]], pad_id=0)
    assert batch.input_ids.tolist() == [[101, 7, 102], [101, 102, 0]]
    assert batch.attention_mask.tolist() == [[1, 1, 1], [1, 1, 0]]
    assert batch.token_type_ids.shape == (2, 3)
    with pytest.raises(ValueError, match="empty batch"):
        pad_batch([])


def test_sorted_batches_cover_everything_in_length_order():
    lengths = [5, 1, 9, 3]
    batches = sorted_batches(lengths, 3)
    assert batches == [[1, 3, 0], [2]]


def test_predictions_come_back_in_the_input_order_from_length_sorted_batches():
    lengths = [5, 1, 9, 3, 7]
    seen = []

    def predict(group):  # "predicts" each example's length, and records the batches it was given
        seen.append([lengths[i] for i in group])
        return [lengths[i] * 10 for i in group]

    assert predict_in_order(lengths, predict, batch_size=2) == [50, 10, 90, 30, 70]
    assert seen == [[1, 3], [5, 7], [9]]  # shortest first: neighbours pad little
    assert predict_in_order([], predict) == []  # a file with no rows: no predictions
    with pytest.raises(ValueError):  # one prediction per example, never fewer
        predict_in_order(lengths, lambda group: group[:-1], batch_size=2)


@pytest.mark.parametrize("sampling", ["round-robin", "proportional"])
def test_interleaving_uses_every_batch_once(sampling):
    task_batches = {"a": list(range(5)), "b": list(range(100, 102)), "c": list(range(200, 209))}
    steps = interleave(task_batches, sampling, seed=0, epoch=0)
    seen = {name: [b for step in steps for n, b in step if n == name] for name in task_batches}
    assert seen == task_batches  # each task's batches, once each, in their own order
    if sampling == "round-robin":
        assert len(steps) == 9 and [n for n, _ in steps[0]] == ["a", "b", "c"]
    else:
        assert len(steps) == 16 and all(len(step) == 1 for step in steps)


# ----- metrics against definitions and hand-worked values -------------------------------------------


def test_accuracy_and_f1_by_hand():
    predictions, gold = [1, 0, 1, 1, 0], [1, 0, 0, 1, 1]
    assert metrics.accuracy(predictions, gold) == pytest.approx(0.6)
    # tp=2, fp=1, fn=1: P = R = 2/3
    assert metrics.f1_binary(predictions, gold) == pytest.approx(2 / 3)
    assert metrics.f1_binary([0, 0], [1, 0]) == 0.0


def test_matthews_by_hand():
    # tp=2, tn=1, fp=1, fn=1: (2*1 - 1*1) / sqrt(3*3*2*2) = 1/6
    assert metrics.matthews_corrcoef([1, 0, 1, 1, 0], [1, 0, 0, 1, 1]) == pytest.approx(1 / 6)
    assert metrics.matthews_corrcoef([1, 1], [1, 0]) == 0.0


def test_pearson_and_spearman_match_numpy_definitions():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=200), rng.normal(size=200)
    y = x + 0.5 * y
    assert metrics.pearson(x, y) == pytest.approx(np.corrcoef(x, y)[0, 1])
    # Spearman with ties: ranks share the mean rank
    assert metrics.rank_with_ties(np.array([10, 20, 20, 30])).tolist() == [1.0, 2.5, 2.5, 4.0]
    assert metrics.spearman([1, 2, 3, 4], [1, 4, 9, 16]) == pytest.approx(1.0)
    assert metrics.spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert metrics.pearson([1, 1, 1], [1, 2, 3]) == 0.0


def test_metrics_refuse_mismatched_or_empty_input():
    with pytest.raises(ValueError, match="shape"):
        metrics.accuracy([1, 2], [1])
    with pytest.raises(ValueError, match="empty"):
        metrics.pearson([], [])


def test_confusion_matrix_rows_are_gold():
    matrix = metrics.confusion_matrix([0, 1, 1, 2], [0, 0, 1, 2], num_classes=3)
    assert matrix.tolist() == [[1, 1, 0], [0, 1, 0], [0, 0, 1]]
    assert torch.tensor(matrix).sum() == 4
