"""minbert/fast/cast_cache.py: a frozen linear layer under autocast gives autocast's bits with a kept copy.

Bit for bit (the same product on the same bfloat16 numbers): outputs and the input's gradient, before and
after the weight changes in place (LoRA's merge) or is replaced; trainable layers and calls outside autocast
are nn.Linear's.
"""

from __future__ import annotations

import torch
from torch import nn

from minbert.fast.cast_cache import CastCachedLinear, use_cast_cache
from minbert.lora import LoRALinear


def pair(frozen: bool = True) -> tuple[nn.Linear, nn.Linear]:
    torch.manual_seed(0)
    plain = nn.Linear(7, 5)
    plain.requires_grad_(not frozen)
    cached = use_cast_cache(nn.Sequential(nn.Linear(7, 5)))[0]
    cached.load_state_dict(plain.state_dict())
    cached.requires_grad_(not frozen)
    return plain, cached


def run(layer: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    leaf = x.clone().requires_grad_(True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        # not a leaf, as a layer's input in a model (autocast keeps its own cast of a leaf requiring a grad)
        out = layer(leaf * 1.0)
    out.float().square().sum().backward()
    return out, leaf.grad


def test_frozen_layer_under_autocast_gives_autocasts_bits_and_keeps_its_copy():
    plain, cached = pair()
    assert type(cached) is CastCachedLinear
    x = torch.randn(3, 4, 7)
    for _ in range(2):
        assert all(torch.equal(a, b) for a, b in zip(run(plain, x), run(cached, x)))
    kept = cached._cast[5]
    run(cached, x)
    assert cached._cast[5] is kept  # not cast again


def test_a_weight_changed_in_place_or_replaced_is_cast_again():
    plain, cached = pair()
    x = torch.randn(3, 7)
    run(cached, x)
    with torch.no_grad():
        for layer in (plain, cached):
            layer.weight += 0.5  # in place, as LoRA's merge writes
    assert all(torch.equal(a, b) for a, b in zip(run(plain, x), run(cached, x)))
    for layer in (plain, cached):
        layer.bias = nn.Parameter(torch.ones(5), requires_grad=False)
    assert all(torch.equal(a, b) for a, b in zip(run(plain, x), run(cached, x)))


def test_trainable_layers_and_calls_outside_autocast_are_nn_linears():
    plain, cached = pair(frozen=False)
    x = torch.randn(3, 7)
    assert all(torch.equal(a, b) for a, b in zip(run(plain, x), run(cached, x)))
    assert cached._cast is None
    frozen_plain, frozen_cached = pair()
    assert torch.equal(frozen_plain(x), frozen_cached(x))  # fp32, no autocast


def test_a_lora_layers_frozen_base_is_cached_and_its_adapter_trains_as_before():
    torch.manual_seed(1)
    plain = LoRALinear(nn.Linear(7, 5), r=2, alpha=4.0)
    nn.init.normal_(plain.lora_B)
    cached = use_cast_cache(nn.Sequential(LoRALinear(nn.Linear(7, 5), r=2, alpha=4.0)))[0]
    cached.load_state_dict(plain.state_dict())
    assert type(cached.base_layer) is CastCachedLinear
    x = torch.randn(4, 7)
    assert all(torch.equal(a, b) for a, b in zip(run(plain, x), run(cached, x)))
    assert torch.equal(plain.lora_A.grad, cached.lora_A.grad) and torch.equal(plain.lora_B.grad, cached.lora_B.grad)
