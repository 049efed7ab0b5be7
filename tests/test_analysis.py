"""The layer measures (minbert/extras/analysis.py): angular distance, entropy and KL divergence by hand,
pairwise_kl against kl_divergence, and LayerStatistics on hand-made hidden states and attentions (uniform
attention, padding invariance, the angular-distance matrix against a direct computation).

Tolerances: 1e-6 for values worked by hand and for statistics compared across padding (float32
attention summed in another order); 1e-10 for pairwise_kl against kl_divergence in float64.
"""

from __future__ import annotations

import math

import pytest
import torch

from minbert.extras.analysis import LayerStatistics, angular_distance, entropy, kl_divergence, pairwise_kl

TOL = dict(atol=1e-6, rtol=1e-6)
F64 = dict(atol=1e-10, rtol=1e-10)


# ----- the measures by hand --------------------------------------------------------------------------


def test_angular_distance_by_hand():
    u = torch.tensor([1.0, 0.0, 0.0])
    cases = [(u, 0.0), (torch.tensor([0.0, 2.0, 0.0]), 0.5), (-u, 1.0),
             (torch.tensor([1.0, 1.0, 0.0]), 0.25), (torch.tensor([-1.0, 1.0, 0.0]), 0.75)]
    for v, expected in cases:
        assert angular_distance(u, v).item() == pytest.approx(expected, abs=1e-6)


def test_angular_distance_is_scale_invariant_symmetric_and_batched():
    u, v = torch.randn(4, 6, dtype=torch.float64), torch.randn(4, 6, dtype=torch.float64)
    d = angular_distance(u, v)
    assert d.shape == (4,)
    torch.testing.assert_close(angular_distance(3.0 * u, 0.25 * v), d, **F64)
    torch.testing.assert_close(angular_distance(v, u), d, **F64)
    expected = torch.tensor([math.acos(torch.dot(a, b) / (a.norm() * b.norm())) / math.pi
                             for a, b in zip(u, v)], dtype=torch.float64)
    torch.testing.assert_close(d, expected, **F64)
    assert angular_distance(u, u).abs().max() < 1e-6  # same direction: 0 (up to arccos near 1)


@pytest.mark.parametrize("k", [1, 2, 5, 12])
def test_entropy_of_uniform_is_log_k_and_of_one_hot_is_zero(k):
    assert entropy(torch.full((k,), 1.0 / k)).item() == pytest.approx(math.log(k), abs=1e-6)
    one_hot = torch.zeros(k)
    one_hot[k // 2] = 1.0
    assert entropy(one_hot).item() == 0.0  # 0 log 0 = 0, 1 log 1 = 0: exact


def test_entropy_by_hand_over_the_last_dimension():
    p = torch.tensor([[0.5, 0.25, 0.25], [0.5, 0.5, 0.0]])
    expected = [1.5 * math.log(2), math.log(2)]  # 0.5 log 2 + 2 * 0.25 log 4; log 2
    torch.testing.assert_close(entropy(p), torch.tensor(expected), **TOL)


def test_kl_divergence_by_hand():
    p = torch.tensor([0.5, 0.25, 0.25])
    q = torch.tensor([0.25, 0.5, 0.25])
    # 0.5 log(0.5 / 0.25) + 0.25 log(0.25 / 0.5) + 0.25 log 1 = 0.5 log 2 - 0.25 log 2
    assert kl_divergence(p, q).item() == pytest.approx(0.25 * math.log(2), abs=1e-6)
    assert kl_divergence(p, p).item() == pytest.approx(0.0, abs=1e-7)
    assert kl_divergence(q, q).item() == pytest.approx(0.0, abs=1e-7)
    # a key P never attends adds nothing (0 log 0 = 0): KL([1, 0] || [0.5, 0.5]) = log 2
    one_sided = kl_divergence(torch.tensor([1.0, 0.0]), torch.tensor([0.5, 0.5])).item()
    assert one_sided == pytest.approx(math.log(2), abs=1e-6)
    # the other way round, Q's 0 is floored at EPS instead of giving infinity
    reverse = kl_divergence(torch.tensor([0.5, 0.5]), torch.tensor([1.0, 0.0])).item()
    assert math.isfinite(reverse) and reverse > 10


def test_pairwise_kl_equals_kl_divergence_for_every_pair():
    p = torch.softmax(torch.randn(2, 3, 4, 6, dtype=torch.float64), dim=-1)  # (..., N = 4, T = 6)
    p[0, 1, 2] = torch.tensor([0.5, 0.0, 0.5, 0.0, 0.0, 0.0], dtype=torch.float64)  # zeros: 0 log 0 = 0
    pairs = pairwise_kl(p)
    assert pairs.shape == (2, 3, 4, 4)
    for i in range(4):
        for j in range(4):
            torch.testing.assert_close(pairs[..., i, j], kl_divergence(p[..., i, :], p[..., j, :]), **F64)
    diagonal = torch.diagonal(pairs, dim1=-2, dim2=-1)
    torch.testing.assert_close(diagonal, torch.zeros(2, 3, 4, dtype=torch.float64), **F64)


# ----- LayerStatistics --------------------------------------------------------------------------------


def random_attention(B: int, L: int, H: int, lengths: list[int], T: int) -> list[torch.Tensor]:
    """L tensors (B, H, T, T): random rows over each document's real keys, 0 on padded keys; the padded
    query rows hold garbage (not even distributions)."""
    attentions = []
    for _ in range(L):
        a = torch.full((B, H, T, T), 7.0)  # garbage everywhere first
        for b, n in enumerate(lengths):
            a[b, :, :n, :] = 0.0
            a[b, :, :n, :n] = torch.softmax(torch.randn(H, n, n), dim=-1)
        attentions.append(a)
    return attentions


def mask_for(lengths: list[int], T: int) -> torch.Tensor:
    return (torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]).long()


def assert_same_result(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    assert a["documents"] == b["documents"] and a["token_rows"] == b["token_rows"]
    for key in ("cls_angular_distance", "attention_entropy", "head_kl", "layer_kl"):
        torch.testing.assert_close(torch.tensor(a[key], dtype=torch.float64),
                                   torch.tensor(b[key], dtype=torch.float64), **TOL)


def test_uniform_attention_gives_entropy_log_n_and_zero_kl():
    B, L, H, T, C = 2, 3, 4, 5, 6
    stats = LayerStatistics()
    hidden_states = [torch.randn(B, T, C) for _ in range(L + 1)]
    stats.add(hidden_states, [torch.full((B, H, T, T), 1.0 / T) for _ in range(L)], torch.ones(B, T))
    result = stats.result()
    assert result["documents"] == 2 and result["token_rows"] == B * T
    assert result["attention_entropy"] == pytest.approx([math.log(T)] * L, abs=1e-6)
    assert result["head_kl"] == pytest.approx([0.0] * L, abs=1e-6)
    assert result["layer_kl"] == [pytest.approx([0.0] * L, abs=1e-6)] * L


def test_uniform_attention_over_the_real_tokens_of_a_padded_document():
    L, H, T, n = 2, 3, 6, 4  # 4 real tokens, 2 padded
    attention = torch.full((1, H, T, T), 9.0)  # garbage in the padded query rows
    attention[0, :, :n] = 0.0
    attention[0, :, :n, :n] = 1.0 / n
    stats = LayerStatistics()
    stats.add([torch.randn(1, T, 8) for _ in range(L + 1)], [attention] * L, mask_for([n], T))
    result = stats.result()
    assert result["token_rows"] == n
    assert result["attention_entropy"] == pytest.approx([math.log(n)] * L, abs=1e-6)
    assert result["head_kl"] == pytest.approx([0.0] * L, abs=1e-6)
    assert result["layer_kl"] == [pytest.approx([0.0] * L, abs=1e-6)] * L


def test_head_and_layer_kl_by_hand():
    # One document, 2 real tokens, 2 layers of 2 heads. Layer 1: both heads uniform. Layer 2: head 0
    # [1/2, 1/2], head 1 [3/4, 1/4] in both query rows, so its head average is [5/8, 3/8].
    u, p = torch.tensor([0.5, 0.5]), torch.tensor([0.75, 0.25])
    layer1 = u.expand(1, 2, 2, 2).clone()
    layer2 = torch.stack([u.expand(2, 2), p.expand(2, 2)])[None]  # (1, H, T, T)
    stats = LayerStatistics()
    stats.add([torch.randn(1, 2, 3) for _ in range(3)], [layer1, layer2], torch.ones(1, 2))
    result = stats.result()
    mean2 = torch.tensor([5 / 8, 3 / 8])
    assert result["attention_entropy"] == pytest.approx([math.log(2), entropy(mean2).item()], abs=1e-6)
    # averaged over the H (H - 1) = 2 ordered pairs of heads
    expected_head_kl = (kl_divergence(u, p) + kl_divergence(p, u)).item() / 2
    assert result["head_kl"] == pytest.approx([0.0, expected_head_kl], abs=1e-6)
    # row: P, column: Q in KL(P || Q)
    assert result["layer_kl"][0] == pytest.approx([0.0, kl_divergence(u, mean2).item()], abs=1e-6)
    assert result["layer_kl"][1] == pytest.approx([kl_divergence(mean2, u).item(), 0.0], abs=1e-6)


def test_a_padded_position_changes_no_result():
    L, H, C, n = 2, 3, 5, 4
    hidden = [torch.randn(1, n, C) for _ in range(L + 1)]
    attention = random_attention(1, L, H, [n], n)
    plain = LayerStatistics()
    plain.add(hidden, attention, torch.ones(1, n))

    # the same document with one padded position: garbage hidden states, probability 0 to the padded key in
    # every real row, and garbage in the padded query row
    padded_hidden = [torch.cat([h, 100 * torch.randn(1, 1, C)], dim=1) for h in hidden]
    padded_attention = []
    for a in attention:
        b = torch.full((1, H, n + 1, n + 1), 7.0)
        b[:, :, :n, :n] = a
        b[:, :, :n, n] = 0.0
        padded_attention.append(b)
    padded = LayerStatistics()
    padded.add(padded_hidden, padded_attention, mask_for([n], n + 1))
    assert_same_result(plain.result(), padded.result())


def test_a_padded_batch_equals_its_documents_added_one_by_one():
    L, H, C, T = 2, 2, 4, 6
    lengths = [6, 3, 5]
    hidden = [torch.randn(3, T, C) for _ in range(L + 1)]
    attention = random_attention(3, L, H, lengths, T)
    batched = LayerStatistics()
    batched.add(hidden, attention, mask_for(lengths, T))
    separate = LayerStatistics()
    for b, n in enumerate(lengths):
        separate.add([h[b:b + 1, :n] for h in hidden], [a[b:b + 1, :, :n, :n] for a in attention],
                     torch.ones(1, n))
    assert_same_result(batched.result(), separate.result())
    assert batched.result()["token_rows"] == sum(lengths) and batched.result()["documents"] == 3


def test_the_angular_distance_matrix_averages_the_cls_distances():
    B, L, T, C = 3, 3, 4, 5
    hidden = [torch.randn(B, T, C) for _ in range(L + 1)]
    stats = LayerStatistics()
    attention = random_attention(B, L, 2, [T] * B, T)
    stats.add([h[:2] for h in hidden], [a[:2] for a in attention], torch.ones(2, T))  # two batches
    stats.add([h[2:] for h in hidden], [a[2:] for a in attention], torch.ones(1, T))
    matrix = torch.tensor(stats.result()["cls_angular_distance"], dtype=torch.float64)
    assert matrix.shape == (L + 1, L + 1)  # layer 0 = the embeddings
    torch.testing.assert_close(matrix, matrix.T, **TOL)
    assert matrix.diagonal().abs().max() < 1e-6
    cls = [h[:, 0].double() for h in hidden]  # (B, C) per layer
    expected = torch.tensor([[angular_distance(cls[i], cls[j]).mean().item() for j in range(L + 1)]
                             for i in range(L + 1)], dtype=torch.float64)
    torch.testing.assert_close(matrix, expected, **TOL)
    assert stats.result()["documents"] == B


def test_result_before_any_batch_raises():
    with pytest.raises(ValueError, match="no batches were added"):
        LayerStatistics().result()
