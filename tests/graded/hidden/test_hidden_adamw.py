"""Graded, hidden: the readable AdamW path on a small network, 10 steps against torch.optim.AdamW."""

from __future__ import annotations

import copy

import pytest
import torch
from graded_helpers import check_close, expectation
from torch import nn

from optim.adamw import AdamW

pytestmark = [pytest.mark.component("adamw"), pytest.mark.visibility("after_published")]


@pytest.mark.points(2)
def test_ten_steps_on_a_small_network_match_torch_adamw():
    # Embedding, LayerNorm and linear layers; parameters of very different scales.
    model = nn.Sequential(nn.Embedding(99, 16), nn.LayerNorm(16), nn.Linear(16, 8), nn.GELU(),
                          nn.Linear(8, 3))
    start, batches = copy.deepcopy(model), [torch.randint(1, 99, (2, 6)) for _ in range(10)]
    train(model, AdamW(model.parameters(), lr=1e-3, weight_decay=0.05), batches)
    for number, (name, p) in enumerate(model.named_parameters()):
        check_close(p, torch_trained(start, batches)[number], f"{name} after ten steps on a small network "
                    "(embedding, LayerNorm, linear)", rtol=1e-6, atol=1e-9)


def train(net, optimizer, batches) -> None:
    for ids in batches:
        optimizer.zero_grad()
        net(ids).pow(2).mean().backward()
        optimizer.step()


@expectation
def torch_trained(start, batches) -> list[torch.Tensor]:
    net = copy.deepcopy(start)
    train(net, torch.optim.AdamW(net.parameters(), lr=1e-3, weight_decay=0.05, foreach=False), batches)
    return [p.detach() for p in net.parameters()]
