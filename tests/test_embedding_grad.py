"""experiments/embedding_grad.py's kept gradient against nn.Embedding's dense one: equal bit for bit (the same
sums in the same order), step after step, whatever zero_grad does in between."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from minbert.config import BertConfig
from experiments.embedding_grad import RowGradEmbedding, use_fast_embedding_grad
from minbert.model import BertModel


def batches(config: BertConfig, n: int):
    g = torch.Generator().manual_seed(5)
    for i in range(n):
        mask = torch.ones(3, 6 + i % 3, dtype=torch.long)
        mask[1, 4:] = 0  # padding: id 0, which gets no gradient
        ids = torch.randint(1, 12, mask.shape, generator=g) * mask  # few ids: rows repeat within a batch
        yield ids, mask


def backward(model: BertModel, ids, mask, seed: int) -> None:
    out = model(ids, mask).last_hidden_state
    weights = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed))
    (out * weights).sum().backward()


def pair():
    config = BertConfig.tiny(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    torch.manual_seed(0)
    readable = BertModel(config).train()
    fast = use_fast_embedding_grad(copy.deepcopy(readable))
    return config, readable, fast


def grads(model: nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


def assert_equal(a: nn.Module, b: nn.Module) -> None:
    ga, gb = grads(a), grads(b)
    assert ga.keys() == gb.keys()
    for name in ga:
        assert torch.equal(ga[name], gb[name]), name


def test_gradients_equal_step_after_step_and_the_storage_is_kept():
    config, readable, fast = pair()
    assert type(fast.embeddings.word_embeddings) is RowGradEmbedding
    pointers = set()
    for step, (ids, mask) in enumerate(batches(config, 4)):
        for model in (readable, fast):
            model.zero_grad(set_to_none=True)
            backward(model, ids, mask, step)
            model.embeddings.word_embeddings.weight.grad.mul_(0.5)  # as clipping scales it
        assert_equal(readable, fast)
        assert fast.embeddings.word_embeddings.weight.grad[0].eq(0).all()  # the padding row
        pointers.add(fast.embeddings.word_embeddings.weight.grad.data_ptr())
    assert len(pointers) == 1  # no copy: autograd took the kept tensor as .grad each time


@pytest.mark.parametrize("set_to_none", [True, False])
def test_two_backwards_before_zero_grad_add_up_as_torch_does(set_to_none):
    config, readable, fast = pair()
    data = list(batches(config, 6))
    for step in range(3):
        for model in (readable, fast):
            model.zero_grad(set_to_none=set_to_none)
            for i in (2 * step, 2 * step + 1):
                backward(model, *data[i], i)
        assert_equal(readable, fast)


def test_a_nan_scale_does_not_stay_in_the_rows_the_next_batch_leaves_alone():
    config, readable, fast = pair()
    data = list(batches(config, 2))
    backward(fast, *data[0], 0)
    fast.embeddings.word_embeddings.weight.grad.mul_(float("nan"))
    fast.zero_grad(set_to_none=True)
    backward(fast, *data[1], 1)
    backward(readable, *data[1], 1)
    assert_equal(readable, fast)


def test_frozen_or_without_grad_it_is_nn_embedding():
    config, readable, fast = pair()
    ids, mask = next(batches(config, 1))
    with torch.no_grad():
        assert torch.equal(readable(ids, mask).last_hidden_state, fast(ids, mask).last_hidden_state)
    fast.requires_grad_(False)
    assert fast(ids, mask).last_hidden_state.grad_fn is None
    assert list(readable.state_dict()) == list(fast.state_dict())
