"""Graded, hidden: the readable AdamW path on a small network, 10 steps against torch.optim.AdamW."""

from __future__ import annotations

import copy

import pytest
import torch
from graded_helpers import check_close
from torch import nn

from optim.adamw import AdamW

pytestmark = [pytest.mark.component("adamw"), pytest.mark.visibility("after_published")]


@pytest.mark.points(2)
def test_ten_steps_on_a_small_network_match_torch_adamw():
    # Embedding, LayerNorm and linear layers; parameters of very different scales.
    model = nn.Sequential(nn.Embedding(99, 16), nn.LayerNorm(16), nn.Linear(16, 8), nn.GELU(),
                          nn.Linear(8, 3))
    ref = copy.deepcopy(model)
    ours = AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
    theirs = torch.optim.AdamW(ref.parameters(), lr=1e-3, weight_decay=0.05, foreach=False)
    for _ in range(10):
        ids = torch.randint(1, 99, (2, 6))
        ours.zero_grad()
        model(ids).pow(2).mean().backward()
        for p, q in zip(model.parameters(), ref.parameters()):
            q.grad = None if p.grad is None else p.grad.clone()
        ours.step()
        theirs.step()
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        check_close(p, q, f"{name} after ten steps on a small network (embedding, LayerNorm, linear)",
                    rtol=1e-6, atol=1e-9)
