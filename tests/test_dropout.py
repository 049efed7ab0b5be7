"""minbert/fast/dropout.py against what torch.nn.Dropout promises: drop rate, scaling, eval, gradients."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from minbert.fast.dropout import Dropout, dropout, keep_mask, keep_masks


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_drops_a_share_p_and_keeps_the_expected_value(p):
    torch.manual_seed(0)
    x = torch.ones(1_000_003)  # not a multiple of 4: the last 64-bit draw is used in part
    y = dropout(x, p)
    dropped = (y == 0).double().mean().item()
    assert abs(dropped - p) < 5 * (p * (1 - p) / x.numel()) ** 0.5  # within 5 standard errors
    assert torch.allclose(y[y != 0], torch.full_like(y[y != 0], 1 / (1 - p)))
    assert abs(y.double().mean().item() - 1.0) < 0.01


def test_mask_elements_are_independent_of_their_neighbours():
    # Four numbers come from one 64-bit draw: neighbours must still be kept independently.
    torch.manual_seed(0)
    kept = keep_mask((400_000,), 0.5, torch.float32) > 0
    pairs = kept.view(-1, 4).float()
    for i in range(3):
        both = (pairs[:, i] * pairs[:, i + 1]).mean().item()
        assert abs(both - 0.25) < 0.01


def test_evaluation_and_p_zero_return_the_input_itself():
    x = torch.randn(3, 5)
    assert dropout(x, 0.3, training=False) is x
    assert dropout(x, 0.0) is x
    module = Dropout(0.3).eval()
    assert module(x) is x


def test_p_one_drops_everything():
    assert torch.equal(dropout(torch.randn(4, 4), 1.0), torch.zeros(4, 4))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_keeps_shape_and_dtype(dtype):
    x = torch.randn(2, 3, 7, dtype=dtype)
    y = dropout(x, 0.2)
    assert y.shape == x.shape and y.dtype == dtype


def test_gradient_is_the_same_mask():
    torch.manual_seed(3)
    x = torch.randn(64, 33, requires_grad=True)
    y = dropout(x, 0.25)
    y.sum().backward()
    kept = y.detach() != 0
    expected = torch.where(kept, torch.tensor(1 / 0.75), torch.tensor(0.0))
    assert torch.allclose(x.grad, expected)


def test_module_matches_nn_dropout_interface():
    ours, theirs = Dropout(0.1), nn.Dropout(0.1)
    assert ours.p == theirs.p and dict(ours.state_dict()) == dict(theirs.state_dict()) == {}
    assert repr(ours) == "Dropout(p=0.1)"
    with pytest.raises(ValueError, match="dropout probability"):
        Dropout(1.5)
    with pytest.raises(ValueError, match="dropout probability"):
        dropout(torch.ones(2), -0.1)


def test_same_seed_same_mask():
    torch.manual_seed(7)
    a = dropout(torch.ones(1000), 0.3)
    torch.manual_seed(7)
    b = dropout(torch.ones(1000), 0.3)
    assert torch.equal(a, b)


def test_keep_masks_of_one_draw_equal_one_keep_mask_per_shape_in_turn():
    # the unpadded kernel draws every sequence's attention mask at once: the same numbers, bit for bit
    shapes = [(1, 3, 5, 5), (1, 3, 2, 2), (7,), (1, 3, 1, 1)]  # sizes not multiples of 4 included
    torch.manual_seed(11)
    together = keep_masks(shapes, 0.1, torch.float32)
    after = torch.randint(0, 1000, (3,))
    torch.manual_seed(11)
    one_by_one = [keep_mask(shape, 0.1, torch.float32) for shape in shapes]
    assert all(torch.equal(a, b) for a, b in zip(together, one_by_one))
    assert torch.equal(after, torch.randint(0, 1000, (3,)))  # the generator left where it would have been
