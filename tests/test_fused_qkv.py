"""The stacked query/key/value projection (experiments/fused_qkv.py) against BertSelfAttention's three.

Tolerances: in float64 the stacked product equals the three to 1e-12 (outputs and every gradient); under
bf16 autocast both paths round to bf16's 8 bits, so they agree to atol 2e-2 / rtol 2e-2 (about 2 bf16
ulps at these magnitudes); in float32 without autocast, and under LoRA, the readable forward runs, so bit
for bit.
"""

from __future__ import annotations

import pytest
import torch

from minbert.attention import BertSelfAttention
from minbert.config import BertConfig
from experiments.fused_qkv import FusedQKV, use_fused_qkv
from minbert.lora import apply_lora
from minbert.model import BertModel

BF16_TOL = dict(atol=2e-2, rtol=2e-2)


def models(config: BertConfig, lora: bool = False, dtype: torch.dtype = torch.float32, seed: int = 0):
    """The readable model and a fused copy of the same weights (and adapters), both in train mode."""
    torch.manual_seed(seed)
    readable = BertModel(config).to(dtype).train()
    if lora:
        apply_lora(readable, r=4, alpha=8, dropout=0.1)
        for name, p in readable.named_parameters():
            if "lora_B" in name:  # B starts at zero; a nonzero B makes the update count in the test
                torch.nn.init.normal_(p, std=0.5)
    fused = BertModel(config).to(dtype).train()
    if lora:
        apply_lora(fused, r=4, alpha=8, dropout=0.1)
    fused.load_state_dict(readable.state_dict())
    return readable, use_fused_qkv(fused)


def batch(config: BertConfig, seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    attention_mask = torch.tensor([[1] * 7, [1] * 4 + [0] * 3, [1] * 6 + [0]])
    input_ids = torch.randint(1, config.vocab_size, attention_mask.shape, generator=g) * attention_mask
    return input_ids, attention_mask


def run(model: BertModel, config: BertConfig, autocast: bool, seed: int = 2):
    """Output at the real tokens and every trainable parameter's gradient, dropout drawn from `seed`."""
    input_ids, attention_mask = batch(config)
    torch.manual_seed(seed)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        out = model(input_ids, attention_mask).last_hidden_state
    weights = torch.randn(out.shape, dtype=out.dtype, generator=torch.Generator().manual_seed(3))
    (out.float() * weights.float() * attention_mask[..., None]).sum().backward()
    grads = {name: p.grad for name, p in model.named_parameters() if p.requires_grad}
    return out[attention_mask.bool()].float(), grads


def assert_same(a, b, **tol):
    out_a, grads_a = a
    out_b, grads_b = b
    torch.testing.assert_close(out_a, out_b, **tol)
    assert grads_a.keys() == grads_b.keys()
    for name in grads_a:  # the pooler's are None: the loss reads the tokens' outputs
        assert (grads_a[name] is None) == (grads_b[name] is None), name
        if grads_a[name] is not None:
            torch.testing.assert_close(grads_a[name], grads_b[name], **tol, msg=name)


def test_stacked_product_equals_the_three_projections_in_float64():
    config = BertConfig.tiny()
    readable, fused = models(config, dtype=torch.float64)
    # float64 is no low precision, so the fused model would run the readable forward: make it stack
    for module in fused.modules():
        if isinstance(module, FusedQKV):
            module.forward = module.fused_forward
    assert_same(run(readable, config, autocast=False), run(fused, config, autocast=False), atol=1e-12, rtol=1e-12)


def test_under_bf16_autocast_it_agrees_with_the_readable_path():
    config = BertConfig.tiny()
    readable, fused = models(config)
    assert_same(run(readable, config, autocast=True), run(fused, config, autocast=True), **BF16_TOL)


def test_lora_projections_run_the_readable_forward_bit_for_bit_under_autocast():
    config = BertConfig.tiny()
    readable, fused = models(config, lora=True)
    assert_same(run(readable, config, autocast=True), run(fused, config, autocast=True), atol=0, rtol=0)


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_in_float32_it_is_the_readable_path_bit_for_bit(lora):
    config = BertConfig.tiny()
    readable, fused = models(config, lora)
    assert_same(run(readable, config, autocast=False), run(fused, config, autocast=False), atol=0, rtol=0)


def test_names_and_checkpoint_keys_do_not_change():
    config = BertConfig.tiny()
    readable, fused = models(config)
    assert list(readable.state_dict()) == list(fused.state_dict())
    assert all(isinstance(m, FusedQKV) for m in fused.modules() if isinstance(m, BertSelfAttention))
    assert use_fused_qkv(fused) is fused  # a second call changes nothing


def test_an_attention_that_overrides_forward_keeps_its_own():
    class Custom(BertSelfAttention):
        def forward(self, hidden_states, attention_mask, output_attentions=False):
            return super().forward(hidden_states, attention_mask, output_attentions)

    module = Custom(BertConfig.tiny())
    use_fused_qkv(module)
    assert type(module) is Custom
