"""Structured classifiers (tasks/models/structured.py) and R-Precision (minbert/metrics.py): the
paper's five layer maps, the generalisation rule worked by hand at other depths, spread, parse_layer_map, the
level weighting identity, the classifier against its Linear layers, level targets, and R-Precision worked by
hand.

Tolerances: 1e-6 (float32) for the level-weighted BCE against the flat BCE and for the classifier's
logits against its Linear layers applied by hand (same operations, so in practice exact); R-Precision
values by hand are fractions compared with pytest.approx's default (rel 1e-6); layer maps, targets and
counts are exact.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from minbert.metrics import mean_r_precision, r_precision
from tasks.models.structured import (VARIANTS, StructuredClassifier, layer_map, level_targets,
                                     level_weighted_bce, parse_layer_map, r_precision_report, spread)

TOL = dict(atol=1e-6, rtol=1e-6)

# ----- layer maps ----------------------------------------------------------------------------------

# Manginas et al. (2020), 12 layers and 6 levels (the module docstring's table).
PAPER = {
    "flat": ((12,), (12,), (12,), (12,), (12,), (12,)),
    "last-six": ((7,), (8,), (9,), (10,), (11,), (12,)),
    "one-by-one": ((2,), (4,), (6,), (8,), (10,), (12,)),
    "in-pairs": ((1, 2), (3, 4), (5, 6), (7, 8), (9, 10), (11, 12)),
    "hybrid": ((4,), (5,), (6, 7), (8, 9), (10, 11), (12,)),
}

# Worked by hand from the docstring's rule: spread cuts N layers into K groups at positions
# ceil((k-1) N / K) .. ceil(k N / K); with N < K group k is the single layer at position ceil(k N / K).
BY_HAND = {
    # N = 6, K = 6: spread gives one layer per group. HYBRID: 6 // 4 = 1 untied, L1 = 2, L2 = 3, L6 = 6;
    # L3..L5 spread the 2 layers in between (4, 5) over 3 groups: positions ceil(2/3), ceil(4/3), ceil(6/3)
    # = 1, 2, 2 -> 4, 5, 5.
    (6, 6): {"flat": ((6,),) * 6,
             "last-six": ((1,), (2,), (3,), (4,), (5,), (6,)),
             "one-by-one": ((1,), (2,), (3,), (4,), (5,), (6,)),
             "in-pairs": ((1,), (2,), (3,), (4,), (5,), (6,)),
             "hybrid": ((2,), (3,), (4,), (5,), (5,), (6,))},
    # N = 6, K = 2: groups at positions 0..3 and 3..6 -> (1, 2, 3), (4, 5, 6); LAST-SIX takes the last
    # min(2, 6) = 2 layers; HYBRID with fewer than 3 levels: L1 the first untied-off layer (2), L2 layer 6.
    (6, 2): {"flat": ((6,), (6,)),
             "last-six": ((5,), (6,)),
             "one-by-one": ((3,), (6,)),
             "in-pairs": ((1, 2, 3), (4, 5, 6)),
             "hybrid": ((2,), (6,))},
    # N = 2, K = 6: fewer layers than levels, group k is the layer at position ceil(2k / 6)
    # = 1, 1, 1, 2, 2, 2.
    # HYBRID: 2 // 4 = 0 untied, L1 = 1, L2 = 2, L6 = 2, no layers in between so L3..L5 read layer 2.
    (2, 6): {"flat": ((2,),) * 6,
             "last-six": ((1,), (1,), (1,), (2,), (2,), (2,)),
             "one-by-one": ((1,), (1,), (1,), (2,), (2,), (2,)),
             "in-pairs": ((1,), (1,), (1,), (2,), (2,), (2,)),
             "hybrid": ((1,), (2,), (2,), (2,), (2,), (2,))},
    # N = 7, K = 3: positions 0..3, 3..5, 5..7 -> (1, 2, 3), (4, 5), (6, 7). LAST-SIX: layers 5, 6, 7.
    # HYBRID: 7 // 4 = 1 untied, L1 = 2, L2 = 3, L3 = 7 (no level in between).
    (7, 3): {"flat": ((7,),) * 3,
             "last-six": ((5,), (6,), (7,)),
             "one-by-one": ((3,), (5,), (7,)),
             "in-pairs": ((1, 2, 3), (4, 5), (6, 7)),
             "hybrid": ((2,), (3,), (7,))},
    # N = 12, K = 4: HYBRID L3 is the one level in between and reads all of layers 6..11.
    (12, 4): {"hybrid": ((4,), (5,), (6, 7, 8, 9, 10, 11), (12,))},
}


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_five_variants_at_12_layers_and_6_levels_are_the_papers_map(variant):
    assert layer_map(variant, 12, 6) == PAPER[variant]


@pytest.mark.parametrize("depths, variant", [(d, v) for d, maps in BY_HAND.items() for v in maps])
def test_other_depths_follow_the_documented_rule(depths, variant):
    assert layer_map(variant, *depths) == BY_HAND[depths][variant]


def test_every_map_reads_existing_layers_and_ends_at_the_last_layer():
    for n in range(1, 25):
        for k in range(1, 9):
            for variant in VARIANTS:
                layers = layer_map(variant, n, k)
                assert len(layers) == k and all(group for group in layers)
                assert all(1 <= x <= n for group in layers for x in group), (variant, n, k)
                assert layers[-1][-1] == n, (variant, n, k)  # the deepest level reads the last layer
                firsts = [group[0] for group in layers]
                assert firsts == sorted(firsts), (variant, n, k)  # deeper levels never read lower layers


def test_layer_map_errors_name_the_variant_and_the_sizes():
    with pytest.raises(ValueError, match=r"unknown variant 'deep'; choose from \('flat'"):
        layer_map("deep", 12, 6)
    with pytest.raises(ValueError, match="got 0 and 6"):
        layer_map("flat", 0, 6)
    with pytest.raises(ValueError, match="got 12 and 0"):
        layer_map("flat", 12, 0)


def test_spread_makes_consecutive_near_equal_groups_covering_the_layers_once():
    for n in range(1, 30):
        layers = list(range(101, 101 + n))  # not 1..n: spread works on positions, not values
        for k in range(1, n + 1):
            groups = spread(layers, k)
            assert len(groups) == k and all(groups)
            assert [x for g in groups for x in g] == layers  # consecutive, each layer once, in order
            sizes = [len(g) for g in groups]
            assert max(sizes) - min(sizes) <= 1, (n, k, sizes)


def test_spread_with_fewer_layers_than_groups_shares_single_layers_in_order():
    assert spread([1, 2], 6) == [(1,), (1,), (1,), (2,), (2,), (2,)]
    assert spread([5], 3) == [(5,), (5,), (5,)]
    for n in range(1, 8):
        for k in range(n + 1, 12):
            groups = spread(list(range(1, n + 1)), k)
            assert all(len(g) == 1 for g in groups)
            picked = [g[0] for g in groups]
            assert picked == sorted(picked) and set(picked) == set(range(1, n + 1)) and picked[-1] == n


def test_spread_rejects_nothing_to_spread():
    with pytest.raises(ValueError, match="cannot spread 0 layer"):
        spread([], 2)
    with pytest.raises(ValueError, match="over 0 group"):
        spread([1, 2], 0)


def test_parse_layer_map_reads_levels_and_layers():
    assert parse_layer_map("1:4;2:5,6", 12, 2) == ((4,), (5, 6))
    assert parse_layer_map("2:12;1:1,2,3", 12, 2) == ((1, 2, 3), (12,))  # any order of levels
    assert parse_layer_map("1:4;2:5;3:6,7;4:8,9;5:10,11;6:12", 12, 6) == PAPER["hybrid"]


@pytest.mark.parametrize("text, message", [
    ("1:4", r"must name each level 1\.\.2 once, got levels \[1\]"),
    ("1:4;3:5", r"got levels \[1, 3\]"),
    ("1:0;2:5", r"layers \[0\] do not exist: the model has layers 1\.\.12"),
    ("1:4;2:13,14", r"layers \[13, 14\] do not exist"),
    ("garbage", r"a layer map is 'level:layer,layer;level:layer\.\.\.', got 'garbage'"),
    ("1:4;2:", "got '1:4;2:'"),
    ("1:4;2:x", "got '1:4;2:x'"),
    ("1:4:5;2:6", "got '1:4:5;2:6'"),
    ("", "got ''"),
    ("1:4;1:5;2:6", "names level 1 twice"),
])
def test_parse_layer_map_rejects_bad_maps_with_a_message(text, message):
    with pytest.raises(ValueError, match=message):
        parse_layer_map(text, 12, 2)


# ----- the loss --------------------------------------------------------------------------------------


def test_level_weighted_bce_equals_the_flat_bce_over_all_labels():
    sizes = [2, 3, 7, 1]  # unequal, so an unweighted mean of the levels' losses would differ
    logits = [torch.randn(5, k) * 3 for k in sizes]
    targets = [(torch.rand(5, k) < 0.4).float() for k in sizes]
    flat = F.binary_cross_entropy_with_logits(torch.cat(logits, dim=1), torch.cat(targets, dim=1))
    torch.testing.assert_close(level_weighted_bce(logits, targets), flat, **TOL)
    unweighted = sum(F.binary_cross_entropy_with_logits(x, t) for x, t in zip(logits, targets)) / len(sizes)
    assert abs(unweighted - flat) > 1e-3  # the weights matter for this example
    # targets may come as integers (multi-hot from a data loader)
    torch.testing.assert_close(level_weighted_bce(logits, [t.long() for t in targets]), flat, **TOL)


def test_level_weighted_bce_has_the_flat_gradient():
    sizes = [3, 4]
    logits = [torch.randn(2, k, requires_grad=True) for k in sizes]
    targets = [(torch.rand(2, k) < 0.5).float() for k in sizes]
    level_weighted_bce(logits, targets).backward()
    flat = torch.cat([x.detach() for x in logits], dim=1).requires_grad_()
    F.binary_cross_entropy_with_logits(flat, torch.cat(targets, dim=1)).backward()
    torch.testing.assert_close(torch.cat([x.grad for x in logits], dim=1), flat.grad, **TOL)


# ----- the classifier --------------------------------------------------------------------------------


def test_each_levels_logits_are_its_linear_over_the_concatenated_cls_vectors():
    B, T, C, L = 3, 4, 5, 4
    hidden_states = [torch.randn(B, T, C) for _ in range(L + 1)]  # embeddings first
    layers = ((1,), (2, 4), (3, 4, 1))
    sizes = (2, 3, 6)
    model = StructuredClassifier(C, sizes, layers, dropout=0.0).eval()
    logits = model(hidden_states)
    assert [tuple(x.shape) for x in logits] == [(B, k) for k in sizes]
    for n, (group, linear) in enumerate(zip(layers, model.classifiers)):
        assert linear.in_features == len(group) * C
        c = torch.cat([hidden_states[i][:, 0] for i in group], dim=-1)  # layer i is hidden_states[i]
        torch.testing.assert_close(logits[n], c @ linear.weight.T + linear.bias, **TOL)
    # Only the [CLS] position is read: changing the other tokens changes nothing.
    changed = [torch.cat([h[:, :1], torch.randn(B, T - 1, C)], dim=1) for h in hidden_states]
    for a, b in zip(logits, model(changed)):
        torch.testing.assert_close(a, b, atol=0.0, rtol=0.0)


def test_prior_biases_make_the_zero_input_scores_the_smoothed_training_frequencies():
    model = StructuredClassifier(4, (2, 3), ((1,), (2,)), dropout=0.0).eval()
    targets = [torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 0.0]]),  # level 1: counts 2, 0 of N = 3
               torch.tensor([[0.0, 1.0, 1.0], [0.0, 1.0, 0.0], [0.0, 1.0, 0.0]])]  # level 2: counts 0, 3, 1
    model.init_biases_to_priors(targets)
    torch.testing.assert_close(torch.sigmoid(model.classifiers[0].bias), torch.tensor([2.5, 0.5]) / 4, **TOL)
    torch.testing.assert_close(torch.sigmoid(model.classifiers[1].bias), torch.tensor([0.5, 3.5, 1.5]) / 4,
                               **TOL)
    # With [CLS] vectors of zeros the scores are exactly the priors; the weights are left as they were.
    zeros = [torch.zeros(1, 2, 4) for _ in range(3)]
    torch.testing.assert_close(torch.sigmoid(model(zeros)[0][0]), torch.tensor([2.5, 0.5]) / 4, **TOL)


def test_the_classifier_rejects_a_map_for_another_number_of_levels():
    with pytest.raises(ValueError, match="2 levels but a layer map for 3"):
        StructuredClassifier(8, [2, 3], ((1,), (2,), (3,)))


def test_level_targets_by_hand():
    levels = [["a", "b"], ["a.x", "b.y", "b.z"]]
    label_sets = [frozenset({"a", "a.x"}), frozenset({"b", "b.y", "b.z"}), frozenset(),
                  frozenset({"b", "other"})]
    top, second = level_targets(label_sets, levels)
    assert top.tolist() == [[1, 0], [0, 1], [0, 0], [0, 1]]
    assert second.tolist() == [[1, 0, 0], [0, 1, 1], [0, 0, 0], [0, 0, 0]]  # labels of no level are ignored
    assert top.dtype == second.dtype == torch.float32


# ----- R-Precision by hand -----------------------------------------------------------------------------


def test_r_precision_with_two_gold_labels_and_one_in_the_top_two():
    scores = np.array([0.9, 0.8, 0.1, 0.3])
    assert r_precision(scores, np.array([1, 0, 1, 0])) == pytest.approx(0.5)  # top 2: labels 0, 1
    assert r_precision(scores, np.array([0, 0, 1, 1])) == pytest.approx(0.0)


def test_r_precision_with_one_gold_label_looks_at_the_top_label_only():
    scores = np.array([0.2, 0.7, 0.1])
    assert r_precision(scores, np.array([0, 1, 0])) == pytest.approx(1.0)
    assert r_precision(scores, np.array([1, 0, 0])) == pytest.approx(0.0)  # second best does not count


def test_r_precision_all_correct_and_all_gold():
    scores = np.array([0.1, 0.9, 0.3, 0.8, 0.2])
    assert r_precision(scores, np.array([0, 1, 0, 1, 0])) == pytest.approx(1.0)
    assert r_precision(scores, np.array([0, 1, 1, 1, 0])) == pytest.approx(1.0)  # R = 3: top 3 = 1, 3, 2
    assert r_precision(scores, np.ones(5)) == pytest.approx(1.0)  # R = K: every label is in the top R


def test_r_precision_breaks_ties_by_label_order():
    tied = np.array([0.5, 0.5, 0.5, 0.5])
    assert r_precision(tied, np.array([1, 0, 0, 0])) == pytest.approx(1.0)  # label 0 ranks first
    assert r_precision(tied, np.array([0, 0, 0, 1])) == pytest.approx(0.0)
    assert r_precision(tied, np.array([0, 1, 1, 0])) == pytest.approx(0.5)  # top 2 = labels 0, 1
    assert r_precision(np.array([0.2, 0.7, 0.7]), np.array([0, 0, 1])) == pytest.approx(0.0)  # 1 before 2


def test_r_precision_without_gold_labels_raises():
    with pytest.raises(ValueError, match="without gold labels"):
        r_precision(np.array([0.3, 0.7]), np.array([0, 0]))


def test_mean_r_precision_skips_documents_without_gold_labels():
    scores = np.array([[0.9, 0.8, 0.1], [0.2, 0.7, 0.1], [0.5, 0.4, 0.3]])
    gold = np.array([[1, 0, 1], [0, 1, 0], [0, 0, 0]])  # 0.5, 1.0, no gold
    value, count = mean_r_precision(scores, gold)
    assert value == pytest.approx(0.75) and count == 2
    assert mean_r_precision(scores, np.zeros((3, 3))) == (0.0, 0)
    assert mean_r_precision(np.zeros((0, 3)), np.zeros((0, 3))) == (0.0, 0)  # no documents at all


def test_r_precision_report_per_level_micro_and_macro_by_hand():
    scores = [np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]]),
              np.array([[0.5, 0.3, 0.1], [0.1, 0.2, 0.9], [0.3, 0.2, 0.1]]),
              np.array([[0.7], [0.1], [0.3]])]
    targets = [np.array([[1, 0], [1, 0], [0, 1]]),  # R = 1 each: 1, 0, 0 -> 1/3 over 3 documents
               np.array([[1, 1, 0], [0, 0, 0], [0, 1, 0]]),  # 1.0, skipped, 0.0 -> 1/2 over 2
               np.zeros((3, 1), dtype=int)]  # no document has a gold label on level 3
    report = r_precision_report(scores, targets)
    assert report["level1"] == pytest.approx(1 / 3) and report["level1_documents"] == 3
    assert report["level2"] == pytest.approx(1 / 2) and report["level2_documents"] == 2
    assert report["level3"] == 0.0 and report["level3_documents"] == 0
    assert report["macro"] == pytest.approx((1 / 3 + 1 / 2) / 2)  # level 3 left out, not averaged in as 0
    # Micro over the 6 labels side by side: document 0 has R = 3, top 3 = labels 0 (0.9), 5 (0.7), 2 (0.5),
    # two gold -> 2/3; document 1: R = 1, top = label 4 (0.9), not gold -> 0; document 2: R = 2, top 2 =
    # labels 0 (0.6), 1 (0.4), one gold -> 1/2.
    assert report["micro"] == pytest.approx((2 / 3 + 0 + 1 / 2) / 3)
    assert set(report) == {"level1", "level1_documents", "level2", "level2_documents", "level3",
                           "level3_documents", "micro", "macro"}


def test_r_precision_report_with_no_gold_anywhere_is_all_zero():
    report = r_precision_report([np.ones((2, 2))], [np.zeros((2, 2))])
    assert report == {"level1": 0.0, "level1_documents": 0, "micro": 0.0, "macro": 0.0}
